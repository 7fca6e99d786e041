"""SSH the way the user's own `ssh` would connect: their ~/.ssh/config (Host aliases, HostName,
Port, User, IdentityFile, UserKnownHostsFile, ProxyJump), their agent and keys. Unknown host
keys are refused unless the user opts in. Used by verify, submit --host and the job commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    import paramiko


@dataclass(frozen=True)
class SshOptions:
    config_file: Path | None = None  # default ~/.ssh/config
    accept_new_host_keys: bool = False
    timeout: float = 15.0


def require_paramiko(what: str) -> None:
    try:
        import paramiko  # noqa: F401
    except ImportError:
        raise UsageError(f"{what} needs paramiko: pip install 'clusterctl[runtime]'") from None


def ssh_error(exc: Exception) -> str:
    """One line saying why a connection or command failed, with what to do."""
    import paramiko

    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return f"{exc} (add it to known_hosts, or --accept-new-host-keys)"
    if isinstance(exc, paramiko.BadHostKeyException):
        return f"host key mismatch: {exc} (a changed key may mean another machine answers)"
    return f"{type(exc).__name__}: {exc}"


class SshClient:
    """A paramiko client for one ~/.ssh/config alias, with its ProxyJump, closed on exit."""

    def __init__(self, alias: str, options: SshOptions) -> None:
        import paramiko

        self._opened: list[paramiko.SSHClient] = []
        config = paramiko.SSHConfig()
        path = options.config_file or Path.home() / ".ssh" / "config"
        if path.is_file():
            config = paramiko.SSHConfig.from_path(str(path))
        self.client = self._open(config, alias, options, None)

    def _open(
        self,
        config: paramiko.SSHConfig,
        alias: str,
        options: SshOptions,
        sock: paramiko.Channel | None,
    ) -> paramiko.SSHClient:
        import paramiko

        entry = config.lookup(alias)
        client = paramiko.SSHClient()
        self._opened.append(client)
        client.load_system_host_keys()
        for known in entry.get("userknownhostsfile", "~/.ssh/known_hosts").split():
            known_path = Path(known).expanduser()
            if known_path.is_file():
                client.load_host_keys(str(known_path))
        client.set_missing_host_key_policy(
            paramiko.AutoAddPolicy() if options.accept_new_host_keys else paramiko.RejectPolicy()
        )
        host = entry.get("hostname", alias)
        port = int(entry.get("port", 22))
        if sock is None and entry.get("proxyjump"):
            jump = self._open(config, entry["proxyjump"].split(",")[0], options, None)
            transport = jump.get_transport()
            assert transport is not None
            sock = transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0))
        client.connect(
            host,
            port=port,
            username=entry.get("user"),
            key_filename=entry.get("identityfile"),
            timeout=options.timeout,
            banner_timeout=options.timeout,
            auth_timeout=options.timeout,
            sock=sock,
        )
        return client

    def __enter__(self) -> paramiko.SSHClient:
        return self.client

    def __exit__(self, *_exc: object) -> None:
        for client in reversed(self._opened):
            client.close()
