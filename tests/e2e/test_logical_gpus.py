"""The GPU presets' jobs on the dev cluster, with hardware.logical_gpus: GPUs declared to Ray
without devices. preflight, Ray with GPU resources, the framework's GPU placement groups and
the self-test's GPU ranks (one per GPU, with the visibility Ray sets) run for real; the first
call that needs a device is a named skip. The examples' own spec, only dev-cluster overrides."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.e2e.test_jobs import containers_of, sbatch

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]

# What turns a GPU example into a dev-cluster job, all of it visible here: 2 logical GPUs per
# node, the dev image, loopback addresses, no fabric, no shared storage.
DEV_CLUSTER = [
    "hardware.logical_gpus=2",
    "slurm.gpus_per_node=2",
    "slurm.cpus_per_task=null",
    "slurm.mem=null",
    "slurm.partition=null",
    "slurm.exclusive=false",
    "slurm.time=00:15:00",
    "slurm.continuations=0",
    "slurm.checkpoint_grace=0",
    "ray.num_cpus=8",
    "ray.join_deadline=120",
    "container.image=clusterctl/dev:latest",
    "container.pull=never",
    "container.build=null",
    "container.mounts=[]",
    "container.env_passthrough=[]",
    "network.fabric=ethernet",
    "network.hcas=[]",
    "network.gid_index=null",
    "network.socket_ifname=lo",
    "network.address_source=slurm",
    "network.allow_loopback=true",
    "network.nccl_env={}",
    "lint.allow=[loopback-head]",
    "resume.checkpoint_dir=null",
    "resume.save_every=null",
    "selftest.deadline=240",
]


def render_example(workdir: Path, example: str, *sets: str) -> Path:
    args = ["render", str(ROOT / "examples" / example), "-o", str(workdir / "bundle")]
    for assignment in (*DEV_CLUSTER, *sets):
        args += ["--set", assignment]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return workdir / "bundle" / "job.sbatch"


def test_verl_example_runs_its_gpu_branches_on_logical_gpus(tmp_path: Path) -> None:
    script = render_example(tmp_path, "verl-gsm8k-mi300x.yaml", "slurm.nodes=2")
    header = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert header and not [line for line in header if "gpu" in line]
    assert "CC_DEVICES=( )" in script.read_text()
    job, rc, _ = sbatch(tmp_path, script)
    log = job.log
    # preflight: the GPU checks are skipped, saying why
    verdicts = json.loads((job.log_dir / "preflight" / "verify.json").read_text())
    gpus = [v for v in verdicts if v["check"] == "gpus"]
    assert gpus and all(v["status"] == "skip" and "logical_gpus" in v["reason"] for v in gpus)
    # Ray offered 2 GPUs per node; verl's trainer pool (STRICT_PACK per node of
    # {CPU: 3, GPU: 1} x 2) was placed
    assert "ray: all 2 nodes joined" in log
    assert "selftest: placement:" in log and "STRICT_PACK 2 x {CPU: 3, GPU: 1}" in log
    # one GPU rank per logical GPU, each reaching the first device call: a named skip
    assert "selftest: all-reduce skipped: no CUDA/HIP device in torch (Ray GPU ids" in log
    assert "hardware.logical_gpus" in log
    # the workload is verl's trainer, which the dev image does not hold: it fails there
    assert rc != 0
    assert "phase=workload" in log and "phase=selftest" not in log, log
    assert containers_of(job) == []


def test_openrlhf_example_places_its_vllm_engines_on_logical_gpus(tmp_path: Path) -> None:
    # the 70B example's shape at 2 GPUs per node: every role on 2 x 2 GPUs, colocated; 2 vLLM
    # engines of TP 2 in OpenRLHF's one PACK group with the actor's
    roles = [
        f"workload.args.{role}.{key}=2"
        for role in ("actor", "ref", "critic", "reward")
        for key in ("num_nodes", "num_gpus_per_node")
    ]
    script = render_example(
        tmp_path,
        "openrlhf-70b-h800.yaml",
        "slurm.nodes=2",
        "slurm.gpu_request=gpus-per-node",
        "slurm.gres_type=null",
        *roles,
        "workload.args.vllm.num_engines=2",
        "workload.args.vllm.tensor_parallel_size=2",
    )
    job, rc, _ = sbatch(tmp_path, script)
    log = job.log
    assert "ray: all 2 nodes joined" in log
    assert re.search(r"selftest: placement: .*PACK 4 x \{CPU: 1, GPU: 1\}", log), log
    assert "engines sliced by" in log
    assert "selftest: all-reduce skipped: no CUDA/HIP device in torch" in log
    assert rc != 0 and "phase=workload" in log and "phase=selftest" not in log, log
    assert containers_of(job) == []


def test_verl_with_a_runtime_env_goes_through_ray_job_submit(tmp_path: Path) -> None:
    script = render_example(
        tmp_path,
        "verl-gsm8k-mi300x.yaml",
        "slurm.nodes=2",
        "selftest.enabled=false",
        "workload.runtime_env={env_vars: {CLUSTERCTL_E2E: submitted}}",
    )
    job, rc, _ = sbatch(tmp_path, script)
    workload = (job.log_dir / "workload.log").read_text()
    # Ray's job CLI submitted it to the job's own head, and the driver ran there (and found no
    # verl in the dev image)
    assert f"clusterctl-{job.job_id}-" in workload and "No module named" in workload, workload
    assert rc != 0 and "phase=workload" in job.log
    assert containers_of(job) == []
