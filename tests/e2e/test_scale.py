"""A 32-node job on the real dev cluster: preflight, containers, every node joined to Ray,
the self-test, the workload, cleanup, no container left. About 5 minutes, so it is marked
`scale` and left out of the default run: `pytest -m scale tests/e2e/test_scale.py`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DEV_CLUSTER_UP
from tests.e2e.test_jobs import containers_of, render, sbatch

pytestmark = [pytest.mark.cluster, pytest.mark.scale]
NODES = 32


def dev_cluster_up(*args: str) -> None:
    subprocess.run(["clusterctl", "dev-cluster", "up", *args], check=True, timeout=600)


@pytest.fixture
def big_cluster() -> Iterator[None]:
    dev_cluster_up("--nodes", str(NODES), "--gpus-per-node", "8")
    try:
        yield
    finally:
        dev_cluster_up(*DEV_CLUSTER_UP)  # what every other test expects


@pytest.mark.usefixtures("big_cluster")
def test_a_32_node_job_joins_every_node_runs_and_leaves_nothing(tmp_path: Path) -> None:
    # every start-up shares this host's 2 cores: 32 nodes joined in 158 to 357 s here
    script = render(tmp_path, f"slurm.nodes={NODES}", "ray.join_deadline=900", selftest=True)
    job, code, _ = sbatch(tmp_path, script)
    assert code == 0, job.log
    assert f"ray: all {NODES} nodes joined" in job.log
    assert f"workload sees {NODES} ray nodes" in job.log
    phases = [entry["phase"] for entry in job.timeline()]
    for phase in ("preflight", "containers", "ray-joined", "selftest", "workload", "cleanup"):
        assert phase in phases, phases
    assert containers_of(job) == []
