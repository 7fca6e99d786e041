"""`clusterctl verify` for real: over srun inside an allocation of the dev cluster, and over
SSH against a real sshd on loopback with host aliases from an ssh config the test writes."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from clusterctl.devcluster.sshd import LoopbackSshd, start_loopback_sshd
from clusterctl.jobs.slurm import job_state
from clusterctl.verify.transport import job_nodes
from tests.conftest import ROOT, run_cli
from tests.e2e.test_jobs import node_state

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]
CPU_EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"


def verify_in_allocation(
    *args: str, nodes: int = 3, spec: Path | None = CPU_EXAMPLE
) -> subprocess.CompletedProcess[str]:
    """salloc an allocation and run verify inside it, as a user on a login node would."""
    return subprocess.run(
        [
            "salloc",
            f"--nodes={nodes}",
            "--time=5",
            "--job-name=verify-test",
            "clusterctl",
            "verify",
            *([str(spec)] if spec else []),
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


def test_verify_without_a_spec_judges_the_nodes_against_each_other() -> None:
    proc = verify_in_allocation(spec=None, nodes=2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(report["nodes"]) == ["node1", "node2"]
    found = {(r["node"], r["check"]): r for r in report["results"]}
    for node in report["nodes"]:
        assert found[(node, "docker")]["status"] == "ok"
        assert found[(node, "gpus")]["reason"] == "no node's GPU tool sees a GPU"
        assert found[(node, "leftovers")]["status"] == "ok"
    assert found[("*", "clock")]["status"] == "ok"
    # what only a spec can say is named, never judged
    assert not {c for _, c in found} & {"image", "image-digest", "ports", "address"}
    assert any("container.image" in s for s in report["not_checked_without_a_spec"])


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
            "--label",
            "clusterctl.node=node1",
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
        assert "drain" not in node_state("node2")[0]
        applied = verify_in_allocation("--drain", "--apply", "--nodelist=node2", nodes=2)
        assert applied.returncode == 2, applied.stdout + applied.stderr
        state, reason = node_state("node2")
        assert "drain" in state and reason.startswith("clusterctl: docker: docker daemon not")
    finally:
        cluster.route_node("node2", None)
        subprocess.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=False)
        subprocess.run(["docker", "rm", "-f", stale], capture_output=True, check=False)


# ---- SSH: a real sshd on a loopback port, host aliases in an ssh config written here ----


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSshd]:
    server = start_loopback_sshd(
        tmp_path_factory.mktemp("sshd"),
        ["gpu-1", "gpu-2", "gpu-3"],
        unknown=("stranger",),
        jumped=("behind-login",),
    )
    try:
        yield server
    finally:
        server.stop()


def verify_ssh(sshd: LoopbackSshd, hosts: str, *extra: str) -> subprocess.CompletedProcess[str]:
    config = sshd.ssh_config
    return run_cli(
        "verify",
        str(CPU_EXAMPLE),
        "--hosts",
        hosts,
        "--ssh-config",
        str(config),
        "--json",
        *extra,
        env={"HOME": str(sshd.directory)},
        timeout=180,
    )


def test_verify_over_ssh_reaches_every_alias(sshd: LoopbackSshd) -> None:
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


def test_verify_over_ssh_refuses_an_unknown_host_key(sshd: LoopbackSshd) -> None:
    proc = verify_ssh(sshd, "gpu-1,stranger")
    assert proc.returncode == 2
    found = {(r["node"], r["check"]): r for r in json.loads(proc.stdout)["results"]}
    refused = found[("stranger", "reachable")]
    assert refused["status"] == "fail" and "not found in known_hosts" in refused["reason"]
    # the reason is the SSH library's own, not the command-line error it would be alone
    assert not refused["reason"].startswith("cannot reach")
    assert found[("gpu-1", "docker")]["status"] == "ok"
    accepted = verify_ssh(sshd, "stranger", "--accept-new-host-keys")
    found = {(r["node"], r["check"]): r for r in json.loads(accepted.stdout)["results"]}
    assert ("stranger", "reachable") not in found and found[("stranger", "docker")][
        "status"
    ] == "ok"


def test_verify_reaches_the_nodes_of_a_running_job_over_ssh(tmp_path: Path) -> None:
    # a running 2-node job; its node names are SSH aliases of the loopback sshd
    server = start_loopback_sshd(tmp_path / "sshd", [f"node{i}" for i in range(1, 5)])
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--nodes=2",
            "--time=5",
            "--job-name=verify-job-test",
            f"--output={tmp_path / 'job.out'}",
            "--wrap=sleep 120",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60
        while (state := job_state(job_id)) is None or state.state != "RUNNING":
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.5)
        proc = run_cli(
            "verify",
            str(CPU_EXAMPLE),
            "--job",
            job_id,
            "--ssh-config",
            str(server.ssh_config),
            "--json",
            env={"HOME": str(server.directory)},
            timeout=180,
        )
        report = json.loads(proc.stdout)
        nodes = job_nodes(job_id)
        assert len(nodes) == 2 and report["nodes"] == nodes, proc.stderr
        assert {r["check"] for r in report["results"] if r["node"] == nodes[1]} >= {
            "docker",
            "image",
            "leftovers",
            "disk",
        }
    finally:
        subprocess.run(["scancel", job_id], check=False)
        server.stop()


def test_verify_over_ssh_through_a_proxyjump(sshd: LoopbackSshd) -> None:
    # behind-login is reached through gpu-1 (ProxyJump in the ssh config): two logins on the
    # sshd for one host, the jump's and the target's through the forwarded channel
    def logins() -> int:
        return (sshd.directory / "log").read_text().count("Accepted publickey")

    before = logins()
    proc = verify_ssh(sshd, "behind-login")
    found = {(r["node"], r["check"]): r for r in json.loads(proc.stdout)["results"]}
    assert ("behind-login", "reachable") not in found, proc.stdout
    assert found[("behind-login", "docker")]["status"] == "ok"
    assert logins() - before == 2


# issue 29 item 10: the config read as OpenSSH reads it, by both transports: an alias from an
# Include'd file, `Host * / ProxyJump bastion` beside `Host bastion / ProxyJump none` (a
# RecursionError once), and a hop written user@host:port (once looked up as an alias)
@pytest.mark.parametrize("transport", ["paramiko", "openssh"])
def test_verify_over_ssh_reads_the_config_as_openssh_does(
    sshd: LoopbackSshd, tmp_path: Path, transport: str
) -> None:
    d, port = sshd.directory, sshd.port
    known = tmp_path / "known_hosts"  # the hop by another name: OpenSSH refuses a jump to itself
    entry = (d / "known_hosts").read_text()
    known.write_text(entry + entry.replace("[127.0.0.1]", "[localhost]"))
    common = f"  IdentityFile {d / 'user_key'}\n  UserKnownHostsFile {known}\n"
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Include {sshd.ssh_config}\n"
        f"Host bastion\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  ProxyJump none\n"
        f"Host hop-literal\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        f"  ProxyJump root@localhost:{port}\n"
        f"Host *\n  ProxyJump bastion\n{common}"
    )

    def logins() -> int:
        return (d / "log").read_text().count("Accepted publickey")

    for alias, expected in (("gpu-2", 2), ("hop-literal", 3)):
        before = logins()
        # a master socket of its own: OpenSSH shares one per user@host:port, and both
        # aliases end at root@127.0.0.1:PORT
        runtime = tempfile.mkdtemp(prefix="cc-")  # short: a socket path has 107 bytes
        proc = run_cli(
            "verify", str(CPU_EXAMPLE), "--hosts", alias, "--ssh-config", str(config),
            "--ssh", transport, "--json",
            env={"HOME": str(tmp_path), "XDG_RUNTIME_DIR": runtime}, timeout=180,
        )  # fmt: skip
        found = {(r["node"], r["check"]): r for r in json.loads(proc.stdout)["results"]}
        assert (alias, "reachable") not in found, proc.stdout
        assert found[(alias, "docker")]["status"] == "ok"
        # gpu-2 (from the Include) through bastion; hop-literal through root@localhost:PORT,
        # which Host * sends through bastion in turn, as OpenSSH's own ssh -W would
        assert logins() - before == expected, alias
