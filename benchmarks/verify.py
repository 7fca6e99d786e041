"""`clusterctl verify` over SSH: 32 hosts against one host.

Goal (issue 10): verify over 32 SSH hosts takes at most 2x one host. The hosts are aliases of
one real sshd on loopback (clusterctl/devcluster/sshd.py), so all 32 gathers share this
machine's cores: the ratio is an upper bound of what 32 real nodes would cost. Both variants
run interleaved in one run; the figure is the median wall time of the whole command.

    python -m benchmarks.verify [--repeat 3] [--hosts 32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import save_results
from clusterctl.devcluster.sshd import start_loopback_sshd

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"


def run_verify(config: Path, home: Path, hosts: list[str]) -> float:
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
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, check=False
    )
    elapsed = time.perf_counter() - start
    if '"nodes"' not in proc.stdout:
        raise SystemExit(f"verify failed: {proc.stderr}")
    return elapsed


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
    rows = {
        "1 host": statistics.median(one),
        f"{args.hosts} hosts": statistics.median(many),
    }
    ratio = rows[f"{args.hosts} hosts"] / rows["1 host"]
    print("| hosts | median seconds | x one host |")
    print("|---|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.2f} | {seconds / rows['1 host']:.2f} |")
    print(f"\nratio {ratio:.2f} (goal: at most 2.0); runs: one {one}, many {many}")
    save_results("verify", {"rows": rows, "ratio": ratio, "one": one, "many": many})


if __name__ == "__main__":
    main()
