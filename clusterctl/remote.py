"""A SLURM login node over SSH: upload a bundle with SFTP and submit it there, or run a
clusterctl command there (status, logs, cancel, down, ls) with its output streamed back.

Every submitted job lives under one directory on the login node (``remote_dir``): its bundle
in ``bundles/NAME-STAMP-HASH/``, and sbatch runs in ``remote_dir`` itself, so SLURM's output
file and the job's log directory (a relative logs.dir) land where the remote commands look.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

import click

from clusterctl.errors import UsageError
from clusterctl.ssh import SshClient, SshOptions, require_paramiko, ssh_error

if TYPE_CHECKING:
    from clusterctl.render.bundle import Bundle
    from clusterctl.spec.profiles import Profile

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_REMOTE_DIR = "clusterctl-jobs"
NOT_FOUND = 127  # what a shell returns for a command it cannot find
JOB_ID = re.compile(r"^(\d+)(;\S+)?$")


@dataclass(frozen=True)
class LoginNode:
    """Where and how to reach the login node."""

    host: str  # an alias of the user's ssh config
    remote_dir: str = DEFAULT_REMOTE_DIR  # relative to the login's home, or absolute
    clusterctl: str = "clusterctl"  # the command on the login node
    ssh: SshOptions = field(default_factory=SshOptions)


def _connect(login: LoginNode) -> SshClient:
    require_paramiko(f"reaching {login.host} over SSH")
    try:
        return SshClient(login.host, login.ssh)
    except Exception as exc:
        raise UsageError(f"cannot reach {login.host}: {ssh_error(exc)}") from None


def _run(client: Any, command: str, timeout: float = 120) -> tuple[int, str, str]:
    _, stdout, stderr = client.exec_command(command, timeout=timeout)
    out = stdout.read().decode(errors="replace")
    err = stderr.read().decode(errors="replace")
    return stdout.channel.recv_exit_status(), out, err


@dataclass(frozen=True)
class RemoteSubmission:
    job_id: str
    remote_dir: str  # absolute, on the login node
    bundle_dir: str  # absolute, on the login node


def submit_remote(bundle: Bundle, login: LoginNode) -> RemoteSubmission:
    """Upload BUNDLE into a directory of its own under remote_dir and sbatch it there."""
    try:
        return _submit_remote(bundle, login)
    except UsageError:
        raise
    except Exception as exc:  # paramiko's and SFTP's errors, one line each
        raise UsageError(f"submitting on {login.host} failed: {ssh_error(exc)}") from None


def _submit_remote(bundle: Bundle, login: LoginNode) -> RemoteSubmission:
    with _connect(login) as client:
        sftp = client.open_sftp()
        try:
            root = _mkdirs(sftp, login.remote_dir)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            name = f"{bundle.spec.slurm.job_name}-{stamp}-{bundle.spec_hash[:8]}"
            target = _mkdirs(sftp, f"{root}/bundles/{name}")
            for file_name, bundle_file in sorted(bundle.files.items()):
                path = f"{target}/{file_name}"
                with sftp.open(path, "w") as handle:
                    handle.write(bundle_file.content.encode("utf-8"))
                sftp.chmod(path, bundle_file.mode & 0o755)
        finally:
            sftp.close()
        script = f"{target}/job.sbatch"
        status, out, err = _run(
            client, f"cd {shlex.quote(root)} && sbatch --parsable {shlex.quote(script)}"
        )
    if status == NOT_FOUND:
        raise UsageError(f"sbatch is not on the PATH of a non-interactive shell on {login.host}")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    found = JOB_ID.match(last)
    if status != 0 or not found:
        raise UsageError(f"sbatch on {login.host} refused the job: {err.strip() or out.strip()}")
    return RemoteSubmission(found.group(1), root, target)


def _mkdirs(sftp: Any, path: str) -> str:
    """mkdir -p over SFTP; the absolute path."""
    current = PurePosixPath(sftp.normalize("."))  # SFTP starts in the login's home
    for part in PurePosixPath(path.removeprefix("~/")).parts:
        current = PurePosixPath("/") if part == "/" else current / part
        if part == "/":
            continue
        try:
            sftp.stat(str(current))
        except OSError:
            sftp.mkdir(str(current), 0o755)
    return str(current)


def run_clusterctl(
    login: LoginNode, argv: list[str], write: Callable[[bytes, bool], None] | None = None
) -> int:
    """Run `clusterctl ARGV` in remote_dir on the login node, its output streamed to WRITE
    (stdout, then stderr flag) as it arrives; its exit status."""
    try:
        status = _run_streamed(login, argv, write or _write_local)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"running clusterctl on {login.host} failed: {ssh_error(exc)}") from None
    if status == NOT_FOUND:
        raise UsageError(
            f"{login.clusterctl} was not found on {login.host}: install clusterctl there "
            "(pip install clusterctl) or name its path (--remote-clusterctl, or the profile's "
            "remote_clusterctl)"
        )
    return status


def _run_streamed(login: LoginNode, argv: list[str], emit: Callable[[bytes, bool], None]) -> int:
    command = (
        f"cd {shell_path(login.remote_dir)} 2> /dev/null || cd; "
        f"exec {shlex.quote(login.clusterctl)} {shlex.join(argv)}"
    )
    with _connect(login) as client:
        transport = client.get_transport()
        assert transport is not None
        channel = transport.open_session()
        channel.exec_command(command)
        while True:
            busy = False
            if channel.recv_ready():
                emit(channel.recv(65536), False)
                busy = True
            if channel.recv_stderr_ready():
                emit(channel.recv_stderr(65536), True)
                busy = True
            if channel.exit_status_ready() and not busy:
                while channel.recv_ready():
                    emit(channel.recv(65536), False)
                while channel.recv_stderr_ready():
                    emit(channel.recv_stderr(65536), True)
                break
            if not busy:
                time.sleep(0.05)
        return int(channel.recv_exit_status())


def shell_path(path: str) -> str:
    """PATH quoted for the remote shell, a leading ~/ left for the shell to expand."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def _write_local(data: bytes, is_stderr: bool) -> None:
    stream = sys.stderr if is_stderr else sys.stdout
    stream.buffer.write(data)
    stream.flush()


