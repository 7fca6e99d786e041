"""sidecars: processes beside the trainer, outside Ray, on the real dev cluster."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.e2e.test_jobs import containers_of, render, sbatch

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_workload_starts_once_its_sidecar_listens(tmp_path: Path) -> None:
    port = free_port()
    sidecar = f"{{name: judge, command: 'python3 -m http.server {port}', ready_port: {port}}}"
    workload = (
        'python3 -c "import urllib.request; '
        f"print('judge answered', urllib.request.urlopen('http://127.0.0.1:{port}/').status)\""
    )
    script = render(
        tmp_path,
        "slurm.nodes=2",
        f"sidecars=[{sidecar}]",
        f"workload.command={json.dumps(workload)}",
    )
    job, rc, _ = sbatch(tmp_path, script)
    assert rc == 0, job.log
    assert f"sidecar judge ready on port {port}" in job.log
    assert "judge answered 200" in (job.log_dir / "workload.log").read_text()
    assert "GET / HTTP" in (job.log_dir / "sidecar-judge.log").read_text()
    assert containers_of(job) == []


def test_a_sidecar_that_dies_fails_the_job_naming_it(tmp_path: Path) -> None:
    sidecar = "{name: judge, command: 'echo CUDA error: out of memory; exit 3', ready_port: 18999}"
    job, rc, _ = sbatch(tmp_path, render(tmp_path, "slurm.nodes=2", f"sidecars=[{sidecar}]"))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node1", "sidecars")
    assert cause == "sidecar judge exited before it was ready: CUDA error: out of memory"
    assert containers_of(job) == []
