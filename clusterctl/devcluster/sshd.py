"""A real sshd on a loopback port with host aliases, for verify's SSH path (tests, benchmarks).

Everything lives in one directory: host and user keys made here, an sshd_config, a
known_hosts holding the host key, and an ssh config with one `Host` alias per name, all
pointing at 127.0.0.1. Test traffic stays on loopback.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import UsageError


@dataclass
class LoopbackSshd:
    directory: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def ssh_config(self) -> Path:
        return self.directory / "ssh_config"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_loopback_sshd(
    directory: Path,
    aliases: list[str],
    unknown: tuple[str, ...] = (),
    jumped: tuple[str, ...] = (),
    user: str = "root",
) -> LoopbackSshd:
    """Start sshd on a free loopback port; ALIASES know its host key, UNKNOWN ones do not,
    JUMPED ones reach it through the first alias (ProxyJump). Every alias logs in as USER,
    who must be able to read DIRECTORY (sshd reads authorized_keys as the user)."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).exists():
        raise UsageError("sshd is missing: `clusterctl dev-cluster up` installs openssh-server")
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    for key in ("host_key", "user_key"):
        if not (d / key).exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True
            )
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n"
        "StrictModes no\nMaxStartups 200:30:400\nMaxSessions 200\n"
        "Subsystem sftp internal-sftp\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    process = subprocess.Popen([sshd, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "log")])
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError as exc:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise UsageError(f"sshd did not start: {(d / 'log').read_text()}") from exc
            time.sleep(0.1)
    kind, key = (d / "host_key.pub").read_text().split()[:2]
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {key}\n")
    (d / "empty_known_hosts").write_text("")

    def entry(alias: str, known: str, jump: str = "") -> str:
        return (
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {d / 'user_key'}\n  UserKnownHostsFile {d / known}\n"
            + (f"  ProxyJump {jump}\n" if jump else "")
        )

    (d / "ssh_config").write_text(
        "".join(entry(a, "known_hosts") for a in aliases)
        + "".join(entry(a, "empty_known_hosts") for a in unknown)
        + "".join(entry(a, "known_hosts", aliases[0]) for a in jumped)
    )
    return LoopbackSshd(d, port, process)
