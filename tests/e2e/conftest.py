"""Every test on the real cluster starts from a quiet one: a job an earlier test cancelled can
still be completing on a node (its epilog, its container cleanup), and a new job would then be
placed on the other nodes, so node names the test expects would shift."""

from __future__ import annotations

import subprocess

import pytest

from clusterctl.devcluster import cluster

QUIET_DEADLINE_SECONDS = 120


def _quiet() -> bool:
    queue = subprocess.run(
        ["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=False, timeout=15
    )
    states = cluster.node_states()
    return (
        queue.returncode == 0
        and not queue.stdout.strip()
        and bool(states)
        and all(state.rstrip("*~#") == "idle" for state in states.values())
    )


@pytest.fixture(autouse=True)
def quiet_cluster(request: pytest.FixtureRequest) -> None:
    """Wait (bounded) until no job is queued and every node is idle."""
    if request.node.get_closest_marker("cluster") is None:
        return
    request.getfixturevalue("dev_cluster")
    cluster.wait_until(_quiet, QUIET_DEADLINE_SECONDS, "an idle cluster before the test")
