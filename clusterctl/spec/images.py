"""Versions an image reference states in its tag, for the image families that encode them.

Tag grammars, as the publishers name their images (checked 2026-11):
- AMD's verl images, ``rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev`` (AMD ROCm docs
  26.02-26.09, verl docs/amd_tutorial): verl, ROCm and vLLM;
- AMD's vLLM images, ``rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4`` (AMD ROCm docs,
  the seeds' guide): ROCm, Python and vLLM;
- verl's own images, ``verlai/verl:vllm0.11.0`` / ``...:app-verl0.6-...-vllm0.11.0-...``: the
  parts that carry a number after a known name.
Other references (``latest``, a digest, an own tag) state nothing, and nothing is assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.spec.models import BuildSpec, JobSpec
from clusterctl.spec.presets import parse_version

# name in the tag -> the versions: field it states
_FIELDS = {"verl": "verl", "rocm": "rocm", "vllm": "vllm", "py": "python", "cuda": "cuda"}
_PART = re.compile(r"(?<![A-Za-z])(verl|rocm|vllm|py|cuda)[-_]?(\d+(?:\.\d+)*)")
_FAMILIES = ("rocm/verl", "rocm/vllm", "verlai/verl")
# verl's own images (verl docker/README.md @ b178a3c, Jan 2026):
# - `vllm012.dev3`, `vllm024.latest`: vLLM 0.12 / 0.24 written without the dot, the stable
#   line built by docker/Dockerfile.stable.vllm (`git clone -b v0.12.0 .../vllm.git`);
# - `app-verl0.5-...`, `base-verl0.5-...`: "verl0.5" names the image line (the dependencies
#   of that verl release); the Dockerfiles install no verl (docker/verl0.5-*/Dockerfile.app.*),
#   so the tag states no verl version.
_VERLAI_COMPACT_VLLM = re.compile(r"vllm0(\d{2})(?!\d)")


def image_versions(image: str) -> dict[str, str]:
    """versions: fields the image's tag states, e.g. {"verl": "0.6.0", "rocm": "7.0"}."""
    name, _, tag = image.split("@", 1)[0].rpartition(":")
    if "/" in tag or not name:
        return {}  # a registry port, not a tag
    repository = name.split("/", 1)[1] if name.count("/") >= 2 else name
    if repository not in _FAMILIES:
        return {}
    found: dict[str, str] = {}
    if repository == "verlai/verl":
        compact = _VERLAI_COMPACT_VLLM.match(tag)
        if compact:
            return {"vllm": f"0.{int(compact.group(1))}"}
    for key, version in _PART.findall(tag):
        if repository == "verlai/verl" and key == "verl":
            continue
        found.setdefault(_FIELDS[key], version)
    return found


def same_release(declared: str, stated: str) -> bool:
    """True when a declared version agrees with what a tag states, to the tag's precision:
    a tag's "7.0" agrees with "7.0.2", "0.11.0" (of "0.11.0.dev") with "0.11.0"."""
    have, want = parse_version(declared), parse_version(stated)
    if have is None or want is None:
        return declared == stated
    shorter = min(len(have.release), len(want.release))
    return have.release[:shorter] == want.release[:shorter]


@dataclass(frozen=True)
class BaseImage:
    """What a base image gives pip: its Python and its C library (manylinux tags)."""

    python: str  # major.minor
    glibc: tuple[int, int]
    source: str


# FROM of each Dockerfile flavour when the spec names no base_image.
DEFAULT_BASES = {
    # verl docker/rocm/Dockerfile.rocm (checked 2026-11)
    "rocm": "rocm/primus:v26.4",
    # OpenRLHF dockerfile/Dockerfile (checked 2026-11)
    "cuda": "nvcr.io/nvidia/pytorch:26.03-py3",
    # Docker Official Images, python:3.11-slim-bookworm (Debian 12, glibc 2.36)
    "cpu": "python:3.11-slim-bookworm",
}

