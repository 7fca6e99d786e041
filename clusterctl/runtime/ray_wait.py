"""Wait until the Ray cluster is complete, then run the connectivity self-test.

This runs *inside the head container*: job.sbatch carries the waiter's modules (this package)
joined into one source (clusterctl/render/payload.py), so they import only the standard
library, Ray and, for the all-reduce, torch. Exit codes name the failed phase.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from clusterctl.runtime.join import alive_nodes, connect, describe, wait_for_join, watch
from clusterctl.runtime.probes import Probes
from clusterctl.runtime.report import (
    EXIT_HEAD,
    EXIT_JOIN,
    EXIT_OK,
    EXIT_SELFTEST,
    fail,
    phase,
    result,
    say,
    set_phase_token,
)
from clusterctl.runtime.selftest import selftest, summary_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="head GCS address ip:port")
    parser.add_argument("--head-ip", required=True)
    parser.add_argument(
        "--nodes",
        required=True,
        help="comma-separated SLURM node names, or - to read them from stdin (large jobs: "
        "one argument is limited to 128 KiB)",
    )
    parser.add_argument(
        "--phase-token",
        default="",
        help="nonce for the phase lines; '-': the first line of stdin (never in argv, which "
        "the workload in the same container can read)",
    )
    parser.add_argument("--cpus-per-node", type=float, default=None)
    parser.add_argument("--gpus-per-node", type=float, default=0.0)
    parser.add_argument("--start-deadline", type=float, default=120)
    parser.add_argument("--join-deadline", type=float, default=300)
    parser.add_argument("--selftest", action="store_true")
    parser.add_argument("--selftest-deadline", type=float, default=120)
    parser.add_argument("--selftest-size-mb", type=int, default=16)
    parser.add_argument("--selftest-backend", default="gloo")
    parser.add_argument("--ranks-per-node", type=int, default=1)
    parser.add_argument("--min-busbw-gbps", type=float, default=0.0)
    parser.add_argument(
        "--min-busbw-source", default="selftest.min_busbw_gbps", help="whose threshold it is"
    )
    parser.add_argument("--busbw-note", default="", help="a public floor that was not applied")
    parser.add_argument(
        "--placement",
        metavar="JSON",
        help="placement groups to place as the workload's framework will, a JSON list of "
        "{stage, name, strategy, bundle, size, copies, tp} (clusterctl/render/placement.py)",
    )
    parser.add_argument("--weight-sync-mb", type=int, default=0)
    parser.add_argument(
        "--weight-sync-path",
        default="torch",
        choices=["torch", "ray-gloo", "ray-nccl", "pynccl", "cuda-ipc", "none"],
        help="how the framework syncs weights (clusterctl/lint/workload.py)",
    )
    parser.add_argument(
        "--logical-gpus",
        action="store_true",
        help="GPUs declared to Ray without devices (hardware.logical_gpus): a GPU rank with no "
        "device is a named skip, not a failure",
    )
    parser.add_argument("--watch", metavar="PHASE", help="watch node liveness, do not wait")
    parser.add_argument("--node-timeout", type=float, default=30)
    args = parser.parse_args(argv)
    token = sys.stdin.readline().strip() if args.phase_token == "-" else args.phase_token
    set_phase_token(token)
    names = sys.stdin.read() if args.nodes == "-" else args.nodes
    expected = [n for n in names.replace("\n", ",").split(",") if n]

    import ray

    # The probes' classes and functions reach other nodes pickled. Where these modules run
    # from the script's joined source, no node can import them: send them by value.
    for name, module in list(sys.modules.items()):
        if name.startswith("clusterctl.runtime."):
            ray.cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]

    start = time.monotonic()
    if not connect(ray, args.address, start + args.start_deadline):
        result("head-timeout")
        return EXIT_HEAD
    if args.watch:
        return watch(ray, expected, args.node_timeout, args.watch)
    probes = (
        Probes(ray, expected, args.selftest_backend, args.ranks_per_node) if args.selftest else None
    )
    joined = wait_for_join(
        ray,
        expected,
        args.cpus_per_node,
        args.gpus_per_node,
        time.monotonic() + args.join_deadline,
        probes.add_joined if probes is not None else None,
    )
    if joined is None:
        result("join-timeout", seen=describe(alive_nodes(ray)))
        return EXIT_JOIN
    phase("ray-joined")
    say(f"ray: all {len(expected)} nodes joined in {time.monotonic() - start:.1f}s")
    summary: dict[str, Any] = {"nodes": joined}
    if probes is not None:
        phase("selftest")
        report = selftest(
            ray,
            probes,
            args.head_ip,
            args.selftest_size_mb,
            time.monotonic() + args.selftest_deadline,
            json.loads(args.placement) if args.placement else None,
            args.weight_sync_mb,
            args.weight_sync_path,
            args.logical_gpus,
        )
        summary["selftest"] = report
        # the floor the all-reduce was judged against (or the public one that could not be)
        report["floor"] = {
            "gbps": args.min_busbw_gbps,
            "source": args.min_busbw_source,
            "note": args.busbw_note,
        }
        busbw = report.get("allreduce_busbw_gbps")
        if busbw is not None and busbw < args.min_busbw_gbps:
            report["ok"] = False
            report["problems"] = [
                *report.get("problems", []),
                f"all-reduce bus bandwidth {busbw:.3f} GB/s is below "
                f"{args.min_busbw_source or 'selftest.min_busbw_gbps'} {args.min_busbw_gbps:g}",
            ]
        for problem in report.get("problems", []):
            fail(problem, "selftest")
        if not report["ok"]:
            result("selftest-failed", **summary)
            return EXIT_SELFTEST
        for line in summary_lines(report, args.selftest_size_mb):
            say(line)
        if args.busbw_note and "allreduce_busbw_gbps" in report:
            say(f"selftest: {args.busbw_note}")
    result("ready", **summary)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
