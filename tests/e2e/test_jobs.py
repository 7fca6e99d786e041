"""The generated job.sbatch on the real local cluster: real sbatch, slurmctld, slurmd, dockerd
and Ray. Each failure case must end the job within a bounded time, name the node and the
cause, and leave no container behind on any node."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from clusterctl.jobs.slurm import job_state
from tests.conftest import ROOT, run_cli
from tests.e2e.conftest import docker_socket_group, run_text, system_user

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]
CPU_EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"
# A failing job must end on its own deadlines, not at the time limit: a generous bound that only
# a hang exceeds (how fast it ends is measured in benchmarks/, never asserted here).
FAIL_FAST_DEADLINE = 240

FAIL_LINE = re.compile(r"clusterctl: FAIL node=(\S+) phase=(\S+): (.*)")


@dataclass
class Job:
    job_id: str
    workdir: Path

    @property
    def log(self) -> str:
        (out,) = self.workdir.glob(f"clusterctl-*-{self.job_id}.out")
        return out.read_text()

    @property
    def log_dir(self) -> Path:
        (found,) = (self.workdir / "clusterctl-logs").glob(f"*-{self.job_id}")
        return found

    def timeline(self) -> list[dict[str, object]]:
        """The phase entries (the timeline also holds events: a warning, the first progress)."""
        entries = json.loads((self.log_dir / "timeline.json").read_text())
        return [e for e in entries if "phase" in e]

    def events(self) -> list[dict[str, object]]:
        entries = json.loads((self.log_dir / "timeline.json").read_text())
        return [e for e in entries if "phase" not in e]

    def first_failure(self) -> tuple[str, str, str]:
        match = FAIL_LINE.search(self.log)
        assert match, f"no FAIL line in the batch log:\n{self.log}"
        return match.group(1), match.group(2), match.group(3)


def render(workdir: Path, *sets: str, selftest: bool = False) -> Path:
    """The CPU example's job.sbatch with SETS; the self-test runs only where a test is about
    it (it has its own tests; elsewhere it would add seconds to every job)."""
    args = ["render", str(CPU_EXAMPLE), "-o", str(workdir / "bundle")]
    if not selftest:
        sets = ("selftest.enabled=false", *sets)
    for assignment in sets:
        args += ["--set", assignment]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return workdir / "bundle" / "job.sbatch"


def sbatch(workdir: Path, script: Path, wait: bool = True) -> tuple[Job, int, float]:
    """Submit; with wait, poll until the job ends (faster than sbatch --wait's back-off) and
    return its exit code as SLURM recorded it."""
    start = time.monotonic()
    result = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    job = Job(result.stdout.strip().split(";")[0], workdir)
    if not wait:
        return job, 0, 0.0
    return job, finish(job), time.monotonic() - start


def finish(job: Job) -> int:
    """Wait until the job has left the queue; its exit code as SLURM recorded it."""
    wait_gone(job, 600)
    state = job_state(job.job_id)
    assert state is not None and re.fullmatch(r"\d+:\d+", state.exit_code), state
    code, signal = state.exit_code.split(":")
    return int(code) or int(signal)


def node_state(node: str) -> tuple[str, str]:
    """SLURM's state of NODE and its reason, field by field."""
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-n", node, "-O", "StateLong:|,Reason:|"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    state, reason, _ = out.splitlines()[0].split("|", 2)
    return state, reason


def containers_of(job: Job, docker_host: str | None = None) -> list[str]:
    cmd = [
        "docker",
        *(["-H", docker_host] if docker_host else []),
        "ps",
        "-aq",
        "--filter",
        f"label=clusterctl.job={job.job_id}",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()


def wait_gone(job: Job, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while subprocess.run(
        ["squeue", "-h", "-j", job.job_id], capture_output=True, text=True
    ).stdout.strip():
        assert time.monotonic() < deadline, f"job {job.job_id} still in squeue after {seconds}s"
        time.sleep(0.25)


def wait_for_phase(job: Job, phase: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    timeline = job.workdir / "clusterctl-logs" / f"cpu-smoke-{job.job_id}" / "timeline.jsonl"
    while f'"{phase}"' not in (timeline.read_text() if timeline.exists() else ""):
        assert time.monotonic() < deadline, f"phase {phase} never started"
        time.sleep(0.5)


@pytest.fixture
def node3_engine() -> Iterator[str]:
    """node3 routed to a Docker engine of its own, without the job's image."""
    host = cluster.start_engine("node3", print)
    subprocess.run(
        ["docker", "-H", host, "image", "rm", "-f", cluster.DEV_IMAGE], capture_output=True
    )
    cluster.route_node("node3", host)
    try:
        yield host
    finally:
        cluster.route_node("node3", None)


def test_three_node_job_completes_and_workload_sees_three_nodes(tmp_path: Path) -> None:
    job, rc, _ = sbatch(tmp_path, render(tmp_path, selftest=True))
    assert rc == 0, job.log
    assert "workload sees 3 ray nodes: ['node1', 'node2', 'node3']" in job.log
    assert "selftest: 3 nodes ran tasks; versions identical: python 3." in job.log
    assert "selftest: 6 node pairs reachable, TCP round trip" in job.log
    assert "selftest: gloo all-reduce 16 MB over 3 ranks: algbw" in job.log
    assert "selftest: weight-sync rehearsal: gloo broadcast 16 MB node1 -> node3 in" in job.log
    report = json.loads((job.log_dir / "cluster.json").read_text())["selftest"]
    assert report["ok"] and set(report["versions"]) == {"node1", "node2", "node3"}
    assert len(report["pairs_ms"]) == 6 and report["allreduce_busbw_gbps"] > 0
    # every node offers the CPUs SLURM gave it (1 per node here), checked at join time; the
    # machine-readable result stays in cluster.log, out of the batch log people read
    cluster_log = (job.log_dir / "cluster.log").read_text()
    result = json.loads(cluster_log.split("CLUSTERCTL_RESULT ", 1)[1].splitlines()[0])
    assert result["nodes"] == {f"node{i}": {"CPU": 1.0, "GPU": 0.0} for i in (1, 2, 3)}
    assert "CLUSTERCTL_RESULT" not in job.log and "CLUSTERCTL_PHASE" not in job.log
    assert "phase: ray-joined" in job.log  # the head's phases read like the batch side's
    phases = [e["phase"] for e in job.timeline()]
    assert phases == [
        "setup",
        "preflight",
        "containers",
        "ray-head",
        "ray-joined",
        "selftest",
        "cluster-ready",
        "workload",
        "workload-done",
        "cleanup",
        "end",
    ]
    assert job.timeline()[-1]["status"] == 0
    assert containers_of(job) == []
    assert (job.log_dir / "workload.log").read_text().count("workload sees 3") == 1
    assert not (job.log_dir / "nodes").exists()  # node logs are copied on failure only
    # the preflight judged every node with verify's judges, and said so
    checks = json.loads((job.log_dir / "preflight" / "verify.json").read_text())
    assert {r["node"] for r in checks} == {"node1", "node2", "node3", "*"}
    assert [r for r in checks if r["status"] == "fail"] == []
    assert "clusterctl: node checks on 3 nodes: 0 failed" in job.log


def test_missing_image_on_one_node_fails_in_preflight(tmp_path: Path, node3_engine: str) -> None:
    job, rc, elapsed = sbatch(tmp_path, render(tmp_path))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node3", "preflight")
    assert cause == (
        "image clusterctl/dev:latest is not present on this node and container.pull is never"
    )
    assert elapsed < FAIL_FAST_DEADLINE
    assert containers_of(job) == [] and containers_of(job, node3_engine) == []
    assert "containers" not in [e["phase"] for e in job.timeline()]  # nothing was started


def test_dead_docker_daemon_on_one_node_fails_in_preflight(tmp_path: Path) -> None:
    cluster.route_node("node2", "unix:///run/clusterctl-dev/no-such-engine.sock")
    try:
        job, rc, elapsed = sbatch(tmp_path, render(tmp_path))
    finally:
        cluster.route_node("node2", None)
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node2", "preflight")
    assert cause.startswith("docker daemon not reachable:")
    assert elapsed < FAIL_FAST_DEADLINE and containers_of(job) == []


def test_preflight_judges_fail_the_job_naming_the_node_whose_port_is_taken(
    tmp_path: Path,
) -> None:
    # a fixed dashboard port that something on the head already holds (an ephemeral port:
    # above 32767, outside the default ray.port_range)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        job, rc, elapsed = sbatch(tmp_path, render(tmp_path, f"ray.dashboard_port={port}"))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node1", "preflight")
    assert cause.startswith(f"ports: ports in use: {port}")
    assert elapsed < FAIL_FAST_DEADLINE
    assert "containers" not in [e["phase"] for e in job.timeline()]  # nothing was started


def test_a_node_with_another_image_under_the_same_tag_fails_preflight(
    tmp_path: Path, node3_engine: str
) -> None:
    # node3 holds another image under the same tag, as on a cluster whose nodes were built
    # at different times: the preflight judges compare image IDs across nodes and stop the
    # job before any container starts.
    other = cluster.put_other_image(node3_engine)
    job, rc, elapsed = sbatch(tmp_path, render(tmp_path))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node3", "preflight")
    assert cause.startswith(f"image-digest: image {other}, other nodes sha256:")
    assert elapsed < FAIL_FAST_DEADLINE
    assert "containers" not in [e["phase"] for e in job.timeline()]
    assert containers_of(job) == [] and containers_of(job, node3_engine) == []


def test_selftest_stops_the_job_on_a_placement_that_cannot_fit_and_a_slow_fabric(
    tmp_path: Path,
) -> None:
    # every dev node offers Ray 1 CPU: a rollout engine of TP 2 (STRICT_PACK on one node)
    # never fits (the CPU run of the placement rehearsal GPU jobs get), and no fabric here
    # reaches 100000 GB/s: both are reported, the first fails the job before the workload
    job, rc, elapsed = sbatch(
        tmp_path,
        render(tmp_path, "selftest.rollout_tp=2", "selftest.min_busbw_gbps=100000", selftest=True),
    )
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("all", "selftest")
    assert cause.startswith(
        "rollout engines: a STRICT_PACK group of 2 x {CPU: 1} needs {CPU: 2} on one node"
    )
    assert re.search(
        r"FAIL node=all phase=selftest: all-reduce bus bandwidth [0-9.]+ GB/s is below "
        r"selftest.min_busbw_gbps 100000",
        job.log,
    )
    assert "workload" not in [e["phase"] for e in job.timeline()]
    assert elapsed < FAIL_FAST_DEADLINE
    assert containers_of(job) == []


def test_a_spare_node_replaces_one_whose_docker_engine_is_dead(tmp_path: Path) -> None:
    # 3 nodes + 1 spare on the 4-node dev cluster; node2's engine is gone: the job leaves it
    # out, says why, and trains on node1, node3 and node4
    cluster.route_node("node2", "unix:///run/clusterctl-dev/no-such-engine.sock")
    try:
        job, rc, _ = sbatch(
            tmp_path, render(tmp_path, "slurm.spare_nodes=1", "slurm.drain_bad_nodes=true")
        )
        state, reason = node_state("node2")
    finally:
        cluster.route_node("node2", None)
        subprocess.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=False)
    assert rc == 0, job.log
    # drained with clusterctl's reason prefix (the dev cluster's root is a SLURM operator)
    assert "drain" in state and reason.startswith("clusterctl: docker daemon not reachable")
    assert re.search(r"left out node2: docker daemon not reachable: .*no-such-engine", job.log)
    assert "FAIL" not in job.log  # a node left out is not a failure of the job
    assert "running on node1 node3 node4 (slurm.spare_nodes: 1)" in job.log
    assert "workload sees 3 ray nodes: ['node1', 'node3', 'node4']" in job.log
    left_out = (job.log_dir / "left-out.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in left_out] == ["node2"]
    assert containers_of(job) == []


def test_too_few_healthy_nodes_fail_naming_them(tmp_path: Path, node3_engine: str) -> None:
    # 3 nodes + 1 spare, two bad (node2: dead engine, node3: no image): 2 healthy < 3
    cluster.route_node("node2", "unix:///run/clusterctl-dev/no-such-engine.sock")
    try:
        job, rc, _ = sbatch(tmp_path, render(tmp_path, "slurm.spare_nodes=1"))
    finally:
        cluster.route_node("node2", None)
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node1", "preflight")
    assert cause == "only 2 of 4 nodes passed preflight; the job needs 3 (slurm.nodes)"
    assert "left out node2: docker daemon not reachable" in job.log
    assert "left out node3: image clusterctl/dev:latest is not present" in job.log
    assert containers_of(job) == [] and containers_of(job, node3_engine) == []


def test_two_jobs_at_once_on_one_host_each_have_their_own_ray(tmp_path: Path) -> None:
    # Every dev node is this host: two jobs at once meet on every port they share. Each job
    # must reach its own Ray (2 nodes, not 4) on ports of its own, and both must succeed.
    jobs = []
    for name in ("a", "b"):
        workdir = tmp_path / name
        workdir.mkdir()
        script = render(
            workdir,
            "slurm.nodes=2",
            'workload.command=python3 -c "import ray; ray.init(); '
            "print('sees', len([n for n in ray.nodes() if n['Alive']]), 'nodes at', "
            'ray.get_runtime_context().gcs_address)"; sleep 5',
        )
        jobs.append(sbatch(workdir, script, wait=False)[0])
    assert [finish(job) for job in jobs] == [0, 0], [job.log for job in jobs]
    seen = [re.search(r"sees (\d+) nodes at (\S+)", job.log) for job in jobs]
    assert all(seen), [job.log for job in jobs]
    assert [m.group(1) for m in seen if m] == ["2", "2"]
    addresses = [m.group(2) for m in seen if m]
    assert addresses[0] != addresses[1]
    # both Ray clusters lived at the same time: the collision case, not one after the other
    spans = []
    for job in jobs:
        times = {e["phase"]: e["t"] for e in job.timeline()}
        spans.append((float(times["ray-head"]), float(times["workload-done"])))  # type: ignore[arg-type]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans
    for job in jobs:
        assert containers_of(job) == []


def test_a_requeued_run_has_its_own_log_directory_and_timeline(tmp_path: Path) -> None:
    # The first run waits in its workload; `scontrol requeue` ends it (SIGTERM, cleanup) and
    # SLURM starts the job again under the same id; the second run finds the first run's
    # marker in the shared workdir and finishes.
    script = render(
        tmp_path,
        "slurm.nodes=2",
        "slurm.requeue=true",
        f'container.mounts=[{{"source": "{tmp_path}", "target": "/shared"}}]',
        "workload.command=test -e /shared/marker && echo second run && exit 0; "
        "touch /shared/marker; sleep 600",
    )
    job, _, _ = sbatch(tmp_path, script, wait=False)
    wait_for_phase(job, "workload", 120)
    deadline = time.monotonic() + 30
    while not (tmp_path / "marker").exists():  # the first run's workload is under way
        assert time.monotonic() < deadline, "the first run's workload never started"
        time.sleep(0.2)
    subprocess.run(["scontrol", "requeue", job.job_id], check=True)
    # SLURM holds a requeued job back for a while (BeginTime); let it start at once
    deadline = time.monotonic() + 60
    while (
        "PENDING"
        not in subprocess.run(
            ["squeue", "-h", "-j", job.job_id, "-o", "%T"], capture_output=True, text=True
        ).stdout
    ):
        assert time.monotonic() < deadline, "the requeued job never went back to PENDING"
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"JobId={job.job_id}", "StartTime=now"], check=True)
    assert finish(job) == 0
    logs = tmp_path / "clusterctl-logs"
    first, second = logs / f"cpu-smoke-{job.job_id}", logs / f"cpu-smoke-{job.job_id}-run1"
    first_end = json.loads((first / "timeline.json").read_text())[-1]
    second_timeline = json.loads((second / "timeline.json").read_text())
    assert (first_end["run"], first_end["status"]) == (0, 143)
    assert (second_timeline[-1]["run"], second_timeline[-1]["status"]) == (1, 0)
    assert [e["phase"] for e in second_timeline].count("setup") == 1  # nothing of run 0
    first_log = (first / "batch.log").read_text()
    second_log = (second / "batch.log").read_text()
    assert "second run" in second_log and "second run" not in first_log
    assert f"run 1 of job {job.job_id} (requeued)" in second_log
    assert "received SIGTERM" in first_log and "received SIGTERM" not in second_log
    assert not (first / "batch.log").is_symlink() and not (second / "batch.log").is_symlink()
    assert containers_of(job) == []


def test_a_hung_node_fails_the_job_as_lost_within_the_node_timeout(tmp_path: Path) -> None:
    # A frozen container stands in for a machine that hangs or drops off the network: its
    # raylet stops answering, but nothing exits, so only Ray's health checks can tell.
    script = render(tmp_path, "slurm.nodes=2", "workload.command=sleep 600", "ray.node_timeout=10")
    job, _, _ = sbatch(tmp_path, script, wait=False)
    wait_for_phase(job, "workload", 120)
    paused_at = time.monotonic()
    subprocess.run(["docker", "pause", f"cc-{job.job_id}-node2"], check=True, capture_output=True)
    assert finish(job) == 1
    assert time.monotonic() - paused_at < 60  # tens of seconds, not SLURM's 300 s
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node2", "workload")
    assert cause.startswith("node2 lost: Ray marked it dead")
    end = json.loads((job.log_dir / "timeline.json").read_text())[-1]
    assert end["failed_node"] == "node2" and end["cause"].startswith("node2 lost")
    assert all("node2 lost" not in c for c in end["consequences"])  # the first cause, once
    assert containers_of(job) == []


@pytest.fixture
def slurmd_timeout() -> Iterator[int]:
    """SLURM's SlurmdTimeout, after which it ends the jobs of a node whose slurmd it no longer
    reaches: 30 s here (SLURM's default, 300 s, would make the test wait 5 minutes)."""
    cluster.set_slurm_option("SlurmdTimeout", "30")
    try:
        yield 30
    finally:
        cluster.set_slurm_option("SlurmdTimeout", None)


def test_a_lost_slurmd_fails_the_job_naming_its_node_and_every_container_goes(
    tmp_path: Path, slurmd_timeout: int
) -> None:
    """Issue 22 item 4: node2's slurmd dies mid-job; its container and Ray go on, so only
    SLURM can tell. SLURM ends the job after SlurmdTimeout (NODE_FAIL): the job names node2
    and that cause, the reachable node removes its container, and node2's own dead man's
    switch removes node2's (SLURM can no longer reach node2 to end its step)."""
    script = render(
        tmp_path,
        "slurm.nodes=2",
        "slurm.requeue=false",  # SLURM would run it again on other nodes: a test of its own
        "workload.command=sleep 600",
        "container.cleanup_deadline=10",
        "container.orphan_timeout=20",
    )
    job, _, _ = sbatch(tmp_path, script, wait=False)
    wait_for_phase(job, "workload", 120)
    killed_at = time.monotonic()
    cluster.kill_slurmd("node2")
    try:
        deadline = killed_at + slurmd_timeout + 30
        while (
            containers_of(job)
            or subprocess.run(
                ["squeue", "-h", "-j", job.job_id], capture_output=True, text=True
            ).stdout.strip()
        ):
            assert time.monotonic() < deadline, f"after {slurmd_timeout + 30}s: {job.log}"
            time.sleep(1)
        node, phase, cause = job.first_failure()
        assert (node, phase) == ("node2", "workload")
        assert cause.startswith("node2 lost: SLURM no longer reaches its slurmd: node2 ("), cause
        assert cause.endswith("; SLURM ends the job for a node failure (NODE_FAIL)"), cause
        end = job.timeline()[-1]
        assert (end["failed_node"], end["cause"]) == ("node2", cause)  # the first cause
        assert "[node1] container" in (job.log_dir / "nodes.log").read_text()
        orphans = (job.log_dir / "orphans.log").read_text()
        assert re.search(rf"\[node2\] dead man's switch: SLURM reports job {job.job_id} ", orphans)
    finally:
        cluster.start_slurmd("node2")
        cluster.wait_until(
            lambda: cluster.node_states().get("node2", "").rstrip("*~#") == "idle",
            120,
            "node2 idle again",
        )


# issue 20 high 1: a run directory another user made first (the job's name and id are
# predictable) is never written into nor run from: the job fails naming it
def test_a_run_directory_made_by_someone_else_is_refused(tmp_path: Path) -> None:
    script = render(tmp_path)
    held = subprocess.run(
        ["sbatch", "--parsable", "--hold", str(script)],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    job = Job(held.split(";")[0], tmp_path)
    planted = tmp_path / "clusterctl-logs" / f"cpu-smoke-{job.job_id}"
    planted.mkdir(parents=True)
    marker = tmp_path / "ran-the-planted-code"
    (planted / "node-lib.sh").write_text(f"touch {marker}\n")
    os.chmod(planted, 0o777)
    os.chown(planted, 65534, 65534)
    subprocess.run(["scontrol", "release", job.job_id], check=True)
    assert finish(job) == 1
    assert "cannot create the log directory" in job.log and "exists already" in job.log
    assert not marker.exists() and sorted(p.name for p in planted.iterdir()) == ["node-lib.sh"]
    assert containers_of(job) == []


def test_failing_workload_fails_the_job_with_its_status(tmp_path: Path) -> None:
    doomed = "echo doomed; echo 'NCCL error in ProcessGroupNCCL.cpp, unhandled system error'"
    job, rc, _ = sbatch(tmp_path, render(tmp_path, f"workload.command={doomed}; exit 3"))
    assert rc == 3, job.log  # the job's exit status is the workload's
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node1", "workload")
    assert cause.startswith("the command workload exited with status 3")
    assert "doomed" in (job.log_dir / "workload.log").read_text()
    assert containers_of(job) == []
    assert (job.log_dir / "nodes" / "node2" / "ray").is_dir()  # Ray logs copied back
    status = run_cli("status", job.job_id, cwd=tmp_path)
    assert status.returncode == 1
    assert "failed (status 3): node node1: the command workload exited with status 3" in (
        " ".join(status.stdout.split())
    )
    # doctor's first explanation beyond clusterctl's own FAIL line
    said = "doctor: NCCL failed in a system call, usually while connecting peers; fix: NCCL_DEBUG"
    assert said in (" ".join(status.stdout.split()))


def assert_the_head_takes_only_the_jobs_token(job: Job) -> None:
    """Issue 20 high 3: a client on the cluster network without the job's token is refused
    by the GCS and the Jobs API; the token is in no argv on the host."""
    head = re.search(r"head node1 at (\S+):(\d+) \(dashboard (\d+)\)", job.log)
    assert head, job.log
    ip, gcs, dashboard = head.groups()
    stranger = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", cluster.DEV_IMAGE, "timeout", "40",
         "python3", "-c", f"import ray; ray.init(address='{ip}:{gcs}')"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert stranger.returncode != 0
    assert "Authentication token is missing or incorrect" in stranger.stdout + stranger.stderr
    token_file = job.log_dir / "ray-auth-token"
    token = token_file.read_text().strip()
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    assert oct(job.log_dir.stat().st_mode & 0o777) == "0o700"

    def jobs_api(headers: dict[str, str]) -> int:
        request = urllib.request.Request(f"http://{ip}:{dashboard}/api/jobs/", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    assert jobs_api({}) == 401
    assert jobs_api({"Authorization": f"Bearer {token}"}) == 200
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert token not in ps


def test_cancel_during_workload_removes_every_container_and_status_follows(
    tmp_path: Path,
) -> None:
    # clusterctl status / logs -f / cancel / down / ls on one real job (scancel underneath)
    job, _, _ = sbatch(tmp_path, render(tmp_path, "workload.command=sleep 600"), wait=False)
    wait_for_phase(job, "workload", 120)
    assert len(containers_of(job)) == 3
    assert_the_head_takes_only_the_jobs_token(job)
    status = run_cli("status", job.job_id, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert f"job {job.job_id} (cpu-smoke): RUNNING on node[1-3]" in status.stdout
    assert "workload" in status.stdout and "running" in status.stdout
    preflight = run_cli("logs", job.job_id, "--phase", "preflight", cwd=tmp_path)
    assert "clusterctl: node checks on 3 nodes: 0 failed" in preflight.stdout
    follow = subprocess.Popen(
        ["clusterctl", "logs", job.job_id, "-f"], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    cancelled = run_cli("cancel", job.job_id, cwd=tmp_path, timeout=180)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"job {job.job_id} CANCELLED" in cancelled.stdout
    assert containers_of(job) == []  # cancel returns once SLURM ended the job, cleanup included
    followed, _ = follow.communicate(timeout=60)  # -f ends by itself once the job ended
    assert "phase: workload" in followed and "received SIGTERM" in followed
    assert f"job {job.job_id} failed (status 143)" in followed
    status = run_cli("status", job.job_id, "--json", cwd=tmp_path)
    assert status.returncode == 1
    assert (
        '"cause": "received SIGTERM (scancel, preemption or the time limit itself)"'
        in status.stdout
    )
    # a container the job's cleanup never saw (as after a lost node): down removes it
    subprocess.run(
        ["docker", "run", "-d", "--network", "host", "--name", f"cc-{job.job_id}-node1",
         "--label", f"clusterctl.job={job.job_id}", "--label", "clusterctl.node=node1",
         cluster.DEV_IMAGE, "sleep", "300"],
        check=True, capture_output=True,
    )  # fmt: skip
    swept = run_cli("down", job.job_id, cwd=tmp_path, timeout=180)
    assert swept.returncode == 0, swept.stderr
    assert f"[node1] removed 1 container(s) of job {job.job_id}" in swept.stdout
    assert f"[node2] no container of job {job.job_id} left" in swept.stdout
    assert f"[node3] no container of job {job.job_id} left" in swept.stdout
    assert containers_of(job) == []
    listed = run_cli("ls", cwd=tmp_path)
    assert job.job_id in listed.stdout and "failed (143)" in listed.stdout


def test_time_limit_cleans_up_before_slurm_kills(tmp_path: Path) -> None:
    # --signal=B:USR1@40 with a 1-minute limit: SLURM warns the batch shell 40 s (give or take
    # its 60 s event resolution) before the limit; the script must clean up on that signal.
    # a 60 s limit, signalled at 20 s: shorter than the rule allows, on purpose
    script = render(
        tmp_path,
        "slurm.time=1",
        "slurm.signal_grace=40",
        "workload.command=sleep 600",
        "lint.allow=[loopback-head,time-limit-too-short]",
    )
    job, rc, elapsed = sbatch(tmp_path, script)
    assert rc == 75  # stopped at the time limit: unfinished, resumable
    # SLURM checks time limits every 30 s or so: the warning may come in any phase
    node, _, cause = job.first_failure()
    assert node == "node1"
    assert cause == "time limit: SLURM's warning, 40s before the limit (slurm.signal_grace)"
    assert elapsed < FAIL_FAST_DEADLINE
    assert containers_of(job) == []


@pytest.fixture
def private_data_jobs() -> Iterator[None]:
    """SLURM hides other users' jobs from each user (PrivateData=jobs), as many sites do."""
    cluster.set_slurm_option("PrivateData", "jobs")
    try:
        yield
    finally:
        cluster.set_slurm_option("PrivateData", None)


def squeue_ids(*runuser: str) -> set[str]:
    """Every job id squeue shows (%A: an array task's own id), as root or as RUNUSER."""
    cmd = [*runuser, "squeue", "-h", "-o", "%A"]
    return set(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split())


def as_user(name: str) -> list[str]:
    return ["runuser", "-u", name, "--"]


def label_container(name: str, job: str, node: str, uid: int) -> None:
    """A container labelled as a clusterctl job's (a job's own containers carry these)."""
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    subprocess.run(
        ["docker", "run", "-d", "--name", name, "--label", f"clusterctl.job={job}",
         "--label", f"clusterctl.node={node}", "--label", f"clusterctl.uid={uid}",
         "--network", "host", cluster.DEV_IMAGE, "sleep", "infinity"],
        check=True, capture_output=True,
    )  # fmt: skip


def test_under_private_data_another_users_live_job_is_never_a_leftover(
    private_data_jobs: None,
) -> None:
    """Issue 20 item 15, issue 22 item 5, for real: two users, PrivateData=jobs, an array job.
    bob's job sweeps his own ended job's container; alice's container (her job runs, but bob
    cannot see it) and his own running array task's (its label holds the task's own id,
    squeue's %A; %i would print BASE_N) are left alone, and his job runs."""
    alice, bob = system_user("cc-alice"), system_user("cc-bob", docker_socket_group())
    submit = ["sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--nodelist=node4"]
    alices = run_text([*as_user("cc-alice"), *submit, "--wrap=sleep 300"])
    array = run_text([*as_user("cc-bob"), *submit, "--array=1-2", "--wrap=sleep 300"])
    workdir = Path(tempfile.mkdtemp(prefix="cc-bob-", dir="/tmp"))
    names = ["cc-99999-node2", f"cc-{alices}-node3", "cc-array-node3"]
    try:
        cluster.wait_until(
            lambda: len(squeue_ids(*as_user("cc-bob"))) == 2, 60, "bob's array tasks running"
        )
        seen_by_bob = squeue_ids(*as_user("cc-bob"))
        assert alices in squeue_ids() and alices not in seen_by_bob  # PrivateData at work
        (task,) = seen_by_bob - {array}  # the task whose own id is not the array's
        label_container(names[0], "99999", "node2", bob)  # bob's job that ended
        label_container(names[1], alices, "node3", alice)
        label_container(names[2], task, "node3", bob)
        script = render(workdir)
        subprocess.run(["chown", "-R", "cc-bob", str(workdir)], check=True)
        held = run_text([*as_user("cc-bob"), "sbatch", "--parsable", str(script)], cwd=workdir)
        job = Job(held.split(";")[0], workdir)
        assert finish(job) == 0, job.log
        assert "[node2] removed 1 container(s) of job 99999" in job.log
        assert f"of job {alices}" not in job.log and f"of job {task}" not in job.log
        remaining = run_text(["docker", "ps", "-a", "--format", "{{.Names}}"]).split()
        assert names[0] not in remaining and names[1] in remaining and names[2] in remaining
        verdicts = json.loads((job.log_dir / "preflight" / "verify.json").read_text())
        leftovers = [r for r in verdicts if r["check"] == "leftovers"]
        assert not [r for r in leftovers if r["status"] == "fail"], leftovers
        assert any(
            f"{names[1]} (uid {alice}, job {alices})" in r["reason"] and r["status"] == "warn"
            for r in leftovers
        ), leftovers
        assert not [r for r in leftovers if names[2] in r["reason"]], leftovers
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True)
        subprocess.run(["scancel", alices, array], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def test_container_that_dies_mid_job_fails_it_at_once_naming_the_node(tmp_path: Path) -> None:
    job, _, _ = sbatch(tmp_path, render(tmp_path, "workload.command=sleep 600"), wait=False)
    wait_for_phase(job, "workload", 120)
    killed_at = time.monotonic()
    subprocess.run(["docker", "kill", f"cc-{job.job_id}-node2"], check=True, capture_output=True)
    wait_gone(job, 90)
    assert time.monotonic() - killed_at < 45  # not the workload's 600 s
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node2", "container")
    assert cause == (
        f"container cc-{job.job_id}-node2 exited while the job was running: exit 137, SIGKILL "
        "(docker kill or rm -f, the kernel, or its engine)"
    )
    assert containers_of(job) == []
    # srun ended the other nodes' tasks (--kill-on-bad-exit) while the job still ran: they
    # copied their logs before removing their containers
    for other in ("node1", "node3"):
        assert (job.log_dir / "nodes" / other / "container.log").exists(), other


def stop_first_dashboard_agent(container: str, seconds: float) -> None:
    """SIGSTOP the first Ray dashboard agent that starts in CONTAINER, by its host pid: it
    never writes its port file, as when hundreds of nodes start on busy cores. (The raylet's
    own arguments name agent.py too: it starts the agent.)"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        top = subprocess.run(
            ["docker", "top", container, "-o", "pid,comm,args"], capture_output=True, text=True
        )
        for line in top.stdout.splitlines()[1:]:
            pid, comm, args = line.split(maxsplit=2)
            if comm != "raylet" and ("dashboard/agent.py" in args or "ray::Dashboard" in args):
                os.kill(int(pid), signal.SIGSTOP)
                return
        time.sleep(0.05)
    raise AssertionError(f"no dashboard agent started in {container} within {seconds}s")


def test_a_worker_whose_raylet_aborts_while_ray_start_waits_joins_again(tmp_path: Path) -> None:
    """Issue 22: a raylet whose dashboard agent is late aborts ("Timed out waiting for file
    .../metrics_agent_port_...", Ray 2.60) while `ray start` waits on for its registration.
    Seen here in a 32-node job: the stopped `docker exec` client answered 0, the node was
    counted as joined, and the job waited out its join deadline for a node that never came."""
    script = render(tmp_path, "ray.join_deadline=200")
    job, _, _ = sbatch(tmp_path, script, wait=False)
    stop_first_dashboard_agent(f"cc-{job.job_id}-node3", 120)
    assert finish(job) == 0, job.log
    assert (
        "clusterctl: [node3] join attempt 1 failed: its raylet ended while ray start waited "
        "for its registration; retrying"
    ) in job.log
    # ray start's own output is kept beside the verdict
    assert "Local node IP" in (job.log_dir / "nodes" / "node3" / "ray-start-1.log").read_text()
    assert "workload sees 3 ray nodes" in job.log
    assert containers_of(job) == []


def test_openrlhf_path_submits_through_ray_job_submit(tmp_path: Path) -> None:
    # The OpenRLHF workload path end to end (ray job submit to the head's dashboard, logs
    # followed, status propagated), with a stdlib module standing in for the trainer: the
    # image has no OpenRLHF and no GPU, hence the two allowed GPU rules.
    import yaml

    def bundle(name: str, args: dict[str, object]) -> Path:
        spec = yaml.safe_load(CPU_EXAMPLE.read_text())
        spec["workload"] = {"framework": "openrlhf", "entrypoint": "zipfile", "args": args}
        spec["lint"]["allow"] += ["trainer-needs-gpus", "openrlhf-gpu-budget"]
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        result = run_cli("render", str(path), "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        return tmp_path / name / "job.sbatch"

    # vllm_sync_with_ray + gloo: the self-test's weight-sync group is Ray's collective group,
    # made as OpenRLHF makes it, for real between node1 and node3
    ok = {"help": True, "actor_num_gpus_per_node": 1, "vllm_num_engines": 1,
          "vllm_sync_with_ray": True, "vllm_sync_backend": "gloo"}  # fmt: skip
    job, rc, _ = sbatch(tmp_path, bundle("ok", ok))
    assert rc == 0, job.log
    assert re.search(
        r"selftest: weight-sync rehearsal: gloo broadcast 16 MB node1 -> node3 in [0-9.]+s "
        r"\([0-9.]+ GB/s\) through ray.util.collective\n",
        job.log,
    ), job.log
    workload = (job.log_dir / "workload.log").read_text()
    assert "usage:" in workload and "succeeded" in workload
    job, rc, _ = sbatch(
        tmp_path, bundle("bad", {"no-such-flag": True, "actor_num_gpus_per_node": 1})
    )
    assert rc == 1  # ray job submit reports a failed Ray job as 1
    node, phase, _ = job.first_failure()
    assert (node, phase) == ("node1", "workload")
    assert containers_of(job) == []
    # OpenRLHF packs every vLLM engine into one PACK group and slices it by node: an engine
    # of TP 2 on nodes that offer Ray 1 CPU each lands on two nodes, the cross-node vLLM
    # init hang; the self-test places the group as OpenRLHF does and stops the job
    split = {"help": True, "actor_num_gpus_per_node": 1, "vllm_num_engines": 1,
             "vllm_tensor_parallel_size": 2}  # fmt: skip
    job, rc, _ = sbatch(tmp_path, bundle("split", split))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("all", "selftest")
    assert re.fullmatch(
        r"OpenRLHF start-up: rollout engine 0 \(TP 2\) would span node\d, node\d: its "
        r"bundles were placed on several nodes, and vLLM's tensor parallelism across nodes "
        r"hangs at init",
        cause,
    ), cause
    assert "workload" not in [e["phase"] for e in job.timeline()]
    assert containers_of(job) == []


def test_submit_hands_the_rendered_bundle_to_real_sbatch(tmp_path: Path) -> None:
    result = run_cli(
        "submit",
        str(CPU_EXAMPLE),
        "--wait",
        "-o",
        str(tmp_path / "b"),
        "--set",
        "container.image=clusterctl/absent:1",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    match = re.search(r"^submitted job (\d+) ", result.stdout, re.M)
    assert match, result.stdout
    job_id = match.group(1)
    assert f"job {job_id} failed with status 1" in result.stdout
    job = Job(job_id, tmp_path)
    node, phase, cause = job.first_failure()
    assert phase == "preflight" and node.startswith("node")
    assert (
        cause == "image clusterctl/absent:1 is not present on this node and container.pull is never"
    )
    assert (tmp_path / "b" / "job.sbatch").read_text() == run_cli(
        "render", str(CPU_EXAMPLE), "--stdout", "--set", "container.image=clusterctl/absent:1"
    ).stdout
