"""Read the versions an image really holds, with the Docker engine, and compare them with the
spec's ``versions:``.

Gather: one throw-away container of the image runs a short Python script (standard library
only) that prints what is installed: Python, ray, torch, vllm, verl, openrlhf, the ROCm
release (/opt/rocm/.info/version) and torch's CUDA / HIP build. Judge: a pure function of
that report and the spec.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.spec.images import same_release
from clusterctl.spec.models import JobSpec

PROBE = r"""
import json, platform, importlib.metadata as m
out = {"python": platform.python_version()}
for dist in ("ray", "torch", "vllm", "verl", "openrlhf"):
    try:
        out[dist] = m.version(dist)
    except m.PackageNotFoundError:
        pass
try:
    out["rocm"] = open("/opt/rocm/.info/version").read().strip().split("-")[0]
except OSError:
    pass
try:
    import torch
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    if getattr(torch.version, "hip", None):
        out.setdefault("rocm", torch.version.hip.split("-")[0])
except Exception:
    pass
print(json.dumps(out))
"""

FIELDS = ("python", "ray", "torch", "vllm", "verl", "openrlhf", "rocm", "cuda")


def gather_image_versions(image: str, timeout: float = 300) -> dict[str, str]:
    """Versions installed in ``image`` (a local image: nothing is pulled)."""
    cmd = [
        "docker", "run", "--rm", "--pull=never", "--network", "none",
        "--entrypoint", "python3", image, "-c", PROBE,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise UsageError("--inspect-image needs the docker command") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"reading versions from {image} took over {timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "--help" not in ln]
        reason = lines[-1].removeprefix("docker: ") if lines else "no output"
        raise UsageError(f"cannot read versions from {image}: {reason}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: str(v) for k, v in report.items() if k in FIELDS}


def judge_image_versions(spec: JobSpec, found: dict[str, str]) -> list[tuple[tuple[str, ...], str]]:
    """(field path, message) for every declared version the image contradicts or lacks."""
    out: list[tuple[tuple[str, ...], str]] = []
    for field in FIELDS:
        declared = getattr(spec.versions, field)
        if not declared:
            continue
        have = found.get(field)
        if have is None:
            out.append((("versions", field), f"{field} {declared} is declared, but the image "
                        f"{spec.container.image} has no {field}"))  # fmt: skip
        elif not same_release(have.split("+")[0], declared):
            out.append((("versions", field), f"{field} {declared} is declared, but the image "
                        f"{spec.container.image} has {have}"))  # fmt: skip
    return out
