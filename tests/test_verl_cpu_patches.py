"""The dev verl image's CPU patches, run against verl's real code: verl 0.5.0 (the judge
Python built from the image's own lock) with the switch on and off, and another verl release
(0.9.1), which they refuse. The image and its e2e runs are in tests/e2e/test_verl_cpu.py."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster, verl_image

PYTHONS = [p for p in os.environ.get("CLUSTERCTL_VERL_PYTHON", "").split(os.pathsep) if p]


def judge_python(version: str) -> str:
    for python in PYTHONS:
        found = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('verl'))"],
            capture_output=True,
            text=True,
        )
        if found.stdout.strip() == version:
            return python
    pytest.skip(f"no Python with verl {version} in CLUSTERCTL_VERL_PYTHON (framework-judges.sh)")


def run_patched(
    version: str, code: str, switch: str | None = "1"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DEV_VERL_CPU_PATCHES"}
    if switch is not None:
        env["DEV_VERL_CPU_PATCHES"] = switch
    env["PYTHONPATH"] = str(verl_image.RECIPE_DIR)
    prelude = "import clusterctl_verl_cpu\n"  # what the image's .pth file does
    return subprocess.run(
        [judge_python(version), "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


PROBE = """
import json, socket
import torch, torch.distributed as dist
import verl.utils.device as device
from verl.utils import fsdp_utils
from verl.workers.rollout.hf_rollout import HFRollout
from omegaconf import OmegaConf
from transformers import AutoConfig, Qwen2Config
out = {}
try:
    out["backend"] = device.get_nccl_backend()
except RuntimeError as exc:
    out["backend"] = str(exc)
out["memory_allocated"] = getattr(torch.cpu, "memory_allocated", lambda: "missing")()
out["pin_memory"] = fsdp_utils.CPUOffloadPolicy(pin_memory=True).pin_memory
config = OmegaConf.create({"n": 4})
out["rollout_n"] = [HFRollout(None, config).config.n, config.n]
Qwen2Config(num_hidden_layers=1).save_pretrained("/tmp/clusterctl-patch-probe")
loaded = AutoConfig.from_pretrained("/tmp/clusterctl-patch-probe",
                                    attn_implementation="flash_attention_2")
out["attn"] = loaded._attn_implementation
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
try:
    dist.init_process_group(backend="cpu:gloo,cpu:gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    out["process_group"] = dist.get_backend()
    dist.destroy_process_group()
except Exception as exc:
    out["process_group"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def test_each_patch_does_what_it_names_on_verl_0_5_0() -> None:
    done = run_patched("0.5.0", PROBE)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {
        "backend": "gloo",
        "memory_allocated": 0,
        "pin_memory": False,
        "rollout_n": [1, 4],  # the rollout samples once; the trainer's config is untouched
        "attn": "sdpa",
        "process_group": "cpu:gloo",  # torch's name for the one backend left
    }


def test_without_the_switch_verl_is_untouched() -> None:
    done = run_patched("0.5.0", PROBE, switch=None)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["backend"] == "No available nccl backend found on device type cpu."
    assert out["memory_allocated"] == "missing" and out["pin_memory"] is True
    assert out["rollout_n"] == [4, 4] and out["attn"] == "flash_attention_2"
    assert "Duplicate device type cpu" in out["process_group"]


def test_another_verl_release_refuses_to_import_with_the_switch_on() -> None:
    done = run_patched("0.9.1", "import verl")
    assert done.returncode != 0
    assert (
        "ImportError: DEV_VERL_CPU_PATCHES=1 but verl is 0.9.1: the CPU patches were written "
        "for verl 0.5.0 only" in done.stderr
    )
    assert run_patched("0.9.1", "import verl", switch=None).returncode == 0


def test_the_lock_agrees_with_the_dev_image_and_names_verl() -> None:
    pins = verl_image.lock_pins()
    assert pins["verl"] == verl_image.VERL_VERSION
    assert pins["torch"] == f"{cluster.TORCH_VERSION}+cpu" and pins["ray"] == cluster.RAY_VERSION
    assert pins["numpy"].startswith("1.")  # verl 0.5.0: numpy<2.0.0


def test_the_image_recipe_follows_every_file_of_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = verl_image.recipe()
    copy = tmp_path / "verl_cpu"
    copy.mkdir()
    for name in ("Dockerfile", *verl_image.CONTEXT_FILES):
        (copy / name).write_bytes((verl_image.RECIPE_DIR / name).read_bytes())
    monkeypatch.setattr(verl_image, "RECIPE_DIR", copy)
    assert verl_image.recipe() == before
    for name in ("Dockerfile", *verl_image.CONTEXT_FILES):
        original = (copy / name).read_bytes()
        (copy / name).write_bytes(original + b"\n")
        assert verl_image.recipe() != before, name
        (copy / name).write_bytes(original)
