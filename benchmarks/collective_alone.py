"""The self-test's all-reduce alone, without Ray: N plain processes on this host run the probe's
own collective (the `collective` method of clusterctl.runtime.probes' Probe, the code the
self-test's Ray actors run) and the lap is timed as the self-test times its "allreduce" lap,
from the call to the last rank's result.

It separates what the collective itself costs when N ranks share this host's cores (gloo over
loopback TCP) from what the self-test adds around it. It runs inside the dev image, where
the probes' torch is:

    python -m benchmarks.collective_alone --ranks 2 4 8 16 24 32 48

--part group times the group's set-up alone (init_process_group, then one barrier), --part
store the TCP store's alone (its constructor: connect, validate, ping). --lazy-init runs each
lap also with TORCH_GLOO_LAZY_INIT=1, alternating (torch 2.13's c10d/ProcessGroupGloo.hpp:
"Control whether or not connections are established in a full mesh or lazily as needed").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
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


def _rank(rank: int, world: int, port: int, lazy: bool, ready: Any, go: Any, out: Any) -> None:
    os.environ["TORCH_GLOO_LAZY_INIT"] = "1" if lazy else "0"  # read when the group is made
    import torch  # noqa: F401  # imported before the clock starts, as the probes' warm() does

    from clusterctl.runtime.probes import probe_class

    probe = probe_class(_NoRay)()
    numel = SIZE_MB * 1024 * 1024 // 4
    ready.wait()
    go.wait()
    out.put((rank, probe.collective("allreduce", rank, world, "127.0.0.1", port, numel, "gloo")))


def _group_setup(
    rank: int, world: int, port: int, lazy: bool, ready: Any, go: Any, out: Any
) -> None:
    """The group's set-up alone, as the probe makes it: the TCP store's rendezvous, gloo's
    connections (all of them in the full mesh), one barrier; "seconds" is this rank's set-up."""
    os.environ["TORCH_GLOO_LAZY_INIT"] = "1" if lazy else "0"
    import torch.distributed as dist

    ready.wait()
    go.wait()
    start = time.monotonic()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    dist.barrier()
    seconds = time.monotonic() - start
    dist.destroy_process_group()
    out.put((rank, {"ok": True, "seconds": seconds}))


def _store_alone(
    rank: int, world: int, port: int, lazy: bool, ready: Any, go: Any, out: Any
) -> None:
    """The TCP store the group's set-up starts with, alone: rank 0 serves it, every rank is
    its client (the constructor connects, validates and pings); "seconds" is this rank's."""
    import torch.distributed as dist

    ready.wait()
    go.wait()
    start = time.monotonic()
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, wait_for_workers=False)
    seconds = time.monotonic() - start
    store.add("joined", 1)
    while rank == 0 and int(store.add("joined", 0)) < world:  # the server outlives the clients
        time.sleep(0.01)
    out.put((rank, {"ok": True, "seconds": seconds}))


PARTS = {"allreduce": _rank, "group": _group_setup, "store": _store_alone}


def one_lap(world: int, part: str = "allreduce", lazy: bool = False) -> dict[str, Any]:
    """The allreduce lap of WORLD ranks: seconds from the start to the last result, and the
    ranks' average iteration (what the self-test reports as allreduce_seconds); for the PART
    "group" or "store" that set-up alone, and its slowest rank."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Barrier(world + 1), ctx.Event(), ctx.Queue()
    target = PARTS[part]
    procs = [
        ctx.Process(target=target, args=(r, world, port, lazy, ready, go, out))
        for r in range(world)
    ]
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
    row: dict[str, Any] = {"ranks": world, "lap_s": round(lap, 3)}
    if part != "allreduce":
        row["slowest_setup_s"] = round(max(r["seconds"] for _, r in results), 3)
    else:
        row["iteration_s"] = round(sum(r["seconds"] for _, r in results) / world, 4)
    return {**row, **({"lazy_init": lazy} if part != "allreduce" or lazy else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--part", choices=list(PARTS), default="allreduce", help="what a lap times")
    parser.add_argument(
        "--lazy-init", action="store_true", help="each lap also with TORCH_GLOO_LAZY_INIT=1"
    )
    parser.add_argument("--repeat", type=int, default=1, help="laps per rank count and mode")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = [False, True] if args.lazy_init else [False]
    if args.inside:
        for world in args.ranks:
            for _ in range(args.repeat):
                for lazy in modes:  # alternating: a drift of the host hits both alike
                    print(json.dumps(one_lap(world, args.part, lazy)), flush=True)
        return
    flags = ["--part", args.part, *(["--lazy-init"] if args.lazy_init else [])]
    ran = subprocess.run(
        ["docker", "run", "--rm", "--init", "--network", "host", "-v", f"{ROOT}:/src:ro",
         "-e", "PYTHONPATH=/src", "-w", "/src", IMAGE,
         "python3", "-m", "benchmarks.collective_alone", "--inside", *flags,
         "--repeat", str(args.repeat), "--ranks", *map(str, args.ranks)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if ran.returncode != 0:
        sys.exit(f"the collective alone failed:\n{ran.stderr[-3000:]}")
    laps = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    for lap in laps:
        mode = " (lazy init)" if lap.get("lazy_init") else ""
        if args.part != "allreduce":
            print(f"{lap['ranks']} ranks{mode}: set-up lap {lap['lap_s']} s, "
                  f"slowest rank {lap['slowest_setup_s']} s")  # fmt: skip
        else:
            print(f"{lap['ranks']} ranks{mode}: allreduce lap {lap['lap_s']} s, "
                  f"iteration {lap['iteration_s']} s")  # fmt: skip
    save_results(
        "collective_alone" if args.part == "allreduce" else f"collective_{args.part}", laps
    )


if __name__ == "__main__":
    main()
