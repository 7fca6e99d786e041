"""Images and the job's lifecycle on the real dev cluster: an offline build with the Docker
engine, an image tarball that the preflight loads onto a node holding another image, a pinned
image ID failing the node that holds another one, and submit / status / logs / wait / cancel /
down / ls from a "login node" reached over SSH (a real sshd on loopback, a key and an ssh
config written by the test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.devcluster import cluster
from clusterctl.devcluster.sshd import LoopbackSshd, start_loopback_sshd
from tests.conftest import run_cli
from tests.e2e.conftest import docker_socket_group, run_text, system_user
from tests.e2e.test_jobs import (
    CPU_EXAMPLE,
    FAIL_FAST_DEADLINE,
    Job,
    as_user,
    containers_of,
    finish,
    render,
    sbatch,
)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]
CLUSTERCTL = str(Path(sys.executable).parent / "clusterctl")  # the console script itself
FAST = ("selftest.enabled=false",)  # for jobs not rendered by render(): not about the self-test


def image_id(image: str, docker_host: str | None = None) -> str:
    cmd = ["docker", *(["-H", docker_host] if docker_host else [])]
    return subprocess.run(
        [*cmd, "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def node3_stale() -> Iterator[str]:
    """node3 routed to a Docker engine of its own (its image is put there by each test)."""
    host = cluster.start_engine("node3", print)
    cluster.route_node("node3", host)
    try:
        yield host
    finally:
        cluster.route_node("node3", None)


def test_a_pinned_image_id_fails_the_node_holding_another_image_under_the_tag(
    tmp_path: Path, node3_stale: str
) -> None:
    stale = cluster.put_other_image(node3_stale)
    good = image_id(cluster.DEV_IMAGE)
    job, rc, elapsed = sbatch(tmp_path, render(tmp_path, f"container.image_id={good}"))
    assert rc != 0
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node3", "preflight")
    assert cause.startswith(
        f"image: {cluster.DEV_IMAGE} here is {stale[:19]}, the job's is {good[:19]}"
    )
    assert elapsed < FAIL_FAST_DEADLINE
    assert "containers" not in [e["phase"] for e in job.timeline()]


@pytest.fixture(scope="module")
def saved_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The dev image saved by `clusterctl image save` into a shared tarball: (its path, the
    save's output)."""
    tarball = tmp_path_factory.mktemp("shared") / "dev.tar"
    saved = run_cli(
        "image", "save", str(CPU_EXAMPLE),
        "--set", "container.pull=load", "--set", f"container.load_from={tarball}",
        timeout=600,
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    return tarball, saved.stdout


def test_image_save_then_the_preflight_loads_it_over_another_image_on_one_node(
    tmp_path: Path, node3_stale: str, saved_image: tuple[Path, str]
) -> None:
    stale = cluster.put_other_image(node3_stale)
    tarball, saved = saved_image
    spec_sets = ("container.pull=load", f"container.load_from={tarball}")
    good = image_id(cluster.DEV_IMAGE)
    assert Path(f"{tarball}.id").read_text() == good + "\n"
    assert f"saved {cluster.DEV_IMAGE} {good} to {tarball}" in saved

    job, rc, _ = sbatch(tmp_path, render(tmp_path, *spec_sets))
    assert rc == 0, job.log
    assert "workload sees 3 ray nodes" in job.log
    # node3 loaded the tarball over its other image; the shared engine kept its own
    assert image_id(cluster.DEV_IMAGE, node3_stale) == good != stale
    assert f"[node3] loading {cluster.DEV_IMAGE} from {tarball}" in job.log
    assert (job.log_dir / "preflight" / "image-id").read_text().strip() == good
    checks = json.loads((job.log_dir / "preflight" / "verify.json").read_text())
    assert {r["node"] for r in checks if r["check"] == "image" and r["status"] == "ok"} == {
        "node1",
        "node2",
        "node3",
    }
    # `image load` checks what it loaded against the ID file
    loaded = run_cli("image", "load", str(tarball), "--image", cluster.DEV_IMAGE, timeout=600)
    assert loaded.returncode == 0 and good in loaded.stdout, loaded.stderr
    assert containers_of(job) == [] and containers_of(job, node3_stale) == []


def test_each_dev_node_has_a_disk_of_its_own(tmp_path: Path) -> None:
    """The same path on every dev node is each node's own directory (what sbcast needs)."""
    result = subprocess.run(
        ["srun", "-N", "3", "--ntasks-per-node=1", "bash", "-c",
         f'echo "$SLURMD_NODENAME" > {cluster.NODE_LOCAL_DIR}/who-{tmp_path.name}'],
        capture_output=True, text=True, timeout=60, env=cluster.slurm_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for node in ("node1", "node2", "node3"):
        written = cluster.node_local_dir(node) / f"who-{tmp_path.name}"
        assert written.read_text() == f"{node}\n"
        written.unlink()
    assert not (cluster.NODE_LOCAL_DIR / f"who-{tmp_path.name}").exists()


def test_sbcast_copies_the_tarball_to_every_nodes_disk_and_a_node_loads_its_own_copy(
    tmp_path: Path, node3_stale: str, saved_image: tuple[Path, str]
) -> None:
    stale = cluster.put_other_image(node3_stale)
    tarball, _ = saved_image
    spec_sets = (
        "container.pull=load",
        f"container.load_from={tarball}",
        "container.load_via=sbcast",
        f"container.load_stage={cluster.NODE_LOCAL_DIR}",
    )
    job, rc, _ = sbatch(tmp_path, render(tmp_path, *spec_sets))
    assert rc == 0, job.log
    copy = f"{cluster.NODE_LOCAL_DIR}/cc-{job.job_id}-image.tar"
    assert f"clusterctl: sbcast copied {tarball} to {copy} on every node" in job.log
    # node3 loaded its own copy, never the shared tarball
    assert f"[node3] loading {cluster.DEV_IMAGE} from {copy}" in job.log
    assert f"from {tarball}" not in job.log
    assert image_id(cluster.DEV_IMAGE, node3_stale) == image_id(cluster.DEV_IMAGE) != stale
    # every node's copy is gone: the two that did not need it, and the one that loaded it
    for node in ("node1", "node2", "node3"):
        assert list(cluster.node_local_dir(node).glob("cc-*")) == [], node
    assert containers_of(job) == [] and containers_of(job, node3_stale) == []


def test_a_failed_sbcast_fails_the_node_that_needed_its_copy(
    tmp_path: Path, node3_stale: str, saved_image: tuple[Path, str]
) -> None:
    cluster.put_other_image(node3_stale)
    tarball, _ = saved_image
    missing = tmp_path / "no-such-dir"
    job, rc, elapsed = sbatch(
        tmp_path,
        render(
            tmp_path,
            "container.pull=load",
            f"container.load_from={tarball}",
            "container.load_via=sbcast",
            f"container.load_stage={missing}",
        ),
    )
    assert rc != 0
    assert f"clusterctl: warning: sbcast {tarball} {missing}/cc-{job.job_id}-image.tar failed" in (
        job.log
    )
    node, phase, cause = job.first_failure()
    assert (node, phase) == ("node3", "preflight")
    assert cause.startswith(
        f"cannot read image tarball {missing}/cc-{job.job_id}-image.tar (sbcast's copy of {tarball}"
    )
    assert elapsed < FAIL_FAST_DEADLINE


# issue 42 item 3: in a shared load_stage (sticky and open to all, as /tmp) another user takes
# the node-local copy's fixed name first; bob's sbcast cannot replace it (only a warning), and
# the node that needs the copy fails naming it, never loading it
def test_a_file_another_user_planted_at_the_copys_name_is_never_loaded(
    node3_stale: str, saved_image: tuple[Path, str]
) -> None:
    stale = cluster.put_other_image(node3_stale)
    system_user("cc-bob", docker_socket_group())
    engine = Path(node3_stale.removeprefix("unix://"))
    shutil.chown(engine, group=docker_socket_group())
    stages = [cluster.node_local_dir(n) for n in ("node1", "node2", "node3")]
    modes = [s.stat().st_mode & 0o7777 for s in stages]
    workdir = Path(tempfile.mkdtemp(prefix="cc-bob-", dir="/tmp"))
    planted = stages[2] / "unset"
    try:
        for stage in stages:
            os.chmod(stage, 0o1777)
        os.chmod(workdir, 0o755)
        tarball = workdir / "dev.tar"  # where bob may read it
        shutil.copy(saved_image[0], tarball)
        shutil.copy(f"{saved_image[0]}.id", f"{tarball}.id")
        script = render(
            workdir,
            "container.pull=load",
            f"container.load_from={tarball}",
            "container.load_via=sbcast",
            f"container.load_stage={cluster.NODE_LOCAL_DIR}",
        )
        subprocess.run(["chown", "-R", "cc-bob", str(workdir)], check=True)
        held = run_text(
            [*as_user("cc-bob"), "sbatch", "--parsable", "--hold", str(script)], cwd=workdir
        )
        job = Job(held.split(";")[0], workdir)
        planted = stages[2] / f"cc-{job.job_id}-image.tar"
        planted.write_bytes(b"theirs")
        os.chown(planted, 65534, 65534)  # nobody's
        subprocess.run(["scontrol", "release", job.job_id], check=True, timeout=60)
        assert finish(job) != 0
        copy = f"{cluster.NODE_LOCAL_DIR}/cc-{job.job_id}-image.tar"
        assert f"clusterctl: warning: sbcast {tarball} {copy} failed" in job.log
        node, phase, cause = job.first_failure()
        assert (node, phase) == ("node3", "preflight")
        assert cause.startswith(f"{copy} is not this job's copy (another user's file"), cause
        assert f"loading {cluster.DEV_IMAGE} from {copy}" not in job.log
        assert image_id(cluster.DEV_IMAGE, node3_stale) == stale  # nothing was loaded there
        assert planted.read_bytes() == b"theirs" and planted.stat().st_uid == 65534
        assert containers_of(job) == [] and containers_of(job, node3_stale) == []
    finally:
        planted.unlink(missing_ok=True)
        for stage, mode in zip(stages, modes, strict=True):
            os.chmod(stage, mode)
        shutil.rmtree(workdir, ignore_errors=True)


def canary_wheel(directory: Path) -> Path:
    """A one-module wheel, written by hand: what an air-gapped site's wheelhouse holds."""
    directory.mkdir(parents=True)
    path = directory / "clusterctl_canary-0.1-py3-none-any.whl"
    info = "clusterctl_canary-0.1.dist-info"
    files = {
        "clusterctl_canary/__init__.py": "BUILT = 'offline'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: clusterctl-canary\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def test_build_offline_from_a_wheelhouse_prints_and_pins_the_image_id(tmp_path: Path) -> None:
    canary_wheel(tmp_path / "wheels")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "slurm: {job_name: built, nodes: 1, exclusive: false}\n"
        "versions: {ray: 2.60.0}\n"
        "container:\n"
        "  image: clusterctl/built:test\n"
        "  pull: never\n"
        "  build:\n"
        "    dockerfile: cpu\n"
        f"    base_image: {cluster.DEV_IMAGE}\n"
        "    wheelhouse: wheels\n"
        "    pip_packages: [clusterctl-canary==0.1]\n"
        "workload: {framework: command, command: 'true'}\n"
    )
    try:
        result = run_cli("build", str(spec), "-o", str(tmp_path / "b"), timeout=600)
        assert result.returncode == 0, result.stderr
        built = image_id("clusterctl/built:test")
        assert f"built clusterctl/built:test {built} (" in result.stdout
        assert re.search(r"step \d+/\d+ RUN pip install --no-cache-dir --no-index", result.stderr)
        info = json.loads((tmp_path / "b" / "image.json").read_text())
        assert info["id"] == built and info["dockerfile"] == "Dockerfile.cpu"
        assert f'"image_id": "{built}"' in (tmp_path / "b" / "job.sbatch").read_text()
        ran = subprocess.run(
            ["docker", "run", "--rm", "clusterctl/built:test", "python3", "-c",
             "import clusterctl_canary as c; print(c.BUILT)"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert ran.stdout.strip() == "offline", ran.stderr
        # a failing step names itself
        spec.write_text(spec.read_text().replace("clusterctl-canary==0.1", "clusterctl-absent"))
        failed = run_cli("build", str(spec), "-o", str(tmp_path / "c"), timeout=600)
        assert failed.returncode == 2 and "Traceback" not in failed.stderr
        assert re.search(r"error: docker build failed at step \d+: RUN pip install", failed.stderr)
        assert not (tmp_path / "c").exists()
    finally:
        subprocess.run(["docker", "image", "rm", "-f", "clusterctl/built:test"], check=False)


# ---- a login node over SSH ---------------------------------------------------------------


@pytest.fixture(scope="module")
def login(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSshd]:
    server = start_loopback_sshd(tmp_path_factory.mktemp("login"), ["login"], unknown=("stranger",))
    try:
        yield server
    finally:
        server.stop()


def over_ssh(login: LoopbackSshd, jobs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        *args,
        "--ssh-config", str(login.ssh_config),
        "--remote-dir", str(jobs),
        "--remote-clusterctl", CLUSTERCTL,
        env={"HOME": str(login.directory)},
        timeout=300,
    )  # fmt: skip


def test_submit_over_ssh_then_wait_status_logs_and_ls_there(
    login: LoopbackSshd, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    submitted = over_ssh(
        login, jobs, "submit", str(CPU_EXAMPLE), "--host", "login", "--wait",
        "--set", "slurm.nodes=2", *[a for s in FAST for a in ("--set", s)],
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    found = re.search(
        r"^submitted job (\d+) on login \((\S+)/job\.sbatch\)$", submitted.stdout, re.M
    )
    assert found, submitted.stdout
    job_id, bundle_dir = found.group(1), Path(found.group(2))
    assert bundle_dir.parent == jobs / "bundles"
    assert sorted(p.name for p in bundle_dir.iterdir()) == [
        "job.sbatch", "manifest.json", "spec.resolved.yaml"
    ]  # fmt: skip
    assert f"logs: {jobs}/clusterctl-logs/cpu-smoke-{job_id}" in submitted.stdout
    assert f"next: clusterctl status {job_id} --host login" in submitted.stdout
    assert f"job {job_id} succeeded" in submitted.stdout  # --wait, answered on the login node
    # the live view over SSH: the login node's wait has no terminal, so a line per change
    assert re.search(r"^phase: workload \(\+\d+\.\ds\)$", submitted.stdout, re.M)
    assert "ray: 2/2 nodes alive" in submitted.stdout
    assert re.search(rf"^report: \S+/cpu-smoke-{job_id}/report\.html$", submitted.stdout, re.M)

    status = over_ssh(login, jobs, "status", job_id, "--host", "login", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["run"]["status"] == 0
    assert {"preflight", "workload"} <= {row["phase"] for row in report["run"]["rows"]}
    workload = over_ssh(login, jobs, "logs", job_id, "--host", "login", "--phase", "workload")
    assert "workload sees 2 ray nodes" in workload.stdout, workload.stderr
    listed = over_ssh(login, jobs, "ls", "--host", "login")
    assert re.search(rf"{job_id}\s.*cpu-smoke.*succeeded", listed.stdout), listed.stdout


# through the openssh transport (issue 29 item 10; paramiko's runs submit, wait, status, logs
# and ls above); the login alias comes from an Include'd file
def test_cancel_and_down_over_ssh_through_a_profile(login: LoopbackSshd, tmp_path: Path) -> None:
    transport = "openssh"
    jobs = tmp_path / "jobs"
    (tmp_path / "clusterctl-profiles.yaml").write_text(
        f"profiles:\n  dev:\n    login_host: login\n    ssh: {transport}\n"
        f"    remote_dir: {jobs}\n    remote_clusterctl: {CLUSTERCTL}\n"
        "    spec:\n      slurm: {nodes: 2, exclusive: false}\n      selftest: {enabled: false}\n"
    )
    spec = tmp_path / "long.yaml"
    spec.write_text(
        CPU_EXAMPLE.read_text().replace("slurm:\n", "profile: dev\nslurm:\n", 1)
        .replace("  nodes: 3\n", "")
        .split("workload:")[0]
        + "workload: {framework: command, command: 'sleep 600'}\n"
    )  # fmt: skip
    config = tmp_path / "ssh_config"
    config.write_text(f"Include {login.ssh_config}\n")
    # a master socket of this test's own (short: a socket path has 107 bytes)
    runtime = tempfile.mkdtemp(prefix="cc-")
    env = {"HOME": str(login.directory), "CLUSTERCTL_PROFILES": "", "XDG_RUNTIME_DIR": runtime}
    ssh = ("--ssh-config", str(config))
    logins_before = _logins(login)
    submitted = run_cli("submit", str(spec), *ssh, env=env, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    job_id = re.search(r"^submitted job (\d+) on login ", submitted.stdout, re.M).group(1)  # type: ignore[union-attr]
    job = Job(job_id, jobs)
    deadline = time.monotonic() + 120
    while '"workload"' not in _text(job, "timeline.jsonl"):
        assert time.monotonic() < deadline, "the workload never started"
        time.sleep(0.5)
    assert len(containers_of(job)) == 2
    profile = ("--profile", "dev", *ssh)
    follower = subprocess.Popen(
        ["clusterctl", "logs", job_id, "-f", *profile],
        cwd=tmp_path,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cancelled = run_cli("cancel", job_id, *profile, env=env, cwd=tmp_path, timeout=200)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"job {job_id} CANCELLED" in cancelled.stdout
    assert containers_of(job) == []
    assert finish(job) != 0
    # logs -f over SSH streamed the job's log and ended by itself once the job had ended
    followed, errors = follower.communicate(timeout=60)
    assert follower.returncode == 0, errors
    assert "phase: workload" in followed
    assert f"job {job_id} failed" in followed and "received SIGTERM" in followed
    down = run_cli("down", job_id, *profile, env=env, cwd=tmp_path, timeout=200)
    assert down.returncode == 0, down.stderr
    assert sorted(down.stdout.splitlines()) == [
        f"clusterctl: [node1] no container of job {job_id} left",
        f"clusterctl: [node2] no container of job {job_id} left",
    ]
    # submit, logs -f, cancel, down: one login, the master connection reused by every later
    # command (paramiko logs in once per command)
    assert _logins(login) - logins_before == 1


def _logins(server: LoopbackSshd) -> int:
    return (server.directory / "log").read_text().count("Accepted publickey")


# issue 42 item 2: another user planted a link at the fallback control directory's fixed
# name (no XDG runtime dir, a shared TMPDIR), pointing at a private directory of this user's
# (so a check that follows it passes, and the link is repointed once the master is open):
# the OpenSSH transport never follows it, its master lives in a directory of its own
def test_the_openssh_master_never_lives_where_another_user_pointed(
    login: LoopbackSshd, tmp_path: Path
) -> None:
    shared = Path(tempfile.mkdtemp(prefix="cc-"))  # short: a socket path has 107 bytes
    theirs = shared / "mine-but-pointed-at"
    try:
        os.chmod(shared, 0o1777)
        theirs.mkdir(mode=0o700)
        planted = shared / f"clusterctl-ssh-{os.getuid()}"
        planted.symlink_to(theirs)
        os.lchown(planted, 65534, 65534)
        env = {"HOME": str(login.directory), "TMPDIR": str(shared), "XDG_RUNTIME_DIR": ""}
        listed = run_cli(
            "ls", "--host", "login", "--ssh", "openssh", "--ssh-config", str(login.ssh_config),
            "--remote-dir", str(tmp_path / "jobs"), "--remote-clusterctl", CLUSTERCTL,
            env=env, timeout=120,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert list(theirs.iterdir()) == []  # no master socket through their link
        assert planted.is_symlink() and os.readlink(planted) == str(theirs)
        (own,) = shared.glob(f"cc-ssh-{os.getuid()}-*")
        assert oct(own.lstat().st_mode & 0o777) == "0o700"
        assert [p.is_socket() for p in own.iterdir()] == [True]  # the master, reused later
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# issue 42 item 4: `logs --host` to a terminal: a job's log that carries terminal escapes
# (a clipboard write, a screen clear) arrives over a real sshd and is shown, never obeyed
def test_logs_over_ssh_to_a_terminal_shows_escapes_as_text(
    login: LoopbackSshd, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    submitted = over_ssh(
        login, jobs, "submit", str(CPU_EXAMPLE), "--host", "login", "--wait",
        "--set", "slurm.nodes=1", *[a for s in FAST for a in ("--set", s)],
        "--set", "workload.framework=command",
        "--set", "workload.command=printf 'step 1 \\033]52;c;cHduZWQ=\\007 \\033[2J done\\n'",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id = re.search(r"^submitted job (\d+) on login ", submitted.stdout, re.M).group(1)  # type: ignore[union-attr]
    argv = [
        CLUSTERCTL, "logs", job_id, "--host", "login", "--phase", "workload",
        "--ssh-config", str(login.ssh_config), "--remote-dir", str(jobs),
        "--remote-clusterctl", CLUSTERCTL,
    ]  # fmt: skip
    shown = _on_a_terminal(argv, {**os.environ, "HOME": str(login.directory)})
    assert "step 1 \\x1b]52;c;cHduZWQ=\\x07 \\x1b[2J done" in shown, shown
    assert "\x1b]52" not in shown and "\x1b[2J" not in shown


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """ARGV's output as a terminal receives it (a pseudo-terminal on stdout and stderr)."""
    import pty

    main, side = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=side, stderr=side, env=env)
    os.close(side)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0, b"".join(chunks)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize(
    ("transport", "says"),
    [("paramiko", "not found in known_hosts"), ("openssh", "Host key verification failed")],
)
def test_submit_refuses_a_login_node_whose_host_key_is_unknown(
    login: LoopbackSshd, tmp_path: Path, transport: str, says: str
) -> None:
    refused = over_ssh(
        login, tmp_path / "jobs", "submit", str(CPU_EXAMPLE), "--host", "stranger",
        "--ssh", transport,
    )  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "error: cannot reach stranger:" in refused.stderr
    assert says in refused.stderr and "--accept-new-host-keys" in refused.stderr
    assert not (tmp_path / "jobs").exists()


# issue 20 high 2: a shared remote_dir where another user planted bundles/ (their own
# directory, or a symlink to one): submit refuses it and writes nothing there
@pytest.mark.parametrize("planted", ["directory", "symlink", "open-root"])
def test_submit_refuses_a_remote_dir_another_user_can_write(
    login: LoopbackSshd, tmp_path: Path, planted: str
) -> None:
    jobs, theirs = tmp_path / "jobs", tmp_path / "theirs"
    jobs.mkdir()
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)  # nobody's
    if planted == "directory":
        (jobs / "bundles").mkdir()
        os.chown(jobs / "bundles", 65534, 65534)
    elif planted == "symlink":
        (jobs / "bundles").symlink_to(theirs)
    else:  # a remote_dir anyone may write to, without the sticky bit
        os.chmod(jobs, 0o777)
    refused = over_ssh(login, jobs, "submit", str(CPU_EXAMPLE), "--host", "login")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    said = {"directory": "bundles is not this user's own directory",
            "symlink": "bundles is not this user's own directory",
            "open-root": "is writable by others and not sticky"}[planted]  # fmt: skip
    assert said in refused.stderr
    assert list(theirs.iterdir()) == []
    if planted == "open-root":
        os.chmod(jobs, 0o1777)  # sticky, as /tmp: another user cannot swap bundles/ any more
        accepted = over_ssh(
            login,
            jobs,
            "submit",
            str(CPU_EXAMPLE),
            "--host",
            "login",
            *[a for s in FAST for a in ("--set", s)],
        )
        assert accepted.returncode == 0, accepted.stderr
        job_id = re.search(r"^submitted job (\d+) ", accepted.stdout, re.M).group(1)  # type: ignore[union-attr]
        subprocess.run(["scancel", job_id], check=False)
        (bundle,) = (jobs / "bundles").iterdir()  # made by mktemp: unpredictable, private
        assert re.fullmatch(r"cpu-smoke-\d{8}T\d{6}-[0-9a-f]{8}-\w{8}", bundle.name), bundle.name
        assert oct((jobs / "bundles").stat().st_mode & 0o777) == "0o700"


def _text(job: Job, name: str) -> str:
    found = list((job.workdir / "clusterctl-logs").glob(f"*-{job.job_id}/{name}"))
    return found[0].read_text() if found else ""


def test_a_compressed_tarball_loads_and_is_checked_against_its_id_file(tmp_path: Path) -> None:
    tiny = "clusterctl/tiny:1"
    engine = cluster.start_engine("node3", print)  # an engine the shared one's jobs never use
    cluster.put_other_image(engine)  # a one-file image, then tagged as the tiny one
    want = image_id(cluster.DEV_IMAGE, engine)
    subprocess.run(["docker", "-H", engine, "tag", cluster.DEV_IMAGE, tiny], check=True)
    tarball = tmp_path / "tiny.tar.gz"
    env = {"DOCKER_HOST": engine}
    saved = run_cli("image", "save", str(CPU_EXAMPLE), "--set", f"container.image={tiny}",
                    "-o", str(tarball), env=env)  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    assert tarball.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    subprocess.run(["docker", "-H", engine, "image", "rm", tiny], check=True, capture_output=True)
    loaded = run_cli("image", "load", str(tarball), "--image", tiny, env=env)
    assert loaded.returncode == 0, loaded.stderr
    assert image_id(tiny, engine) == want
    # an ID file that belongs to another image is refused, naming both
    (tmp_path / "tiny.tar.gz.id").write_text("sha256:" + "0" * 64 + "\n")
    refused = run_cli("image", "load", str(tarball), "--image", tiny, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    # refused from the tarball's own manifest, before docker load could retag anything
    assert f"{tarball} holds {want[:19]} (clusterctl/tiny:1), but {tarball}.id says sha256:000" in (
        refused.stderr
    )
