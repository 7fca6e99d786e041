"""`clusterctl verify` over SSH: 32 hosts against one host.

Goal (issue 10): verify over 32 SSH hosts takes at most 2x one host. The hosts are aliases of
one real sshd on loopback (clusterctl/devcluster/sshd.py), so 32 sshd sessions and 32
gathers share this machine's 2 cores with verify itself. Besides the wall time of the whole
command, the CPU time of the verify process (its own, as its parent sees it) says what verify
costs per host apart from what the 32 remote ends cost here, and the CPU time of the remote
ends (the sshd and every session it forked: the login user's shell start-up and the gather,
counted in a cgroup of the sshd's own) says what this machine spends on the side that a
real cluster spreads over 32 machines.

The remote ends log in twice over: as root, whose `.bashrc` on this machine runs `pyenv init`
(0.13-0.21 CPU s a session in docs/benchmarks.md's run, before any of verify's work), and as
`clusterctl-bench`, a user with Debian's stock `.bashrc` (made here if missing, in the docker
group: the gather asks the engine). All variants run interleaved in one run; figures are
medians.

    python -m benchmarks.verify [--repeat 3] [--hosts 32]
"""

from __future__ import annotations

import argparse
import os
import pwd
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import save_results
from clusterctl.devcluster.sshd import start_loopback_sshd

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"
BENCH_USER = "clusterctl-bench"


def ensure_bench_user() -> None:
    """The clean login user: stock home, public-key login only, may talk to the Docker engine."""
    try:
        pwd.getpwnam(BENCH_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", "docker", BENCH_USER],
            check=True,
        )
        subprocess.run(["usermod", "--password", "*", BENCH_USER], check=True)  # not locked


class CpuMeter:
    """CPU seconds of a process and everything it ever starts, from a cgroup of its own:
    a session whose parent exits first is reparented away and its CPU never reaches the
    sshd's cutime (so it is with non-root logins), but it stays in the cgroup."""

    def __init__(self, pid: int) -> None:
        v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
        base = Path("/sys/fs/cgroup") if v2 else Path("/sys/fs/cgroup/cpuacct")
        self.group = base / f"clusterctl-bench-{pid}"
        self.group.mkdir()
        (self.group / "cgroup.procs").write_text(f"{pid}\n")
        self.pid = pid
        self.v2 = v2

    def wait_for_sessions_to_end(self, deadline: float = 10.0) -> None:
        """Wait until only the process itself is left, so a run's CPU counts in that run."""
        procs = self.group / "cgroup.procs"
        end = time.monotonic() + deadline
        while procs.read_text().split() != [str(self.pid)]:
            if time.monotonic() > end:
                raise SystemExit(f"sshd sessions still running after {deadline:.0f} s")
            time.sleep(0.02)

    def seconds(self) -> float:
        if self.v2:
            stat = dict(line.split() for line in (self.group / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Remove the cgroup once the process and its sessions are gone."""
        self.group.rmdir()


def run_verify(
    config: Path, home: Path, hosts: list[str], remote: CpuMeter
) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of the verify process, CPU seconds of the remote ends)."""
    cmd = [
        "clusterctl",
        "verify",
        str(EXAMPLE),
        "--json",
        "--ssh-config",
        str(config),
        "--hosts",
        ",".join(hosts),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    remote_before = remote.seconds()
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if '"nodes"' not in proc.stdout:
        raise SystemExit(f"verify failed: {proc.stderr}")
    remote.wait_for_sessions_to_end()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, remote.seconds() - remote_before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=32)
    args = parser.parse_args()
    ensure_bench_user()
    aliases = [f"bench-{i}" for i in range(1, args.hosts + 1)]
    logins = {"root": "root (pyenv .bashrc)", BENCH_USER: f"{BENCH_USER} (stock .bashrc)"}
    counts = (1, args.hosts)
    runs: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # sshd reads authorized_keys as the login user
        servers = {
            user: start_loopback_sshd(Path(tmp) / user, aliases, user=user) for user in logins
        }
        meters: dict[str, CpuMeter] = {}
        try:
            for user, server in servers.items():
                meters[user] = CpuMeter(server.process.pid)
            for _ in range(args.repeat):
                for user, server in servers.items():
                    for count in counts:
                        runs.setdefault((user, count), []).append(
                            run_verify(
                                server.ssh_config,
                                Path(tmp),
                                aliases[:count],
                                meters[user],
                            )
                        )
            script = gather_script()
            gather = [gather_cpu(script) for _ in range(args.repeat)]
        finally:
            for server in servers.values():
                server.stop()
            for meter in meters.values():
                meter.remove()
    medians = {
        key: tuple(statistics.median(run[i] for run in measured) for i in range(3))
        for key, measured in runs.items()
    }

    def label(user: str, count: int) -> str:
        return f"{logins[user]}, {count} host{'s' if count > 1 else ''}"

    print(
        "| login, hosts | wall seconds | x one host | verify's own CPU seconds | x one host "
        "| remote ends' CPU seconds (per host) |"
    )
    print("|---|---|---|---|---|---|")
    for (user, count), (wall, cpu, remote) in medians.items():
        base_wall, base_cpu, _ = medians[(user, 1)]
        print(
            f"| {label(user, count)} | {wall:.2f} | {wall / base_wall:.2f} | {cpu:.2f} "
            f"| {cpu / base_cpu:.2f} | {remote:.2f} ({remote / count:.3f}) |"
        )
    print(
        "\ngoal: 32 hosts at most 2.0 x one host; "
        f"the gather script alone, run here with bash: {statistics.median(gather):.3f} CPU s"
    )
    save_results(
        "verify",
        {
            "rows": {label(*key): row for key, row in medians.items()},
            "runs": {label(*key): measured for key, measured in runs.items()},
            "gather_cpu": gather,
        },
    )


def gather_script() -> str:
    """The gather script verify sends to every host for the example spec."""
    from clusterctl.render.bundle import render_gather_script
    from clusterctl.spec.loader import load_spec

    return render_gather_script(load_spec(str(EXAMPLE), ()).spec)


def gather_cpu(script: str) -> float:
    """CPU seconds of one gather run locally (bash and every tool it starts)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["bash", "-s"], input=script, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    main()