# The bases whose Python and glibc are known, so pip can resolve for them without the image.
BASES = {
    "rocm/primus:v26.4": BaseImage(
        "3.12",
        (2, 35),
        "verl docker/rocm/README.md: Python 3.12 (checked 2026-11); its glibc is not stated, "
        "so Ubuntu 22.04's 2.35 is assumed (the older of AMD's current Ubuntu bases): a wheel "
        "that needs a newer glibc is reported, never silently accepted",
    ),
    "nvcr.io/nvidia/pytorch:26.03-py3": BaseImage(
        "3.12",
        (2, 39),
        "NVIDIA PyTorch container release notes 26.03: Ubuntu 24.04 (glibc 2.39), Python 3.12",
    ),
    "python:3.11-slim-bookworm": BaseImage(
        "3.11", (2, 36), "Docker Official Images python:3.11-slim-bookworm: Debian 12, glibc 2.36"
    ),
}


def base_image(build: BuildSpec) -> str:
    """The FROM of the rendered Dockerfile."""
    return build.base_image or DEFAULT_BASES[build.dockerfile or "cpu"]


# flash-attn builds against the torch already in the image, which pip's build isolation
# hides: OpenRLHF's dockerfile/Dockerfile installs it with --no-build-isolation before
# OpenRLHF, whose 0.9.10-0.11.2 wheels require flash-attn==2.8.3 (Requires-Dist).
NO_BUILD_ISOLATION = {"flash-attn"}
OPENRLHF_FLASH_ATTN = "flash-attn==2.8.3"


@dataclass(frozen=True)
class Requirement:
    text: str  # as pip reads it
    origin: tuple[str | int, ...]  # the spec field that asked for it
    stage: int = 0  # install order: 0 the stack, 1 built without isolation, 2 the framework


def build_requirements(spec: JobSpec) -> list[Requirement]:
    """Every pip requirement the rendered Dockerfile installs, with the field behind it, in
    OpenRLHF's dockerfile/Dockerfile order: the stack (vLLM brings its torch), then what is
    built against that torch without isolation, then the framework."""
    build = spec.container.build
    if build is None:
        return []
    v = spec.versions
    out = [Requirement(f"ray[default]=={v.ray}", ("versions", "ray"))]
    # vLLM from the index only for CUDA: ROCm builds come with the base image or from source
    # (verl docker/rocm/Dockerfile.rocm builds vLLM; AMD's rocm/vllm images ship it).
    if v.vllm and build.dockerfile == "cuda":
        out.append(Requirement(f"vllm=={v.vllm}", ("versions", "vllm")))
    if v.torch and build.dockerfile == "cpu":
        out.append(Requirement(f"torch=={v.torch}", ("versions", "torch")))
    for i, text in enumerate(build.pip_packages):
        stage = 1 if requirement_name(text) in NO_BUILD_ISOLATION else 0
        out.append(Requirement(text, ("container", "build", "pip_packages", i), stage))
    if v.openrlhf and build.dockerfile == "cuda":
        out.append(Requirement(OPENRLHF_FLASH_ATTN, ("versions", "openrlhf"), 1))
    if v.verl:
        out.append(Requirement(f"verl=={v.verl}", ("versions", "verl"), 2))
    if v.openrlhf:
        out.append(Requirement(f"openrlhf=={v.openrlhf}", ("versions", "openrlhf"), 2))
    return out


def requirement_name(text: str) -> str:
    from packaging.requirements import Requirement as Parsed
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(Parsed(text).name))


def duplicate_requirements(spec: JobSpec) -> list[tuple[tuple[str | int, ...], str]]:
    """(field, message) for every package the Dockerfile would pin twice."""
    seen: dict[str, Requirement] = {}
    out = []
    # versions: first, so the entry reported is the extra one the user added
    ordered = sorted(build_requirements(spec), key=lambda r: r.origin[0] != "versions")
    for req in ordered:
        name = requirement_name(req.text)
        if name in seen:
            first = seen[name]
            where = ".".join(str(p) for p in first.origin)
            out.append((req.origin, f"{name} is already installed by {where} ({first.text})"))
        else:
            seen[name] = req
    return out
