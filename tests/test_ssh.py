"""How an ssh config is read (issue 29 item 10): OpenSSH's own `ssh -G` where its client is
installed, paramiko's reader otherwise, refusing what it would silently ignore. Connections to
a real sshd are in tests/e2e (test_verify_nodes, test_lifecycle)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clusterctl import ssh
from clusterctl.errors import UsageError
from clusterctl.ssh import ParamikoRemote, SshOptions, resolve
from tests.conftest import ROOT

CONFIG = """\
Host bastion
  HostName 10.0.0.1
  ProxyJump none
Host login
  HostName 10.0.0.2
  User alice
  Port 2200
Host loop-a
  ProxyJump loop-b
Host loop-b
  ProxyJump loop-a
Host *
  ProxyJump bastion
"""


@pytest.fixture
def options(tmp_path: Path) -> SshOptions:
    (tmp_path / "config").write_text(CONFIG)
    return SshOptions(config_file=tmp_path / "config")


@pytest.mark.parametrize("reader", ["ssh -G", "paramiko"])
def test_hops_and_none_read_as_openssh_reads_them(
    options: SshOptions, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if reader == "paramiko":
        monkeypatch.setattr(ssh.shutil, "which", lambda _name: None)
    login = resolve("login", options)
    assert (login.hostname, login.port, login.user, login.jumps) == (
        "10.0.0.2",
        2200,
        "alice",
        ("bastion",),
    )
    assert resolve("bastion", options).jumps == ()  # ProxyJump none, not a jump to "none"
    hop = resolve("bob@gw.example:2222", options)  # a hop, not an alias
    assert (hop.hostname, hop.port, hop.user, hop.jumps) == (
        "gw.example",
        2222,
        "bob",
        ("bastion",),
    )
    # the last hop of a chain is reached through the hops before it (ssh -J)
    assert resolve("login", options, jumps="a,b").jumps == ("a", "b")


def test_a_proxyjump_loop_is_one_clear_error(options: SshOptions) -> None:
    with pytest.raises(UsageError, match="ProxyJump chain longer than 8 hops"):
        ParamikoRemote("loop-a", options)


def test_without_openssh_an_include_is_refused_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ssh.shutil, "which", lambda _name: None)
    (tmp_path / "config").write_text("Host *\n  User bob\nInclude ~/.ssh/config.d/*\n")
    with pytest.raises(UsageError, match=r"config line 3: Include needs OpenSSH's client"):
        resolve("login", SshOptions(config_file=tmp_path / "config"))


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


# issue 20 item 7: one @cert-authority line made paramiko refuse the whole file
def test_known_hosts_with_markers_and_bad_lines_keep_the_others(tmp_path: Path) -> None:
    import paramiko

    from clusterctl.ssh import load_known_hosts

    known = tmp_path / "known_hosts"
    known.write_text(
        f"# a comment\n@cert-authority *.example.com {KEY}\n@revoked * {KEY}\n"
        f"not a host key line\n[127.0.0.1]:2222 {KEY}\n"
    )
    client = paramiko.SSHClient()
    revoked = load_known_hosts(client, [known])
    assert client.get_host_keys().lookup("[127.0.0.1]:2222") is not None
    assert [k.get_base64() for k in revoked] == [KEY.split()[1]]
    assert known.read_text().startswith("# a comment\n")  # read, never rewritten


def test_a_missing_ssh_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--ssh-config .*: no such file"):
        resolve("login", SshOptions(config_file=tmp_path / "nope"))


def test_a_remote_dir_that_cannot_be_made_refuses_never_falls_back_to_home(
    tmp_path: Path,
) -> None:
    """issue 20 (low): `mkdir -p DIR && cd DIR` under set -e went on in $HOME when mkdir failed."""
    from clusterctl.remote import REMOTE_SUBMIT, shell_path

    script = REMOTE_SUBMIT.replace("{where}", shell_path("/proc/clusterctl-cannot-exist"))
    script = script.replace("{name}", "job")
    result = subprocess.run(
        ["sh", "-c", script], input=b"", capture_output=True, env={"HOME": str(tmp_path)}
    )
    assert result.returncode == 3
    assert b"cannot create the remote_dir /proc/clusterctl-cannot-exist" in result.stderr
    assert not (tmp_path / "bundles").exists()


LOGIN_SHELLS = ("bash", "dash", "tcsh", "fish")  # scripts/test.sh installs tcsh and fish

SCRIPT = """set -e
name='it'"'"'s'
printf '%s|%s\\n' "$name" "${HOME:+home}"
cat <<'EOF_'
$not_expanded "quoted" `tick`
EOF_
read -r line && echo "stdin: $line"
"""


@pytest.mark.parametrize("shell", LOGIN_SHELLS)
def test_a_remote_command_runs_in_sh_whatever_the_login_shell(shell: str) -> None:
    """sshd runs a command as `$SHELL -c COMMAND` (issue 20: remote commands assumed a POSIX
    login shell); in_posix_sh's word means the same to each."""
    path = shutil.which(shell)
    assert path, f"{shell} is not installed (scripts/test.sh installs it)"
    expected = subprocess.run(
        ["sh", "-c", SCRIPT], input=b"from stdin\n", capture_output=True, check=True
    ).stdout
    ran = subprocess.run(
        [path, "-c", ssh.in_posix_sh(SCRIPT)],
        input=b"from stdin\n", capture_output=True, env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert (
        ran.stdout
        == expected
        == (b'it\'s|home\n$not_expanded "quoted" `tick`\nstdin: from stdin\n')
    )


def test_the_uploaded_bundle_takes_the_users_umask_even_as_root(tmp_path: Path) -> None:
    """issue 20 (low): tar run by root keeps the archive's modes unless told not to."""
    from clusterctl.remote import REMOTE_SUBMIT, bundle_tar, shell_path
    from clusterctl.render import render_bundle
    from clusterctl.spec import load_spec

    tools = tmp_path / "bin"  # what the script needs, and no sbatch: nothing is submitted
    tools.mkdir()
    for tool in ("sh", "mkdir", "find", "mktemp", "tar", "pwd"):
        (tools / tool).symlink_to(shutil.which(tool) or tool)
    bundle = render_bundle(load_spec(ROOT / "examples" / "cpu-dev-cluster.yaml").spec)
    script = REMOTE_SUBMIT.replace("{where}", shell_path(str(tmp_path / "jobs")))
    ran = subprocess.run(
        ["sh", "-c", f"umask 077\n{script.replace('{name}', 'job')}"],
        input=bundle_tar(bundle), capture_output=True,
        env={"HOME": str(tmp_path), "PATH": str(tools)},
    )  # fmt: skip
    assert ran.returncode == 127, ran.stderr  # unpacked, then no sbatch here
    (target,) = (tmp_path / "jobs" / "bundles").iterdir()
    modes = {p.name: p.stat().st_mode & 0o777 for p in target.iterdir()}
    assert modes["job.sbatch"] == 0o700 and modes["manifest.json"] == 0o600, modes
