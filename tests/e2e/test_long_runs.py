"""Long runs on the real dev cluster: a checkpoint inside the time-limit window, a chained
continuation that resumes from it, and a continuation without the node that failed. A small
trainer that counts steps and writes its own checkpoint stands in for the framework."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from tests.conftest import run_cli
from tests.e2e.test_jobs import Job, containers_of, finish, render, sbatch

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]

# Resumes from /ckpt/step; saves and exits on SIGTERM; a resumed run finishes 3 steps later.
TRAINER = """\
import os, signal, sys, time
path = "/ckpt/step"
step = int(open(path).read()) if os.path.exists(path) else 0
resumed = os.path.exists(path)
print(f"resumed at step {step}" if resumed else "fresh start", flush=True)
target = step + 3 if resumed else 10**6
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

def save():
    open(path + ".tmp", "w").write(str(step))
    os.replace(path + ".tmp", path)

while step < target:
    time.sleep(0.5)
    step += 1
    print(f"step {step}", flush=True)
    if stop:
        save()
        print(f"checkpoint saved at step {step}", flush=True)
        sys.exit(0)
save()
print(f"finished at step {step}", flush=True)
"""


def trainer_job(tmp_path: Path, *sets: str) -> Path:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "train.py").write_text(TRAINER)
    return render(
        tmp_path,
        "slurm.nodes=2",
        f"container.mounts=[{{source: {ckpt}, target: /ckpt}}]",
        "workload.command=python3 /ckpt/train.py",
        *sets,
    )


def chain(job: Job) -> dict[str, object]:
    (end,) = [e for e in job.timeline() if e["phase"] == "end"]
    return end


def chained_job(job: Job) -> Job:
    following = chain(job)["next"]
    assert following, "no continuation was submitted"
    return Job(str(following), job.workdir)


def test_time_limit_checkpoint_then_the_continuation_resumes_from_it(tmp_path: Path) -> None:
    # a 2-minute limit, warned 45 s before, or up to 60 s earlier (sbatch(1): SLURM's event
    # resolution), so never before the workload runs: 20 s to save
    script = trainer_job(
        tmp_path,
        "slurm.time=2",
        "slurm.signal_grace=45",
        "slurm.checkpoint_grace=20",
        "container.cleanup_deadline=15",
        "slurm.continuations=1",
    )
    first, rc, _ = sbatch(tmp_path, script)
    assert rc == 75, first.log  # stopped at the time limit after a checkpoint
    phases = [e["phase"] for e in first.timeline()]
    assert phases.index("workload") < phases.index("checkpoint") < phases.index("checkpoint-exited")
    node, phase, cause = first.first_failure()
    assert (node, phase) == ("node1", "checkpoint")
    assert re.fullmatch(
        r"time limit: SLURM's warning, 45s before the limit \(slurm\.signal_grace\); the "
        r"workload exited \d+s after the stop request, within slurm\.checkpoint_grace",
        cause,
    )
    saved = re.search(
        r"checkpoint saved at step (\d+)", (first.log_dir / "workload.log").read_text()
    )
    assert saved, (first.log_dir / "workload.log").read_text()
    assert containers_of(first) == []

    second = chained_job(first)
    assert finish(second) == 0, second.log
    workload = (second.log_dir / "workload.log").read_text()
    assert f"resumed at step {saved.group(1)}" in workload
    assert f"finished at step {int(saved.group(1)) + 3}" in workload
    assert chain(second)["next"] == ""  # finished: the chain ends
    assert (chain(second)["link"], chain(second)["previous"]) == (1, first.job_id)
    status = run_cli("status", second.job_id, cwd=tmp_path)
    assert f"chain: continuation 1, after job {first.job_id}, the chain ends here" in status.stdout
    assert containers_of(second) == []


def test_a_continuation_runs_without_the_node_that_failed(tmp_path: Path) -> None:
    # nodes 1-3 allowed, 2 needed: SLURM picks node1 and node2; node2's Docker engine is dead.
    # Submitted from a directory with a space in its name (issue 29 item 2): SLURM's record of
    # the script and of the batch log must be read whole.
    workdir = tmp_path / "RL runs"
    workdir.mkdir()
    cluster.route_node("node2", "unix:///run/clusterctl-dev/no-such-engine.sock")
    try:
        first, rc, _ = sbatch(
            workdir,
            render(
                workdir,
                "slurm.nodes=2",
                "slurm.exclude=node4",
                "slurm.continuations=2",
                "slurm.retry_exclude_bad_nodes=true",
                "workload.command=echo done",
            ),
        )
        assert rc != 0
        assert first.first_failure()[:2] == ("node2", "preflight")
        assert chain(first)["next_excludes"] == "node2"
        # this run's own copy of its batch log, from SLURM's StdOut (in "RL runs/")
        batch_log = first.log_dir / "batch.log"
        assert not batch_log.is_symlink()
        assert "continuation 1 of 2 submitted" in batch_log.read_text()
        second = chained_job(first)
        assert finish(second) == 0, second.log
    finally:
        cluster.route_node("node2", None)
    assert (second.log_dir / "node-names.txt").read_text().split() == ["node1", "node3"]
    excluded = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", second.job_id, "-o", "%x"],  # the excluded nodes
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert excluded in ("node[2,4]", "node2,node4"), excluded
    assert chain(second)["next"] == ""  # it succeeded: no third run


# Ranks on every node all-reduce over gloo, step after step; at step 3 the last node's rank
# hangs in its "data loader" while the others wait in all_reduce: the driver stops printing.
HANG = """\
import socket, time
import ray
import torch
import torch.distributed as dist
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def hang_in_data_loader():
    time.sleep(3600)


