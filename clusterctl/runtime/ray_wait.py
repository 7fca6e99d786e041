"""Wait until the Ray cluster is complete, then run the connectivity self-test.

This file runs *inside the head container* (job.sbatch embeds its source), so it imports only
the standard library, Ray and, for the all-reduce, torch. Exit codes name the failed phase.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

EXIT_OK = 0
EXIT_HEAD = 10  # the GCS never answered
EXIT_JOIN = 11  # not every node joined, or resources differ
EXIT_SELFTEST = 12  # a node could not run a task, or the all-reduce failed / was too slow
EXIT_LOST = 13  # --watch: Ray marked a node of the job dead


def say(message: str) -> None:
    print(f"clusterctl: {message}", flush=True)


PHASE_TOKEN = ""  # the job's nonce: job.sbatch records only phase lines that carry it


def fail(problem: str, phase_name: str) -> None:
    """One FAIL line in job.sbatch's format, "FAIL node=N phase=P: cause", built from the
    problem's node (its leading "node=N", else all nodes) and its text."""
    node, text = "all", problem
    if problem.startswith("node="):
        node, _, rest = problem[len("node=") :].partition(" ")
        text = f"{node} {rest}"
    say(f"FAIL node={node} phase={phase_name}: {text}")


def phase(name: str) -> None:
    """Mark a phase; job.sbatch timestamps these lines into the job's timeline."""
    print(f"CLUSTERCTL_PHASE {PHASE_TOKEN} {name}", flush=True)


def result(status: str, **fields: Any) -> None:
    print(
        "CLUSTERCTL_RESULT " + json.dumps({"status": status, **fields}, sort_keys=True), flush=True
    )


def port_open(address: str, deadline: float) -> bool:
    """Poll until the GCS port accepts TCP: ray.init on a dead address blocks for minutes."""
    import socket

    host, _, port = address.rpartition(":")
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def connect(ray: Any, address: str, deadline: float) -> bool:
    last = "nothing listens on the port"
    if not port_open(address, deadline):
        say(f"FAIL node=head phase=ray-head: GCS at {address} did not answer: {last}")
        return False
    while time.monotonic() < deadline:
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            return True
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ...
            last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            time.sleep(0.5)
    say(f"FAIL node=head phase=ray-head: GCS at {address} did not answer: {last}")
    return False


def alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def describe(nodes: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {
        str(n.get("NodeName") or n.get("NodeManagerAddress")): {
            "CPU": float(n.get("Resources", {}).get("CPU", 0)),
            "GPU": float(n.get("Resources", {}).get("GPU", 0)),
        }
        for n in nodes
    }


def join_problems(
    seen: dict[str, dict[str, float]], expected: list[str], cpus: float | None, gpus: float
) -> list[str]:
    """What keeps the cluster from matching the allocation (empty when complete)."""
    problems = [f"node={name} has not joined" for name in expected if name not in seen]
    problems += [
        f"node={name} joined but is not part of this job" for name in seen if name not in expected
    ]
    for name, res in seen.items():
        if res["GPU"] != gpus:
            problems.append(f"node={name} offers {res['GPU']:g} GPUs, expected {gpus:g}")
        if cpus is not None and res["CPU"] != cpus:
            problems.append(f"node={name} offers {res['CPU']:g} CPUs, expected {cpus:g}")
    return problems


def wait_for_join(
    ray: Any, expected: list[str], cpus: float | None, gpus: float, deadline: float
) -> dict[str, dict[str, float]] | None:
    last_count = -1
    problems: list[str] = ["no node seen yet"]
    seen: dict[str, dict[str, float]] = {}
    while time.monotonic() < deadline:
        seen = describe(alive_nodes(ray))
        problems = join_problems(seen, expected, cpus, gpus)
        if len(seen) != last_count:
            say(f"ray: {len(seen)}/{len(expected)} nodes alive")
            last_count = len(seen)
        if not problems:
            return seen
        time.sleep(0.25)
    for problem in problems:
        fail(problem, "ray-join")
    return None


def lost_nodes(nodes: list[dict[str, Any]], expected: list[str]) -> list[str]:
    """The job's nodes Ray no longer counts alive (a node that re-registered after being
    marked dead still counts as lost: its raylet and everything on it started over)."""
    dead = {str(n.get("NodeName")) for n in nodes if not n.get("Alive")}
    alive = {str(n.get("NodeName")) for n in nodes if n.get("Alive")}
    return [name for name in expected if name in dead or name not in alive]


def watch(ray: Any, expected: list[str], node_timeout: float, phase_name: str) -> int:
    """Until ended: fail naming every node Ray marks dead (it misses node_timeout health
    checks: the machine died, hangs, or lost its network)."""
    while True:
        lost = lost_nodes(ray.nodes(), expected)
        if lost:
            for name in lost:
                fail(f"node={name} lost: Ray marked it dead (no answer to its health checks "
                     f"for {node_timeout:g}s, ray.node_timeout)", phase_name)  # fmt: skip
            result("node-lost", lost=lost)
            return EXIT_LOST
        time.sleep(1)


def selftest(
    ray: Any, expected: list[str], head_ip: str, size_mb: int, backend: str, deadline: float
) -> dict[str, Any]:
    """One task per node, then an all-reduce across all nodes (when torch is present)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    by_name = {str(n.get("NodeName")): n["NodeID"] for n in alive_nodes(ray)}

    @ray.remote(num_cpus=0)
    class Probe:
        def where(self) -> dict[str, str]:
            import socket

            return {"hostname": socket.gethostname()}

        def free_port(self) -> int:
            import socket

            with socket.socket() as sock:
                sock.bind(("", 0))
                return int(sock.getsockname()[1])

        def allreduce(
            self, rank: int, world: int, master: str, port: int, numel: int, backend: str
        ) -> dict[str, Any]:
            try:
                import torch
                import torch.distributed as dist
            except ImportError:
                return {"skipped": "torch is not installed in the image"}
            dist.init_process_group(
                backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world
            )
            try:
                # nccl (RCCL on ROCm) needs device memory; the actor holds one GPU then.
                device = "cuda" if backend == "nccl" else "cpu"
                tensor = torch.ones(numel, dtype=torch.float32, device=device)
                dist.all_reduce(tensor)  # warm-up, and the correctness check below
                ok = bool(torch.all(tensor == world))
                start = time.perf_counter()
                dist.all_reduce(tensor)
                if device == "cuda":
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - start
            finally:
                dist.destroy_process_group()
            return {"ok": ok, "seconds": seconds}

    probes = {
        name: Probe.options(  # type: ignore[attr-defined]
            num_gpus=1 if backend == "nccl" else 0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=by_name[name], soft=False),
        ).remote()
        for name in expected
    }
    remaining = max(1.0, deadline - time.monotonic())
    refs = {name: p.where.remote() for name, p in probes.items()}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=remaining)
    silent = [name for name, ref in refs.items() if ref not in ready]
    if silent:
        return {"ok": False, "problems": [f"node={n} did not run a task" for n in silent]}
    report: dict[str, Any] = {"ok": True, "tasks": len(refs)}
    world = len(expected)
    if world < 2:
        return report
    numel = size_mb * 1024 * 1024 // 4
    port = ray.get(probes[expected[0]].free_port.remote())
    runs = [
        probes[name].allreduce.remote(rank, world, head_ip, port, numel, backend)
        for rank, name in enumerate(expected)
    ]
    ready, _ = ray.wait(runs, num_returns=world, timeout=max(1.0, deadline - time.monotonic()))
    if len(ready) < world:
        late = [expected[i] for i, ref in enumerate(runs) if ref not in ready]
        return {"ok": False, "problems": [f"node={n} did not finish the all-reduce" for n in late]}
    outcomes = ray.get(runs)
    if any("skipped" in o for o in outcomes):
        report["allreduce"] = "skipped: " + outcomes[0].get("skipped", "torch missing")
        return report
    if not all(o["ok"] for o in outcomes):
        bad = [expected[i] for i, o in enumerate(outcomes) if not o["ok"]]
        return {"ok": False, "problems": [f"node={n} got a wrong all-reduce result" for n in bad]}
    seconds = max(o["seconds"] for o in outcomes)
    nbytes = numel * 4
    report["allreduce_busbw_gbps"] = nbytes / seconds * 2 * (world - 1) / world / 1e9
    report["allreduce_seconds"] = seconds
    return report


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
    parser.add_argument("--phase-token", default="", help="nonce for the phase lines")
    parser.add_argument("--cpus-per-node", type=float, default=None)
    parser.add_argument("--gpus-per-node", type=float, default=0.0)
    parser.add_argument("--start-deadline", type=float, default=120)
    parser.add_argument("--join-deadline", type=float, default=300)
    parser.add_argument("--selftest", action="store_true")
    parser.add_argument("--selftest-deadline", type=float, default=120)
    parser.add_argument("--selftest-size-mb", type=int, default=16)
    parser.add_argument("--selftest-backend", default="gloo")
    parser.add_argument("--min-busbw-gbps", type=float, default=0.0)
    parser.add_argument("--watch", metavar="PHASE", help="watch node liveness, do not wait")
    parser.add_argument("--node-timeout", type=float, default=30)
    args = parser.parse_args(argv)
    global PHASE_TOKEN
    PHASE_TOKEN = args.phase_token
    names = sys.stdin.read() if args.nodes == "-" else args.nodes
    expected = [n for n in names.replace("\n", ",").split(",") if n]

    import ray

    start = time.monotonic()
    if not connect(ray, args.address, start + args.start_deadline):
        result("head-timeout")
        return EXIT_HEAD
    if args.watch:
        return watch(ray, expected, args.node_timeout, args.watch)
    joined = wait_for_join(
        ray, expected, args.cpus_per_node, args.gpus_per_node, time.monotonic() + args.join_deadline
    )
    if joined is None:
        result("join-timeout", seen=describe(alive_nodes(ray)))
        return EXIT_JOIN
    phase("ray-joined")
    say(f"ray: all {len(expected)} nodes joined in {time.monotonic() - start:.1f}s")
    summary: dict[str, Any] = {"nodes": joined}
    if args.selftest:
        phase("selftest")
        report = selftest(
            ray,
            expected,
            args.head_ip,
            args.selftest_size_mb,
            args.selftest_backend,
            time.monotonic() + args.selftest_deadline,
        )
        summary["selftest"] = report
        busbw = report.get("allreduce_busbw_gbps")
        if report["ok"] and busbw is not None and busbw < args.min_busbw_gbps:
            report["ok"] = False
            report["problems"] = [
                f"all-reduce bus bandwidth {busbw:.3f} GB/s is below "
                f"selftest.min_busbw_gbps {args.min_busbw_gbps:g}"
            ]
        for problem in report.get("problems", []):
            fail(problem, "selftest")
        if not report["ok"]:
            result("selftest-failed", **summary)
            return EXIT_SELFTEST
        if busbw is not None:
            say(
                f"selftest: {len(expected)} nodes ran tasks; {args.selftest_backend} "
                f"all-reduce {args.selftest_size_mb} MB: {busbw:.3f} GB/s bus bandwidth"
            )
        else:
            say(
                f"selftest: {len(expected)} nodes ran tasks; all-reduce "
                f"{report.get('allreduce', 'not run (one node)')}"
            )
    result("ready", **summary)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
