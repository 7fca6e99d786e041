"""`clusterctl verify` over SSH: 32 hosts against one host.

Goal (issue 10): verify over 32 SSH hosts takes at most 2x one host. The hosts are aliases of
one real sshd on loopback (clusterctl/devcluster/sshd.py), so 32 sshd sessions and 32
gathers share this machine's 2 cores with verify itself. Besides the wall time of the whole
command, the CPU time of the verify process (its own, as its parent sees it) says what verify
costs per host apart from what the 32 remote ends cost here. Both variants run interleaved in
one run; figures are medians.

    python -m benchmarks.verify [--repeat 3] [--hosts 32]
"""

from __future__ import annotations

import argparse
import os
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


def run_verify(config: Path, home: Path, hosts: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the verify process)."""
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
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if '"nodes"' not in proc.stdout:
        raise SystemExit(f"verify failed: {proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=32)
    args = parser.parse_args()
    aliases = [f"bench-{i}" for i in range(1, args.hosts + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        server = start_loopback_sshd(Path(tmp), aliases)
        try:
            one, many = [], []
            for _ in range(args.repeat):
                one.append(run_verify(server.ssh_config, Path(tmp), aliases[:1]))
                many.append(run_verify(server.ssh_config, Path(tmp), aliases))
        finally:
            server.stop()
    many_name = f"{args.hosts} hosts"
    rows = {
        "1 host": (statistics.median(w for w, _ in one), statistics.median(c for _, c in one)),
        many_name: (statistics.median(w for w, _ in many), statistics.median(c for _, c in many)),
    }
    base_wall, base_cpu = rows["1 host"]
    print("| hosts | wall seconds | x one host | verify's own CPU seconds | x one host |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in rows.items():
        print(
            f"| {name} | {wall:.2f} | {wall / base_wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f} |"
        )
    print(f"\nwall ratio {rows[many_name][0] / base_wall:.2f} (goal: at most 2.0)")
    save_results("verify", {"rows": rows, "one": one, "many": many})


if __name__ == "__main__":
    main()
