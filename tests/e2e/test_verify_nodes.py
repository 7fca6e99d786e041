"""`clusterctl verify` for real: over srun inside an allocation of the dev cluster, and over
SSH against a real sshd on loopback with host aliases from an ssh config the test writes."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from tests.conftest import ROOT, run_cli

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]
CPU_EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def verify_in_allocation(*args: str, nodes: int = 3) -> subprocess.CompletedProcess[str]:
    """salloc an allocation and run verify inside it, as a user on a login node would."""
    return subprocess.run(
        [
            "salloc",
            f"--nodes={nodes}",
            "--time=5",
            "--job-name=verify-test",
            "clusterctl",
            "verify",
            str(CPU_EXAMPLE),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def results(proc: subprocess.CompletedProcess[str]) -> list[dict[str, str]]:
    return list(json.loads(proc.stdout)["results"])


def test_verify_over_srun_judges_every_node_of_the_allocation() -> None:
    proc = verify_in_allocation()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(report["nodes"]) == ["node1", "node2", "node3"]
    found = {(r["node"], r["check"]): r for r in report["results"]}
    for node in report["nodes"]:
        assert found[(node, "docker")]["status"] == "ok"
        assert found[(node, "image")]["reason"].startswith("clusterctl/dev:latest sha256:")
        # the address by the job's own rule: NodeAddr from slurm.conf (address_source: slurm),
        # a loopback address on the dev cluster, where every node is this host
        assert found[(node, "address")]["reason"].startswith("Ray and NCCL will use 127.")
    assert found[("*", "image-digest")]["status"] == "ok"
    assert found[("*", "clock")]["status"] == "ok"


def test_verify_names_the_bad_node_and_drains_it_only_with_apply() -> None:
    stale = "cc-999999-node1"
    subprocess.run(["docker", "rm", "-f", stale], capture_output=True, check=False)
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--network",
            "host",
            "--name",
            stale,
            "--label",
            "clusterctl.job=999999",
            cluster.DEV_IMAGE,
            "sleep",
            "300",
        ],
        check=True,
        capture_output=True,
    )
    cluster.route_node("node2", "unix:///run/clusterctl-dev/no-such-engine.sock")
    try:
        proc = verify_in_allocation("--drain")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        found = {(r["node"], r["check"]): r for r in results(proc)}
        docker = found[("node2", "docker")]
        assert docker["status"] == "fail"
        assert docker["reason"].startswith("docker daemon not reachable: ")
        assert "no-such-engine.sock" in docker["reason"]
        left = found[("node1", "leftovers")]
        assert left["status"] == "fail" and f"{stale} (job 999999, running)" in left["reason"]
        # --drain alone prints the lines and changes nothing
        assert (
            "scontrol update NodeName=node2 State=DRAIN 'Reason=clusterctl: docker:" in proc.stderr
        )
        assert "DRAIN" not in node_state("node2")
        applied = verify_in_allocation("--drain", "--apply", "--nodelist=node2", nodes=2)
        assert applied.returncode == 2, applied.stdout + applied.stderr
        state = node_state("node2")
        assert (
            "DRAIN" in state and "Reason=clusterctl: docker: docker daemon not reachable" in state
        )
    finally:
        cluster.route_node("node2", None)
        subprocess.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=False)
        subprocess.run(["docker", "rm", "-f", stale], capture_output=True, check=False)


def node_state(node: str) -> str:
    return subprocess.run(
        ["scontrol", "show", "node", "-o", node], capture_output=True, text=True, check=True
    ).stdout


# ---- SSH: a real sshd on a loopback port, host aliases in an ssh config written here ----


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path | int]]:
    if not Path(SSHD).exists():
        pytest.fail("sshd is missing: `clusterctl dev-cluster up` installs openssh-server")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "user_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True
        )
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n"
        "StrictModes no\nMaxStartups 100:30:200\nMaxSessions 100\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    proc = subprocess.Popen([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")])
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, (d / "sshd.log").read_text()
            time.sleep(0.1)
    host_key = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    (d / "empty_known_hosts").write_text("")
    aliases = "\n".join(
        f"Host gpu-{i}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        f"  IdentityFile {d / 'user_key'}\n  UserKnownHostsFile {d / 'known_hosts'}\n"
        for i in range(1, 4)
    )
    (d / "ssh_config").write_text(
        aliases + f"\nHost stranger\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        f"  IdentityFile {d / 'user_key'}\n  UserKnownHostsFile {d / 'empty_known_hosts'}\n"
    )
    try:
        yield {"dir": d, "port": port}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def verify_ssh(
    sshd: dict[str, Path | int], hosts: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    config = Path(str(sshd["dir"])) / "ssh_config"
    return run_cli(
        "verify",
        str(CPU_EXAMPLE),
        "--hosts",
        hosts,
        "--ssh-config",
        str(config),
        "--json",
        *extra,
        env={"HOME": str(sshd["dir"])},
        timeout=180,
    )


def test_verify_over_ssh_reaches_every_alias(sshd: dict[str, Path | int]) -> None:
    proc = verify_ssh(sshd, "gpu-1,gpu-2,gpu-3")
    report = json.loads(proc.stdout)
    assert sorted(report["nodes"]) == ["gpu-1", "gpu-2", "gpu-3"], proc.stderr
    found = {(r["node"], r["check"]): r for r in report["results"]}
    for node in report["nodes"]:
        assert found[(node, "docker")]["status"] == "ok"
        assert found[(node, "image")]["status"] == "ok"
    assert found[("*", "image-digest")]["status"] == "ok"
    # outside SLURM the job's address rule (NodeAddr from slurm.conf) cannot see these hosts
    assert found[("gpu-1", "address")]["status"] == "fail"
    assert "NodeAddr" in found[("gpu-1", "address")]["reason"]


def test_verify_over_ssh_refuses_an_unknown_host_key(sshd: dict[str, Path | int]) -> None:
    proc = verify_ssh(sshd, "gpu-1,stranger")
    assert proc.returncode == 2
    found = {(r["node"], r["check"]): r for r in json.loads(proc.stdout)["results"]}
    refused = found[("stranger", "reachable")]
    assert refused["status"] == "fail" and "not found in known_hosts" in refused["reason"]
    assert found[("gpu-1", "docker")]["status"] == "ok"
    accepted = verify_ssh(sshd, "stranger", "--accept-new-host-keys")
    found = {(r["node"], r["check"]): r for r in json.loads(accepted.stdout)["results"]}
    assert ("stranger", "reachable") not in found and found[("stranger", "docker")][
        "status"
    ] == "ok"
