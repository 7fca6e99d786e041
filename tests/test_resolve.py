"""pip's own resolver judges the Dockerfiles' pip sets for their base's Python and platform.

Tests marked `index` ask the real package index (PyPI); the rest feed pip's captured output
to the judge or have the real pip read a stand-in wheel.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from clusterctl.spec.images import BASES
from clusterctl.spec.loader import load_spec
from clusterctl.spec.resolve import (
    Resolution,
    gather_resolution,
    judge_resolution,
    platform_tags,
    standin_wheel,
)
from tests.conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples"
ORL_H800 = EXAMPLE / "openrlhf-70b-h800.yaml"
VERL_ON_H100 = [
    "hardware.preset=h100",
    "container.build.dockerfile=cuda",
    "container.build.base_image=nvcr.io/nvidia/pytorch:26.03-py3",
    "versions.vllm=0.24.0",  # verl 0.9.1's own [vllm] extra pins vllm==0.24.0
]
# every preset family (ROCm, CUDA) x framework, the examples among them
STACKS: dict[str, tuple[Path, list[str]]] = {
    "verl-rocm": (EXAMPLE / "verl-gsm8k-mi300x.yaml", []),
    "verl-cuda": (EXAMPLE / "verl-gsm8k-mi300x.yaml", VERL_ON_H100),
    "openrlhf-rocm": (EXAMPLE / "openrlhf-mi300x-single-node.yaml", []),
    "openrlhf-cuda": (EXAMPLE / "openrlhf-70b-h800.yaml", []),
}


def test_platform_tags_follow_the_base_glibc() -> None:
    tags = platform_tags(BASES["rocm/primus:v26.4"])
    assert tags[0] == "manylinux_2_35_x86_64"
    assert "manylinux_2_31_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert "manylinux_2_36_x86_64" not in tags
    assert tags[-1] == "linux_x86_64"


PKG_INFO = """Metadata-Version: 2.2
Name: flash_attn
Version: 2.8.3
Requires-Python: >=3.9
Requires-Dist: torch
Requires-Dist: einops
Dynamic: requires-dist
"""


def test_the_real_pip_resolves_a_standin_wheel(tmp_path: Path) -> None:
    name, version = standin_wheel(tmp_path, PKG_INFO)
    assert (name, version) == ("flash-attn", "2.8.3")
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read("flash_attn-2.8.3.dist-info/METADATA").decode()
    assert "Requires-Dist: einops" in metadata
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links",
         str(tmp_path), "--target", str(tmp_path / "t"), "flash-attn==2.8.3"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    # pip reads the stand-in and asks for what flash-attn requires, which --no-index lacks
    assert "flash-attn" in proc.stdout + proc.stderr
    assert "No matching distribution found for einops" in proc.stderr


CONFLICT = """ERROR: Cannot install openrlhf==0.11.2 and ray[default]==2.44.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested ray==2.44.0
    openrlhf 0.11.2 depends on ray==2.55.0