# ---- the command-line side: how a command names the login node ----


def remote_options(func: F) -> F:
    """Options that say how to reach a login node over SSH (submit and the job commands)."""
    for option in reversed(
        [
            click.option(
                "--remote-dir",
                help="Jobs directory on the login node "
                f"(default: the profile's, else {DEFAULT_REMOTE_DIR})",
            ),
            click.option("--remote-clusterctl", help="clusterctl's path on the login node."),
            click.option(
                "--ssh-config",
                type=click.Path(dir_okay=False, path_type=Path),
                help="SSH config file (default ~/.ssh/config).",
            ),
            click.option(
                "--accept-new-host-keys",
                is_flag=True,
                help="Trust host keys not yet in known_hosts (refused by default).",
            ),
        ]
    ):
        func = option(func)
    return func


def login_node(
    host: str | None,
    profile: Profile | None,
    remote_dir: str | None,
    remote_clusterctl: str | None,
    ssh_config: Path | None,
    accept_new_host_keys: bool,
) -> LoginNode:
    """The login node from the options, the profile filling what they leave out."""
    chosen = host or (profile.login_host if profile else None)
    if not chosen:
        raise UsageError("no login host: give --host, or a profile with login_host")
    return LoginNode(
        chosen,
        remote_dir or (profile.remote_dir if profile else DEFAULT_REMOTE_DIR),
        remote_clusterctl or (profile.remote_clusterctl if profile else "clusterctl"),
        SshOptions(ssh_config, accept_new_host_keys),
    )