@ray.remote(num_cpus=0)
class Rank:
    def setup(self, rank, world, address):
        self.rank, self.world = rank, world
        dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world)

    def step(self, i):
        if self.rank == self.world - 1 and i == 3:
            hang_in_data_loader()
        tensor = torch.ones(1024)
        dist.all_reduce(tensor)
        return float(tensor[0])


ray.init()
nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeName"])
on = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in nodes]
ranks = [Rank.options(scheduling_strategy=strategy).remote() for strategy in on]
with socket.socket() as s:
    s.bind(("", 0))
    port = s.getsockname()[1]
address = f"tcp://{nodes[0]['NodeManagerAddress']}:{port}"
ray.get([r.setup.remote(i, len(ranks), address) for i, r in enumerate(ranks)])
for i in range(1, 1000):
    ray.get([r.step.remote(i) for r in ranks])
    print(f"step {i}", flush=True)
"""


def test_a_stalled_workload_is_caught_with_stack_dumps_and_explained(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "hang.py").write_text(HANG)
    job, rc, _ = sbatch(
        tmp_path,
        render(
            tmp_path,
            f"container.mounts=[{{source: {code}, target: /code}}]",
            "workload.command=python3 /code/hang.py",
            "watch.first_progress_seconds=120",  # the ranks' start-up: its own window
            "watch.stall_seconds=8",
            "watch.progress_pattern=^step [0-9]+",
        ),
    )
    assert rc == 1, job.log
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node1", "workload")
    assert re.fullmatch(
        rf"stalled: no workload progress for \d+s \(watch\.stall_seconds\); evidence in "
        rf"\S+/stall \(clusterctl doctor --job {job.job_id} explains it\)",
        cause,
    )
    assert "step 2" in (job.log_dir / "workload.log").read_text()
    stall = job.log_dir / "stall"
    assert "Node status" in (stall / "ray-status.txt").read_text()
    dumps = {n: (stall / f"{n}.txt").read_text() for n in ("node1", "node2", "node3")}
    assert "hang_in_data_loader" in dumps["node3"]
    assert "all_reduce" in dumps["node1"] and "all_reduce" in dumps["node2"]
    assert "stalled" in [e["phase"] for e in job.timeline()]
    assert containers_of(job) == []
    doctor = run_cli("doctor", "--job", job.job_id, "--json", cwd=tmp_path)
    first = json.loads(doctor.stdout)[0]
    assert first["id"] == "stall-evidence"
    assert first["meaning"].startswith("the workload stalled: 2 of 3 ranks wait in all_reduce; ")
    assert "node3 pid" in first["meaning"] and "hang_in_data_loader" in first["meaning"]
    assert first["cause"].startswith("the collective waits for the rank(s) elsewhere: node3 ")
