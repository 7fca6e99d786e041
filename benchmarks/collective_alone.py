"""The self-test's all-reduce alone, without Ray: N plain processes on this host run the probe's
own collective (the `collective` method of clusterctl.runtime.probes' Probe, the code the
self-test's Ray actors run) and the lap is timed as the self-test times its "allreduce" lap,
from the call to the last rank's result.

It separates what the collective itself costs when N ranks share this host's cores (gloo over
loopback TCP) from what the self-test adds around it. It runs inside the dev image, where
the probes' torch is:

    python -m benchmarks.collective_alone --ranks 2 4 8 16 24 32 48
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import save_results

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "clusterctl/dev:latest"
SIZE_MB = 16  # selftest.size_mb's default (spec/models.py)


class _NoRay:
    """Stands in for the ray module when the Probe class is made: its @ray.remote leaves the
    class a plain class, so its methods run in this process."""

    @staticmethod
    def remote(**_options: Any) -> Any:
        return lambda cls: cls


def _rank(rank: int, world: int, port: int, ready: Any, go: Any, out: Any) -> None:
    import torch  # noqa: F401  # imported before the clock starts, as the probes' warm() does

    from clusterctl.runtime.probes import probe_class

    probe = probe_class(_NoRay)()
    numel = SIZE_MB * 1024 * 1024 // 4
    ready.wait()
    go.wait()
    out.put((rank, probe.collective("allreduce", rank, world, "127.0.0.1", port, numel, "gloo")))


def one_lap(world: int) -> dict[str, float]:
    """The allreduce lap of WORLD ranks: seconds from the start to the last result, and the
    ranks' average iteration (what the self-test reports as allreduce_seconds)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Barrier(world + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, port, ready, go, out)) for r in range(world)]
    for proc in procs:
        proc.start()
    ready.wait()
    start = time.monotonic()
    go.set()
    results = [out.get(timeout=1800) for _ in procs]
    lap = time.monotonic() - start
    for proc in procs:
        proc.join()
    if not all(r["ok"] for _, r in results):
        raise SystemExit(f"{world} ranks: a wrong all-reduce result")
    iteration = sum(r["seconds"] for _, r in results) / world
    return {"ranks": world, "lap_s": round(lap, 3), "iteration_s": round(iteration, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        for world in args.ranks:
            print(json.dumps(one_lap(world)), flush=True)
        return
    ran = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "-v", f"{ROOT}:/src:ro",
         "-e", "PYTHONPATH=/src", "-w", "/src", IMAGE,
         "python3", "-m", "benchmarks.collective_alone", "--inside",
         "--ranks", *map(str, args.ranks)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if ran.returncode != 0:
        sys.exit(f"the collective alone failed:\n{ran.stderr[-3000:]}")
    laps = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    for lap in laps:
        print(f"{lap['ranks']} ranks: allreduce lap {lap['lap_s']} s, "
              f"iteration {lap['iteration_s']} s")  # fmt: skip
    save_results("collective_alone", laps)


if __name__ == "__main__":
    main()
