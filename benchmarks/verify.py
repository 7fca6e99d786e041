"""`clusterctl verify` over SSH: 32 hosts against one host.

Goal (issue 10): verify over 32 SSH hosts takes at most 2x one host. The hosts are aliases of
one real sshd on loopback (clusterctl/devcluster/sshd.py), so 32 sshd sessions and 32
gathers share this machine's 2 cores with verify itself. Besides the wall time of the whole
command, the CPU time of the verify process (its own, as its parent sees it) says what verify
costs per host apart from what the 32 remote ends cost here, and the CPU time of the remote
ends (the sshd and every session it forked: the login user's shell start-up and the gather)
says what this machine spends on the side that a real cluster spreads over 32 machines.

The remote ends log in twice over: as root, whose `.bashrc` on this machine runs `pyenv init`
(about 0.12 CPU s a session, before any of verify's work), and as `clusterctl-bench`, a user
with Debian's stock `.bashrc` (made here if missing, in the docker group: the gather asks the
engine). All variants run interleaved in one run; figures are medians.

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


def reaped_cpu(pid: int) -> float:
    """CPU seconds of a process and of its children it has reaped (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def wait_for_sessions_to_end(pid: int, deadline: float = 10.0) -> None:
    """Wait until sshd has reaped every session of the last run, so its CPU counts there."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    end = time.monotonic() + deadline
    while children.read_text().strip():
        if time.monotonic() > end:
            raise SystemExit(f"sshd sessions still open after {deadline:.0f} s")
        time.sleep(0.02)


def run_verify(
    config: Path, home: Path, hosts: list[str], sshd_pid: int
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
    wait_for_sessions_to_end(sshd_pid)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    remote_before = reaped_cpu(sshd_pid)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if '"nodes"' not in proc.stdout:
        raise SystemExit(f"verify failed: {proc.stderr}")
    wait_for_sessions_to_end(sshd_pid)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, reaped_cpu(sshd_pid) - remote_before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=32)
    args = parser.parse_args()
    ensure_bench_user()
    aliases = [f"bench-{i}" for i in range(1, args.hosts + 1)]
    logins = {"root": "root (pyenv .bashrc)", BENCH_USER: f"{BENCH_USER} (stock .bashrc)"}
    runs: dict[str, list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        for user in logins:
            directory = Path(tmp) / user
            directory.mkdir()
            os.chmod(tmp, 0o755)  # sshd reads authorized_keys as the login user
            servers[user] = start_loopback_sshd(directory, aliases, user=user)
        try:
            for _ in range(args.repeat):
                for user, server in servers.items():
                    pid = server.process.pid
                    for hosts in (aliases[:1], aliases):
                        row = f"{logins[user]}, {len(hosts)} host" + ("s" if len(hosts) > 1 else "")
                        runs.setdefault(row, []).append(
                            run_verify(server.ssh_config, Path(tmp), hosts, pid)
                        )
            script = gather_script()
            gather = [gather_cpu(script) for _ in range(args.repeat)]
        finally:
            for server in servers.values():
                server.stop()
    rows = {
        name: tuple(statistics.median(run[i] for run in measured) for i in range(3))
        for name, measured in runs.items()
    }
    print(
        "| login, hosts | wall seconds | x one host | verify's own CPU seconds | x one host "
        "| remote ends' CPU seconds (per host) |"
    )
    print("|---|---|---|---|---|---|")
    for name, (wall, cpu, remote) in rows.items():
        login, hosts = name.rsplit(", ", 1)
        base_wall, base_cpu, _ = rows[f"{login}, 1 host"]
        count = int(hosts.split()[0])
        print(
            f"| {name} | {wall:.2f} | {wall / base_wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f} "
            f"| {remote:.2f} ({remote / count:.3f}) |"
        )
    print(
        "\ngoal: 32 hosts at most 2.0 x one host; "
        f"the gather script alone, run here with bash: {statistics.median(gather):.3f} CPU s"
    )
    save_results("verify", {"rows": rows, "runs": runs, "gather_cpu": gather})


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
