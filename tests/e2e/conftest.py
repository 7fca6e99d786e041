"""Every test on the real cluster starts from a quiet one: a job an earlier test cancelled can
still be completing on a node (its epilog, its container cleanup), and a new job would then be
placed on the other nodes, so node names the test expects would shift."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster

QUIET_DEADLINE_SECONDS = 120
DOCKER_SOCKET = Path("/var/run/docker.sock")


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


def run_text(cmd: list[str], cwd: Path | None = None) -> str:
    """COMMAND's stdout, stripped; it must succeed."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr}"
    return proc.stdout.strip()


def system_user(name: str, *groups: str) -> int:
    """A second person on the cluster: a local user without a home (made once), its uid."""
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        run_text(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
    for group in groups:
        run_text(["usermod", "-aG", group, name])
    return pwd.getpwnam(name).pw_uid


def docker_socket_group() -> str:
    """The group whose members may use the Docker engine: the socket's, `docker` where
    dockerd found that group at start (Debian's docker.io package makes it); a socket left
    to root's group is given to `docker`, as that package's engine would have it."""
    if DOCKER_SOCKET.stat().st_gid == 0:
        run_text(["groupadd", "-f", "docker"])
        shutil.chown(DOCKER_SOCKET, group="docker")
        os.chmod(DOCKER_SOCKET, 0o660)
    return grp.getgrgid(DOCKER_SOCKET.stat().st_gid).gr_name
