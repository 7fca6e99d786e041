"""The GPU presets' jobs on the GPU-shaped dev cluster (`dev-cluster up --gpus-per-node 8`:
SLURM offers 8 GPUs per node as gres with no device), with hardware.logical_gpus: SLURM
allocates the GPUs the job asks for, Ray is told of them without devices. preflight, Ray with
GPU resources, the framework's GPU placement groups and the self-test's GPU ranks (one per
GPU, with the visibility Ray sets) run for real; the first call that needs a device is a
named skip. The examples' own spec, only dev-cluster overrides."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.e2e.test_jobs import containers_of, sbatch

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]

# What turns a GPU example into a dev-cluster job, all of it visible here: the dev image,
# loopback addresses, no fabric, no shared storage. Each test adds its logical GPU count.
DEV_CLUSTER = [
    "slurm.cpus_per_task=null",
    "slurm.mem=null",
    "slurm.partition=null",
    "slurm.exclusive=false",
    "slurm.time=00:15:00",
    "slurm.continuations=0",
    "slurm.checkpoint_grace=0",
    "ray.num_cpus=32",
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


def workload_files(workdir: Path) -> str:
    """The examples' data and model paths, there on every dev node (empty stand-ins: the
    trainer stops at the first call that needs a device), mounted where the examples read
    them: every node's container checks them before Ray starts."""
    for name in ("data/gsm8k/train.parquet", "data/gsm8k/test.parquet",
                 "models/datasets/prompts.jsonl"):  # fmt: skip
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).touch()
    for name in ("models/Llama-3-70B-Instruct", "models/Llama-3-70B-RM"):
        (workdir / name).mkdir(parents=True, exist_ok=True)
    return (
        f"container.mounts=[{{source: {workdir / 'data'}, target: /data}}, "
        f"{{source: {workdir / 'models'}, target: /models}}]"
    )


def render_example(workdir: Path, example: str, *sets: str) -> Path:
    args = ["render", str(ROOT / "examples" / example), "-o", str(workdir / "bundle")]
    for assignment in (*DEV_CLUSTER, workload_files(workdir), *sets):
        args += ["--set", assignment]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return workdir / "bundle" / "job.sbatch"


def gpus_slurm_allocated(job_id: str) -> str:
    """The job's GPUs as SLURM allocated them (`scontrol show job -d`: JOB_GRES=gpu:16), or
    "" when it holds none. (squeue's tres-alloc lists gres/gpu only with slurmdbd's TRES
    accounting, which the dev cluster does not run.)"""
    out = subprocess.run(
        ["scontrol", "show", "job", "-d", job_id], capture_output=True, text=True, check=True
    )
    found = re.search(r"JOB_GRES=(\S+)", out.stdout)
    return found.group(1) if found and found.group(1) != "(null)" else ""


def test_verl_example_runs_its_gpu_branches_on_8_logical_gpus_slurm_allocated(
    tmp_path: Path,
) -> None:
    # the MI300X example's own 8 GPUs per node, asked of SLURM as the example asks
    script = render_example(
        tmp_path,
        "verl-gsm8k-mi300x.yaml",
        "slurm.nodes=2",
        "hardware.logical_gpus=8",
        "slurm.gpu_request=gpus-per-node",
    )
    header = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --gpus-per-node=8" in header
    assert "CC_DEVICES=( )" in script.read_text()
    job, rc, _ = sbatch(tmp_path, script)
    assert gpus_slurm_allocated(job.job_id) == "gpu:16"
    log = job.log
    # preflight: the GPU checks are skipped, saying why
    verdicts = json.loads((job.log_dir / "preflight" / "verify.json").read_text())
    gpus = [v for v in verdicts if v["check"] == "gpus"]
    assert gpus and all(v["status"] == "skip" and "logical_gpus" in v["reason"] for v in gpus)
    # Ray offered 8 GPUs per node; verl's trainer pool (STRICT_PACK per node of
    # {CPU: 3, GPU: 1} x 8) was placed
    assert "ray: all 2 nodes joined" in log
    assert "selftest: placement:" in log and "STRICT_PACK 8 x {CPU: 3, GPU: 1}" in log
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
        "hardware.logical_gpus=2",
        "slurm.gpus_per_node=2",  # 2 of the 8 each node offers, asked as the example asks
        "slurm.gres_type=null",
        *roles,
        "workload.args.vllm.num_engines=2",
        "workload.args.vllm.tensor_parallel_size=2",
    )
    assert "#SBATCH --gres=gpu:2" in script.read_text()
    job, rc, _ = sbatch(tmp_path, script)
    assert gpus_slurm_allocated(job.job_id) == "gpu:4"
    log = job.log
    assert "ray: all 2 nodes joined" in log
    assert re.search(r"selftest: placement: .*PACK 4 x \{CPU: 1, GPU: 1\}", log), log
    assert "engines sliced by" in log
    assert "selftest: all-reduce skipped: no CUDA/HIP device in torch" in log
    assert rc != 0 and "phase=workload" in log and "phase=selftest" not in log, log
    assert containers_of(job) == []


def test_verl_with_a_runtime_env_goes_through_ray_job_submit(tmp_path: Path) -> None:
    # logical GPUs asked of SLURM not at all (gpu_request's default with logical_gpus): a
    # cluster whose SLURM has no GPU gres
    script = render_example(
        tmp_path,
        "verl-gsm8k-mi300x.yaml",
        "slurm.nodes=2",
        "hardware.logical_gpus=2",
        "slurm.gpus_per_node=2",
        "selftest.enabled=false",
        "workload.runtime_env={env_vars: {CLUSTERCTL_E2E: submitted}}",
    )
    header = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert header and not [line for line in header if "gpu" in line]
    job, rc, _ = sbatch(tmp_path, script)
    assert gpus_slurm_allocated(job.job_id) == ""
    workload = (job.log_dir / "workload.log").read_text()
    # Ray's job CLI submitted it to the job's own head, and the driver ran there (and found no
    # verl in the dev image)
    assert f"clusterctl-{job.job_id}-" in workload and "No module named" in workload, workload
    assert rc != 0 and "phase=workload" in job.log
    assert containers_of(job) == []
