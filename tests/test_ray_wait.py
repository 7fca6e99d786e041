"""The cluster waiter that runs in the head container: its judgement on captured node lists,
and the whole program against a real Ray head started here on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.runtime.ray_wait import EXIT_HEAD, EXIT_JOIN, EXIT_SELFTEST, describe, join_problems

# What ray.nodes() returns (fields as Ray 2.60 reports them; values from the dev cluster).
NODES = [
    {
        "NodeName": "node1",
        "Alive": True,
        "NodeManagerAddress": "127.0.1.1",
        "Resources": {"CPU": 2.0, "GPU": 8.0, "memory": 1.0e10},
    },
    {
        "NodeName": "node2",
        "Alive": True,
        "NodeManagerAddress": "127.0.1.2",
        "Resources": {"CPU": 2.0, "GPU": 8.0},
    },
    {"NodeName": "node3", "Alive": False, "NodeManagerAddress": "127.0.1.3", "Resources": {}},
]


def test_complete_cluster_has_no_problem() -> None:
    seen = describe([n for n in NODES if n["Alive"]])
    assert join_problems(seen, ["node1", "node2"], cpus=2, gpus=8) == []


def test_missing_foreign_and_short_nodes_are_named() -> None:
    seen = describe([n for n in NODES if n["Alive"]])
    seen["stranger"] = {"CPU": 2.0, "GPU": 8.0}
    seen["node2"]["GPU"] = 4.0
    problems = join_problems(seen, ["node1", "node2", "node3"], cpus=None, gpus=8)
    assert problems == [
        "node=node3 has not joined",
        "node=stranger joined but is not part of this job",
        "node=node2 offers 4 GPUs, expected 8",
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Ray head on 127.0.0.2 (Ray rewrites 127.0.0.1 to the host's external address).

    It runs with --block in a session of its own, so the teardown stops exactly its processes
    (`ray stop` would also kill the Ray processes of dev-cluster containers on this host).
    """
    pytest.importorskip("ray", reason="ray[default] is a test dependency: pip install .[test]")
    temp = tmp_path_factory.mktemp("ray")
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.Popen(
        [
            "ray",
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.2",
            f"--port={port}",
            "--node-name=head1",
            "--num-cpus=1",
            "--num-gpus=0",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.2", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None, "ray start --head exited"
                assert time.monotonic() < deadline, "the Ray head did not open its port"
                time.sleep(0.2)
        yield f"127.0.0.2:{port}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=5)  # ray start --block lingers on SIGTERM: do not wait it out
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)


def waiter(address: str, nodes: str, *extra: str) -> subprocess.CompletedProcess[str]:
    path = Path(__file__).resolve().parent.parent / "clusterctl" / "runtime" / "ray_wait.py"
    args = ["--address", address, "--head-ip", "127.0.0.2", "--nodes", nodes, *extra]
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=120
    )