Additionally, some packages in these conflicts have no matching distributions available for your environment:
    ray

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
"""  # noqa: E501
MISSING = """ERROR: Could not find a version that satisfies the requirement ray[default]==2.0.1 (from versions: 2.48.0, 2.60.0)
ERROR: No matching distribution found for ray[default]==2.0.1
"""  # noqa: E501


def _resolution(output: str) -> Resolution:
    return Resolution(True, returncode=1, output=output, base="b", python="3.12", pip_version="p")


def test_judge_names_the_conflict_from_pips_own_words() -> None:
    spec = load_spec(EXAMPLE / "openrlhf-70b-h800.yaml").spec
    ((field, message),) = judge_resolution(spec, _resolution(CONFLICT))
    assert field == ("versions", "ray")  # the user's own requirement in the conflict
    assert "openrlhf 0.11.2 depends on ray==2.55.0" in message


def test_judge_points_a_missing_release_at_its_field() -> None:
    spec = load_spec(EXAMPLE / "openrlhf-70b-h800.yaml").spec
    ((field, message),) = judge_resolution(spec, _resolution(MISSING))
    assert field == ("versions", "ray")
    assert "No matching distribution found for ray[default]==2.0.1" in message


def test_judge_is_silent_when_pip_succeeds_or_did_not_run() -> None:
    spec = load_spec(EXAMPLE / "openrlhf-70b-h800.yaml").spec
    assert judge_resolution(spec, Resolution(True, returncode=0)) == []
    assert judge_resolution(spec, Resolution(False, reason="offline")) == []


def test_an_unknown_base_says_the_check_did_not_run() -> None:
    result = run_cli(
        "validate", "--resolve-packages", str(EXAMPLE / "verl-gsm8k-mi300x.yaml"),
        "--set", "container.build.base_image=example.org/own/base:1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "pip resolution did not run: the Python and glibc of example.org/own/base:1" in (
        result.stderr
    )


BROKEN_RAY = ("validate", "--resolve-packages", str(ORL_H800), "--set", "versions.ray=2.48.0")


def _resolve(name: str) -> object:
    if name == "broken-ray":
        return run_cli(*BROKEN_RAY, timeout=900)
    path, sets = STACKS[name]
    return gather_resolution(load_spec(path, sets).spec)


def resolve_all() -> dict[str, object]:
    """Every stack resolved against the real index, and `validate` of a broken variant, side
    by side (pip mostly waits on the network)."""
    names = [*STACKS, "broken-ray"]
    with ThreadPoolExecutor(len(names)) as pool:
        return dict(zip(names, pool.map(_resolve, names), strict=True))


# The resolution runs in a process of its own at nice 19 from the start of the session
# (conftest.py: pytest_collection_finish), on the CPU the end-to-end tests leave idle while
# they wait on their jobs; the fixture then only reads its answers.
BACKGROUND: tuple[subprocess.Popen[bytes], Path] | None = None


def start_in_background(out: Path) -> None:
    global BACKGROUND
    log = out.with_suffix(".log").open("wb")
    proc = subprocess.Popen(
        ["nice", "-n", "19", sys.executable, "-m", "tests.test_resolve", str(out)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    BACKGROUND = (proc, out)


def _to_json(found: object) -> dict[str, object]:
    if isinstance(found, Resolution):
        return {"resolution": dataclasses.asdict(found)}
    assert isinstance(found, subprocess.CompletedProcess)
    return {"process": [found.returncode, found.stdout, found.stderr]}


def _from_json(item: dict[str, Any]) -> object:
    if "resolution" in item:
        fields = item["resolution"]
        fields["installed"] = tuple(tuple(pair) for pair in fields["installed"])
        fields["source_only"] = tuple(fields["source_only"])
        return Resolution(**fields)
    code, out, err = item["process"]
    return subprocess.CompletedProcess(list(BROKEN_RAY), code, out, err)


@pytest.fixture(scope="module")
def resolved() -> dict[str, object]:
    if BACKGROUND is None:
        return resolve_all()
    proc, out = BACKGROUND
    proc.wait(timeout=1800)
    assert proc.returncode == 0, out.with_suffix(".log").read_text()[-3000:]
    return {k: _from_json(v) for k, v in json.loads(out.read_text()).items()}


@pytest.mark.index
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_stack_resolves_for_its_base(stack: str, resolved: dict[str, object]) -> None:
    found = resolved[stack]
    assert isinstance(found, Resolution)
    assert found.ran, found.reason
    assert found.returncode == 0, found.output[-2000:]
    installed = dict(found.installed)
    spec = load_spec(*STACKS[stack]).spec
    framework = spec.workload.framework
    assert installed[framework] == getattr(spec.versions, framework)
    assert installed["ray"] == spec.versions.ray
    if spec.versions.vllm:
        assert installed["vllm"] == spec.versions.vllm
    if framework == "openrlhf":
        # source-only releases stood in by their own metadata, flash-attn among them
        assert any(s.startswith("flash-attn 2.8.3") for s in found.source_only)


@pytest.mark.index
def test_a_ray_pin_the_framework_refuses_fails_validate_naming_both(
    resolved: dict[str, object],
) -> None:
    result = resolved["broken-ray"]
    assert isinstance(result, subprocess.CompletedProcess)
    assert result.returncode == 2, result.stderr
    line = next(i for i, t in enumerate(ORL_H800.read_text().splitlines(), 1) if "ray:" in t)
    assert f"examples/openrlhf-70b-h800.yaml:{line}: versions.ray:" in result.stderr
    assert "openrlhf 0.11.2 depends on ray" in result.stderr
    assert "Traceback" not in result.stderr


if __name__ == "__main__":  # the background resolution (start_in_background)
    answers = {name: _to_json(found) for name, found in resolve_all().items()}
    Path(sys.argv[1]).write_text(json.dumps(answers))
