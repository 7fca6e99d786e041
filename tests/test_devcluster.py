"""The dev cluster's generated files, and its status against the real daemons."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from tests.conftest import DEV_CLUSTER_UP, ROOT, run_cli


def test_checked_in_dev_dockerfile_matches_the_renderer() -> None:
    assert (ROOT / "docker" / "Dockerfile.dev").read_text() == cluster.dev_image_dockerfile()


def test_dev_dockerfile_installs_offline_from_the_wheelhouse() -> None:
    text = cluster.dev_image_dockerfile()
    assert f"FROM {cluster.BASE_IMAGE}" in text
    assert "--no-index --find-links /tmp/clusterctl-wheels" in text
    assert "'ray[default]==2.60.0'" in text and "'torch==2.13.0'" in text


def test_slurm_conf_gives_each_node_its_own_loopback_address() -> None:
    conf = cluster.slurm_conf(3)
    for i in (1, 2, 3):
        assert (
            f"NodeName=node{i} NodeHostname=localhost NodeAddr=127.0.1.{i} Port={17000 + i}" in conf
        )
    assert "PartitionName=debug Nodes=node[1-3]" in conf
    assert "ProctrackType=proctrack/linuxproc" in conf and "TaskProlog=" in conf
    assert "Gres" not in conf and cluster.gres_conf(3, 0).strip() == cluster.MARKER


def test_gpus_per_node_become_slurm_gres_without_devices() -> None:
    conf = cluster.slurm_conf(2, gpus_per_node=8)
    assert "GresTypes=gpu\n" in conf
    assert "NodeAddr=127.0.1.2 Port=17002 CPUs=2 RealMemory=4000 Gres=gpu:8 State=UNKNOWN" in conf
    gres = cluster.gres_conf(2, 8)
    assert f"NodeName=node[1-2] Name=gpu File={cluster.GPU_DIR}/gpu[0-7]" in gres
    assert "AutoDetect=off" in gres


@pytest.mark.cluster
@pytest.mark.usefixtures("dev_cluster")
def test_status_reports_the_running_cluster() -> None:
    st = cluster.status()
    assert st.munge and st.docker and st.slurmctld and st.image
    assert st.docker_bridges == []  # host networking only
    assert {"node1", "node2", "node3", "node4"} <= set(st.nodes)
    out = subprocess.run(["clusterctl", "dev-cluster", "status"], capture_output=True, text=True)
    assert out.returncode == 0 and "ok   node4: idle (gpu:8)" in out.stdout, out.stdout
    # SLURM itself offers the GPUs the test command brought up (DEV_CLUSTER_UP)
    assert st.gres == {f"node{i}": "gpu:8" for i in range(1, 5)}


@pytest.mark.cluster
@pytest.mark.usefixtures("dev_cluster")
def test_up_is_idempotent() -> None:
    out = subprocess.run(
        ["clusterctl", "dev-cluster", "up", *DEV_CLUSTER_UP],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "starting" not in out.stderr  # everything was already running


@pytest.mark.cluster
@pytest.mark.usefixtures("dev_cluster")
def test_down_stops_the_separate_engines_the_tests_start() -> None:
    # `dev-cluster down` used to leave these running; it now stops them through stop_engines
    host = cluster.start_engine("downtest", print)
    assert cluster.ok(["docker", "-H", host, "info"])
    said: list[str] = []
    cluster.stop_engines(said.append)
    assert not cluster.ok(["docker", "-H", host, "info"])
    assert "stopped the separate Docker engine downtest" in said


def test_assets_needs_an_absolute_directory_and_says_so(tmp_path: Path) -> None:
    made = run_cli("dev-cluster", "assets", "relative/dir", cwd=tmp_path)
    assert made.returncode == 2
    assert made.stderr.strip() == (
        "error: relative/dir: give an absolute path (it is mounted into a container)"
    )
    assert not (tmp_path / "relative").exists()