def test_waiter_reports_ready_on_a_real_cluster(ray_head: str) -> None:
    result = waiter(
        ray_head,
        "head1",
        "--cpus-per-node",
        "1",
        "--join-deadline",
        "30",
        "--selftest",
        "--phase-token",
        "n0nce",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CLUSTERCTL_PHASE n0nce ray-joined" in result.stdout
    assert "selftest: 1 nodes ran tasks" in result.stdout
    assert 'CLUSTERCTL_RESULT {"nodes": {"head1": {"CPU": 1.0, "GPU": 0.0}}' in result.stdout


def test_waiter_names_the_node_that_never_joined(ray_head: str) -> None:
    result = waiter(ray_head, "head1,node7", "--join-deadline", "3")
    assert result.returncode == EXIT_JOIN
    assert "clusterctl: FAIL node=node7 phase=ray-join: node7 has not joined" in result.stdout


def test_waiter_gives_up_on_a_head_that_never_answers() -> None:
    pytest.importorskip("ray")
    result = waiter(f"127.0.0.2:{free_port()}", "head1", "--start-deadline", "3")
    assert result.returncode == EXIT_HEAD
    assert "clusterctl: FAIL node=head phase=ray-head: GCS at 127.0.0.2:" in result.stdout


@pytest.mark.parametrize(
    "problem, line",
    [
        (
            "node=node1 did not finish the all-reduce",
            "clusterctl: FAIL node=node1 phase=selftest: node1 did not finish the all-reduce",
        ),
        (
            "all-reduce bus bandwidth 0.100 GB/s is below selftest.min_busbw_gbps 1",
            "clusterctl: FAIL node=all phase=selftest: all-reduce bus bandwidth 0.100 GB/s is "
            "below selftest.min_busbw_gbps 1",
        ),
    ],
)
def test_fail_lines_have_one_shape(
    problem: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 9: job.sbatch parses these lines; a problem text must never read as a phase."""
    from clusterctl.runtime.ray_wait import fail

    fail(problem, "selftest")
    assert capsys.readouterr().out.strip() == line


def test_version_problems_name_the_odd_node() -> None:
    from clusterctl.runtime.ray_wait import version_problems

    same = {"python": "3.11.2", "ray": "2.60.0", "torch": "2.13.0+cpu"}
    reports = {"node1": same, "node2": same, "node3": {**same, "torch": "2.12.1+cpu"}}
    assert version_problems(reports) == [
        "node=node3 has torch 2.12.1+cpu, the other nodes 2.13.0+cpu"
    ]
    assert version_problems({"node1": same, "node2": same}) == []


def test_node_versions_read_this_interpreter() -> None:
    import platform

    from clusterctl.runtime.ray_wait import node_versions

    found = node_versions()
    assert found["python"] == platform.python_version()
    assert found["ray"] == "2.60.0"  # the test dependency's pin
    assert found["vllm"] == "absent"


def test_busbw_is_nccl_tests_formula() -> None:
    from clusterctl.runtime.ray_wait import busbw_allreduce

    # nccl-tests doc/PERFORMANCE.md: algbw = S/t; all-reduce busbw = algbw * 2(n-1)/n
    assert busbw_allreduce(16 * 10**9, 2.0, 4) == (8.0, 12.0)


def test_a_rollout_engine_wider_than_any_node_is_refused_at_once() -> None:
    from clusterctl.runtime.ray_wait import rollout_fit_problem

    problem = rollout_fit_problem((2, 16, "GPU"), {"node1": 8.0, "node2": 8.0})
    assert problem is not None and "TP 16 needs 16 GPU on one node" in problem
    assert rollout_fit_problem((2, 8, "GPU"), {"node1": 8.0}) is None


def test_selftest_places_rollout_engines_on_a_real_cluster(ray_head: str) -> None:
    result = waiter(
        ray_head,
        "head1",
        "--join-deadline",
        "30",
        "--selftest",
        "--rollout",
        "1:1:CPU",
        "--selftest-deadline",
        "60",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "selftest: placement: 1 rollout engines of TP 1 (CPU) placed in" in result.stdout
    assert "versions identical: python" in result.stdout


def test_selftest_fails_a_placement_the_cluster_cannot_hold(ray_head: str) -> None:
    # the head offers 1 CPU: an engine of TP 2 can never be placed on one node
    result = waiter(
        ray_head,
        "head1",
        "--join-deadline",
        "30",
        "--selftest",
        "--rollout",
        "1:2:CPU",
        "--selftest-deadline",
        "60",
    )
    assert result.returncode == EXIT_SELFTEST, result.stdout + result.stderr
    assert (
        "clusterctl: FAIL node=all phase=selftest: a rollout engine of TP 2 needs 2 CPU on one "
        "node, and no node offers more than 1" in result.stdout
    )
    # two engines of TP 1 fit one at a time, not both at once: the real placement says so
    result = waiter(
        ray_head,
        "head1",
        "--join-deadline",
        "30",
        "--selftest",
        "--rollout",
        "2:1:CPU",
        "--selftest-deadline",
        "8",
    )
    assert result.returncode == EXIT_SELFTEST, result.stdout + result.stderr
    assert "only 1 of 2 rollout engines (TP 1, STRICT_PACK on one node each)" in result.stdout


def test_gpu_rank_uses_the_gpu_ray_assigned() -> None:
    from clusterctl.runtime.ray_wait import gpu_index

    # Ray narrowed HIP/CUDA_VISIBLE_DEVICES to the one GPU: it is device 0
    assert gpu_index(1, [5]) == 0
    # RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES (the GPU presets): all 8 visible, use the id
    assert gpu_index(8, [5]) == 5
    assert gpu_index(8, ["3"]) == 3
