"""Would the rendered Dockerfile's pip set install? pip's own resolver answers, for the base
image's Python and platform, against the package index, without installing or building.

Gather: one ``pip install --dry-run --report`` for every requirement the Dockerfile installs,
resolved together (so the framework's pins meet the stack's), with ``--python-version``,
``--abi``, every ``--platform`` manylinux tag the base's glibc accepts and
``--only-binary=:all:`` (pip allows no sdist when it resolves for another platform). A package
published only as source (flash-attn, DeepSpeed) builds in the image; here its own metadata
(the sdist's PKG-INFO, read from the index) stands in as a metadata-only wheel, so what it
requires is still resolved. This machine's pip configuration (constraints, extra indexes,
find-links) is left out: the image build does not see it. pip is the pinned ``PIP_JUDGE``
release in a venv of its own: pip 23.2 backtracked for over 15 min on verl 0.9.1's set, where
pip 26.3 answers in about a minute (measured here, 2026-11-22).
Judge: a pure function of pip's exit status and output.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Parsed
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_sdist_filename
from packaging.version import Version

from clusterctl.spec.images import (
    BASES,
    BaseImage,
    base_image,
    build_requirements,
    requirement_name,
)
from clusterctl.spec.models import JobSpec

PIP_JUDGE = "26.3"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "clusterctl"
DEFAULT_INDEX = "https://pypi.org/simple"
MAX_SOURCE_ONLY = 8  # source-only packages stood in before giving up

# pip settings from the environment that describe where the index is; everything else
# (constraints, find-links, the config files) belongs to this machine, not to the image.
_KEPT_ENV = ("PIP_INDEX_URL", "PIP_CERT", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT",
             "PIP_CLIENT_CERT")  # fmt: skip
_UNREACHABLE = re.compile(
    r"NewConnectionError|Max retries exceeded|ProxyError|Temporary failure in name resolution"
    r"|Network is unreachable|Connection refused|ConnectTimeout|ReadTimeoutError"
)
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_USER_ASKED = re.compile(r"The user requested (\S+)")
_CONFLICT = re.compile(r"The conflict is caused by:\n((?:[ \t]+.+\n?)+)")


@dataclass(frozen=True)
class Resolution:
    """What pip said: ``ran`` False when the check could not run (then ``reason`` says why)."""

    ran: bool
    reason: str = ""
    returncode: int = 0
    output: str = ""
    installed: tuple[tuple[str, str], ...] = ()  # (name, version) pip would install
    source_only: tuple[str, ...] = ()  # "name version" stood in by its sdist's metadata
    base: str = ""
    python: str = ""
    pip_version: str = ""


@dataclass
class _Run:
    base: BaseImage
    pip: Path
    tmp: Path
    timeout: float
    standins: dict[str, str] = field(default_factory=dict)


class IndexUnreachable(Exception):
    pass


def platform_tags(base: BaseImage, machine: str = "x86_64") -> list[str]:
    """Every manylinux tag a glibc ``base.glibc`` system accepts, newest first (pip below 24
    does not expand a ``manylinux_2_X`` tag to the older ones itself)."""
    major, minor = base.glibc
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{machine}" for m, name in legacy.items() if m <= minor]
    return [*tags, f"linux_{machine}"]


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _KEPT_ENV}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def judge_pip(version: str = PIP_JUDGE) -> Path:
    """The pinned pip, in a venv of its own under the user's cache (made once)."""
    venv = CACHE / f"pip-{version}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"pip-{version}.", dir=CACHE))
    subprocess.run([sys.executable, "-m", "venv", str(tmp)], check=True, capture_output=True)
    made = subprocess.run(
        [str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", f"pip=={version}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        raise IndexUnreachable(f"cannot install pip {version}: {made.stderr.strip()[-300:]}")
    try:
        os.replace(tmp, venv)
    except OSError:  # another run made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return python


def _pip(run: _Run, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(run.pip), "-m", "pip", *args],
        capture_output=True, text=True, env=_pip_env(), timeout=run.timeout, check=False,
    )  # fmt: skip


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL", DEFAULT_INDEX).rstrip("/")


def _get(url: str, accept: str = "*/*") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            data: bytes = response.read()
            return data
    except OSError as exc:
        raise IndexUnreachable(f"{url}: {exc}") from None


def newest_sdist(name: str, specifier: str, python: str) -> tuple[str, str] | None:
    """(version, url) of the newest source release of ``name`` that ``specifier`` and its
    Requires-Python admit, from the index's JSON pages (PEP 691)."""
    page = json.loads(_get(f"{_index_url()}/{name}/", "application/vnd.pypi.simple.v1+json"))
    wanted = SpecifierSet(specifier)
    best: tuple[Version, str] | None = None
    for f in page.get("files", []):
        if f.get("yanked") or not f["filename"].endswith((".tar.gz", ".zip")):
            continue
        try:
            _, version = parse_sdist_filename(f["filename"])
        except ValueError:
            continue
        needs = f.get("requires-python")
        if needs and Version(python + ".0") not in SpecifierSet(needs):
            continue
        if version in wanted and (best is None or version > best[0]):
            best = (version, f["url"])
    return (str(best[0]), best[1]) if best else None


def sdist_metadata(url: str) -> str:
    """The PKG-INFO at the top of a source release (cached by URL)."""
    key = hashlib.sha256(url.encode()).hexdigest()[:24]
    cached = CACHE / "sdist-metadata" / f"{key}.PKG-INFO"
    if cached.exists():
        return cached.read_text()
    data = _get(url)
    text = None
    if url.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [n for n in z.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
            text = z.read(names[0]).decode() if names else None
    else:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            for member in t:
                if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    extracted = t.extractfile(member)
                    text = extracted.read().decode() if extracted else None
                    break
    if text is None:
        raise IndexUnreachable(f"{url} holds no PKG-INFO")
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(text)
    return text


def standin_wheel(directory: Path, pkg_info: str) -> tuple[str, str]:
    """A wheel holding only a source release's metadata: pip resolves it like the package
    built in the image. Returns (name, version)."""
    meta = Parser().parsestr(pkg_info)
    name, version = meta["Name"], meta["Version"]
    dist = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{dist}-{version}.dist-info"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if meta["Requires-Python"]:
        lines.append(f"Requires-Python: {meta['Requires-Python']}")
    lines += [f"Provides-Extra: {e}" for e in meta.get_all("Provides-Extra") or []]
    lines += [f"Requires-Dist: {r}" for r in meta.get_all("Requires-Dist") or []]
    files = {
        f"{info}/METADATA": "\n".join(lines) + "\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: clusterctl\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / f"{dist}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
    return str(canonicalize_name(name)), version


def _named(text: str) -> Parsed | None:
    """A requirement as pip's messages quote it ("deepspeed==0.19.6;"), or None."""
    try:
        return Parsed(text.rstrip(";"))
    except InvalidRequirement:
        return None


def _source_only(run: _Run, output: str) -> bool:
    """When pip found no wheel for a requirement that has a source release, stand it in and
    say so (True); False when pip's answer stands."""
    missing = _NO_MATCH.search(output)
    if not missing or len(run.standins) >= MAX_SOURCE_ONLY:
        return False
    req = _named(missing.group(1))
    return req is not None and _stand_in(run, req)


def _stand_in(run: _Run, req: Parsed) -> bool:
    name = str(canonicalize_name(req.name))
    if name in run.standins:
        return False
    found = newest_sdist(name, str(req.specifier), run.base.python)
    if found is None:
        return False
    standin_wheel(run.tmp / "standins", sdist_metadata(found[1]))
    run.standins[name] = found[0]
    return True


def gather_resolution(spec: JobSpec, timeout: float = 900) -> Resolution:
    """Ask pip whether the Dockerfile's requirements resolve for the base image."""
    build = spec.container.build
    if build is None:
        return Resolution(False, "the spec builds no image (container.build is not set)")
    base_name = base_image(build)
    base = BASES.get(base_name)
    if base is None:
        return Resolution(False, f"the Python and glibc of {base_name} are not known here "
                          "(clusterctl.spec.images.BASES); build the image instead")  # fmt: skip
    if build.wheelhouse:
        return Resolution(False, "an offline build installs from its wheelhouse, not an index")
    wanted = [r.text for r in build_requirements(spec)]
    target = ["--python-version", base.python, "--implementation", "cp",
              "--abi", "cp" + base.python.replace(".", "")]  # fmt: skip
    for tag in platform_tags(base):
        target += ["--platform", tag]
    try:
        pip = judge_pip()
        with tempfile.TemporaryDirectory(prefix="clusterctl-resolve-") as tmp:
            run = _Run(base, pip, Path(tmp), timeout)
            (run.tmp / "standins").mkdir()
            for req in build_requirements(spec):  # built from source: known before pip runs
                if req.stage == 1:
                    _stand_in(run, Parsed(req.text))
            report = run.tmp / "report.json"
            while True:
                proc = _pip(run, [
                    "install", "--dry-run", "--ignore-installed",
                    "--target", str(run.tmp / "target"), "--report", str(report), *target,
                    "--only-binary=:all:", "--find-links", str(run.tmp / "standins"), *wanted,
                ])  # fmt: skip
                output = proc.stdout + proc.stderr
                if proc.returncode != 0 and _UNREACHABLE.search(output):
                    raise IndexUnreachable(_last(output, proc.returncode))
                if proc.returncode == 0 or not _source_only(run, output):
                    break
            installed: tuple[tuple[str, str], ...] = ()
            if proc.returncode == 0:
                items = json.loads(report.read_text()).get("install", [])
                installed = tuple((i["metadata"]["name"], i["metadata"]["version"])
                                  for i in items)  # fmt: skip
    except IndexUnreachable as exc:
        return Resolution(False, f"the package index is not reachable: {exc}")
    except subprocess.TimeoutExpired:
        return Resolution(False, f"pip did not answer within {timeout:.0f}s")
    return Resolution(
        True,
        returncode=proc.returncode,
        output=output,
        installed=installed,
        source_only=tuple(f"{n} {v}" for n, v in sorted(run.standins.items())),
        base=base_name,
        python=base.python,
        pip_version=PIP_JUDGE,
    )


def _last(output: str, returncode: int) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return lines[-1] if lines else f"pip exited with status {returncode}"


def judge_resolution(spec: JobSpec, found: Resolution) -> list[tuple[tuple[str | int, ...], str]]:
    """(field path, message) when pip cannot install the Dockerfile's requirements."""
    if not found.ran or found.returncode == 0:
        return []
    errors = [ln.removeprefix("ERROR: ") for ln in found.output.splitlines()
              if ln.startswith("ERROR: ") and "ResolutionImpossible" not in ln]  # fmt: skip
    said = errors[-1] if errors else _last(found.output, found.returncode)
    conflict = _CONFLICT.search(found.output + "\n")
    if conflict:  # pip's own account of who wants what
        said = "; ".join([*errors[:1], *(ln.strip() for ln in conflict.group(1).splitlines())])
    where: tuple[str | int, ...] = ("container", "build")
    # the field behind the requirement pip could not place: a missing release, else the
    # first of the user's own requirements in the conflict
    named = _NO_MATCH.findall(found.output) or _USER_ASKED.findall(found.output)
    origins = {requirement_name(r.text): r.origin for r in build_requirements(spec)}
    for text in named:
        req = _named(text)
        name = str(canonicalize_name(req.name)) if req else ""
        if name in origins:
            where = origins[name]
            break
    on = f"{found.base} (Python {found.python})"
    return [(where, f"pip {found.pip_version} cannot install the image's packages on {on}: "
             f"{said}")]  # fmt: skip
