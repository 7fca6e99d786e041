"""Wait until the Ray cluster is complete, then run the connectivity self-test.

This file runs *inside the head container* (job.sbatch embeds its source), so it imports only
the standard library, Ray and, for the all-reduce, torch. Exit codes name the failed phase.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

EXIT_OK = 0
EXIT_HEAD = 10  # the GCS never answered
EXIT_JOIN = 11  # not every node joined, or resources differ
EXIT_SELFTEST = 12  # a node could not run a task, or the all-reduce failed / was too slow
EXIT_LOST = 13  # --watch: Ray marked a node of the job dead
# Collectives are timed as nccl-tests times them (NVIDIA/nccl-tests README, "Performance":
# -w 5 warm-up iterations, not timed; -n 20 timed iterations; -a 1: the ranks' average).
# The reachability test: beyond the ring, each node tries this many other nodes (all pairs up
# to PAIR_PARTNERS + 2 nodes): O(N * k) round trips, 9,216 at 1024 nodes, not N^2 (~1M).
PAIR_PARTNERS = 8
WARMUP_ITERS = 5
TIMED_ITERS = 20


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
    ray: Any,
    expected: list[str],
    cpus: float | None,
    gpus: float,
    deadline: float,
    on_alive: Callable[[list[dict[str, Any]]], None] | None = None,
) -> dict[str, dict[str, float]] | None:
    last_count = -1
    problems: list[str] = ["no node seen yet"]
    seen: dict[str, dict[str, float]] = {}
    while time.monotonic() < deadline:
        alive = alive_nodes(ray)
        if on_alive is not None:
            on_alive(alive)
        seen = describe(alive)
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


# The self-test: rehearse what the workload will do, each part with a deadline.

VERSION_PACKAGES = ("ray", "torch", "vllm", "verl", "openrlhf", "transformers")


def node_versions() -> dict[str, str]:
    """This node's Python and package versions, and the ROCm/CUDA build torch was made for
    (read from torch/version.py: importing torch takes seconds)."""
    import importlib.metadata as metadata
    import importlib.util
    import platform
    import re
    from pathlib import Path

    out = {"python": platform.python_version()}
    for name in VERSION_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        try:
            text = Path(spec.origin).with_name("version.py").read_text()
        except OSError:
            text = ""
        for key in ("hip", "cuda"):
            found = re.search(rf"^{key}\s*(?::[^=]*)?=\s*'([^']*)'", text, re.M)
            if found:
                out[key] = found.group(1)
    return out


def version_problems(reports: dict[str, dict[str, str]]) -> list[str]:
    """Each node whose version of something differs from what most nodes have."""
    problems = []
    for key in sorted({k for r in reports.values() for k in r}):
        values = {node: r.get(key, "absent") for node, r in reports.items()}
        common = Counter(values.values()).most_common(1)[0][0]
        problems += [
            f"node={node} has {key} {value}, the other nodes {common}"
            for node, value in sorted(values.items())
            if value != common
        ]
    return problems


def busbw_allreduce(nbytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests computes them for all-reduce (doc/PERFORMANCE.md:
    algbw = S/t, busbw = algbw * 2(n-1)/n)."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2 * (ranks - 1) / ranks


def gpu_index(visible: int, assigned: list[Any], mask: str | None = None) -> int:
    """The torch device index of the GPU Ray gave this actor. Ray's GPU ids are the entries
    of the node's visibility variable (MASK, e.g. HIP_VISIBLE_DEVICES=4,5,6,7), and torch
    numbers the visible devices from 0: id 5 there is device 1. With Ray narrowing the
    variable to one GPU it is device 0; with no variable set the id is the device index."""
    if not assigned:
        return 0
    gpu = str(assigned[0]).strip()
    ids = [part.strip() for part in (mask or "").split(",") if part.strip()]
    if gpu in ids:
        return ids.index(gpu) if visible > 1 else 0
    if visible <= 1:
        return 0
    return int(gpu)


def no_device(torch: Any) -> str:
    """Why this GPU rank has no device to run on, naming the GPU Ray gave it and the
    visibility it sees; "" when torch sees a CUDA/HIP device."""
    if torch.cuda.is_available():
        return ""
    from ray import get_gpu_ids

    ids = ",".join(str(i) for i in get_gpu_ids()) or "none"
    mask = visibility_mask()
    seen = f", visibility {mask}" if mask else ", no visibility variable"
    return f"no CUDA/HIP device in torch (Ray GPU ids {ids}{seen})"


def visibility_mask() -> str | None:
    """The visibility variable torch reads in this process: CUDA_VISIBLE_DEVICES, or on ROCm
    HIP_VISIBLE_DEVICES (torch's HIP backend honours both)."""
    import os

    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def _show(bundle: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(bundle.items())) + "}"


def strict_pack_problem(group: dict[str, Any], per_node: dict[str, dict[str, float]]) -> str | None:
    """A STRICT_PACK group that no node can hold: Ray would keep it pending forever (the
    cross-node vLLM init hang, verl's pending pool on uneven nodes)."""
    if group["strategy"] != "STRICT_PACK":
        return None
    need = {k: v * group["size"] for k, v in group["bundle"].items()}
    if any(all(offer.get(k, 0.0) >= v for k, v in need.items()) for offer in per_node.values()):
        return None
    most = {k: max((offer.get(k, 0.0) for offer in per_node.values()), default=0.0) for k in need}
    return (
        f"{group['stage']}: a STRICT_PACK group of {group['size']} x "
        f"{_show(group['bundle'])} needs {_show(need)} on one node, and no node "
        f"offers that (the most: {_show(most)}); it would never be placed"
    )


def engine_slices(bundle_nodes: dict[int, str], tp: int) -> list[list[str]]:
    """The nodes of each rollout engine's TP bundles, grouped by node first as OpenRLHF's
    get_bundle_indices (openrlhf/trainer/ray/utils.py, 0.9.10-0.11.2) does; the self-test
    calls that function itself where OpenRLHF is installed."""
    by_node: dict[str, list[int]] = {}
    for index, node in bundle_nodes.items():
        by_node.setdefault(node, []).append(index)
    order = [i for indices in by_node.values() for i in indices]
    return [[bundle_nodes[i] for i in order[k : k + tp]] for k in range(0, len(order), tp)]


def openrlhf_slicer() -> tuple[Any, str]:
    """OpenRLHF's own get_bundle_indices where the image has OpenRLHF, else None and why."""
    import importlib

    try:
        utils = importlib.import_module("openrlhf.trainer.ray.utils")
    except Exception as exc:  # any import failure: not usable here
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
    return utils.get_bundle_indices, "openrlhf.trainer.ray.utils.get_bundle_indices"


def split_engines(
    ray: Any, group: Any, tp: int, names: dict[str, str]
) -> tuple[list[list[str]], str]:
    """Each engine's nodes in a placed group, and which code sliced it."""
    table = ray.util.placement_group_table(group)
    bundle_nodes = {int(i): names.get(n, n) for i, n in table["bundles_to_node_id"].items()}
    slicer, how = openrlhf_slicer()
    if slicer is None:
        return engine_slices(bundle_nodes, tp), f"clusterctl's copy (no OpenRLHF here: {how})"
    count = len(bundle_nodes) // tp
    return [[bundle_nodes[int(i)] for i in slicer(group, e, tp)] for e in range(count)], how


def check_placements(
    ray: Any, groups: list[dict[str, Any]], deadline: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """Place the workload's groups as its framework will (see clusterctl/render/placement.py),
    stage by stage, each stage's groups at once, and release them. Problems name the stage."""
    from ray.util.placement_group import placement_group, remove_placement_group

    nodes = alive_nodes(ray)
    names = {str(n["NodeID"]): str(n.get("NodeName")) for n in nodes}
    per_node = {
        str(n.get("NodeName")): {k: float(v) for k, v in n["Resources"].items()} for n in nodes
    }
    reports: list[dict[str, Any]] = []
    problems: list[str] = []
    for stage in dict.fromkeys(g["stage"] for g in groups):
        members = [g for g in groups if g["stage"] == stage]
        unfit = [p for p in (strict_pack_problem(g, per_node) for g in members) if p]
        if unfit:
            problems += unfit
            reports.append({"stage": stage, "placed": False})
            continue
        start = time.monotonic()
        made = [
            (g, placement_group([dict(g["bundle"])] * g["size"], strategy=g["strategy"]))
            for g in members
            for _ in range(g.get("copies", 1))
        ]
        try:
            late = _wait_all(ray, {str(i): pg.ready() for i, (_, pg) in enumerate(made)}, deadline)
            shapes = [
                f"{g.get('copies', 1)} x {g['strategy']} {g['size']} x {_show(g['bundle'])} "
                f"({g['name']})"
                for g in members
            ]
            report = {"stage": stage, "groups": len(made), "placed": len(made) - len(late),
                      "seconds": round(time.monotonic() - start, 3), "shapes": shapes}  # fmt: skip
            reports.append(report)
            if late:
                offered: Counter[str] = Counter()
                for offer in per_node.values():
                    offered.update({k: v for k, v in offer.items() if k in ("CPU", "GPU")})
                problems.append(
                    f"{stage}: only {report['placed']} of {len(made)} placement groups "
                    f"({'; '.join(report['shapes'])}) were placed before the deadline; the "
                    f"cluster offers {_show(dict(offered))}"
                )
                continue
            for g, pg in made:
                if int(g.get("tp") or 0) <= 1:
                    continue
                slices, how = split_engines(ray, pg, int(g["tp"]), names)
                report["sliced_by"] = how
                for engine, where in enumerate(slices):
                    if len(set(where)) > 1:
                        problems.append(
                            f"{stage}: rollout engine {engine} (TP {g['tp']}) would span "
                            f"{', '.join(sorted(set(where)))}: its bundles were placed on "
                            "several nodes, and vLLM's tensor parallelism across nodes hangs "
                            "at init"
                        )
        finally:
            for _, pg in made:
                remove_placement_group(pg)
    return reports, problems


# How the workload's framework moves weights from the trainer to the rollout engines
# (clusterctl/lint/workload.py openrlhf_weight_sync for OpenRLHF 0.9.10-0.11.2) -> the group
# constructor the rehearsal uses. "torch": a torch.distributed group (verl, commands).
WEIGHT_SYNC_SKIPPED = {
    "cuda-ipc": "OpenRLHF moves weights by CUDA IPC inside each node (colocate_all, nccl, "
    "synchronous): no group crosses nodes",
    "none": "the workload has no rollout engines to sync",
}
WEIGHT_SYNC = {
    "torch": "torch",
    "ray-gloo": "ray.util.collective",
    "ray-nccl": "ray.util.collective",
    "pynccl": "openrlhf stateless_init_process_group",
}


CANNOT_RUN = "cannot-run"


def weight_sync_constructor(path: str, backend: str) -> tuple[str, str]:
    """The constructor for PATH that can run in this process, and why another was not:
    CANNOT_RUN (and why, with the fix) when the framework's own group cannot run in this
    image, since the workload's weight sync would fail the same way."""
    wanted = WEIGHT_SYNC.get(path, "torch")
    if wanted == "torch":
        return "torch", ""
    needs_gpu = path != "ray-gloo"
    if needs_gpu and backend != "nccl":
        return "torch", f"{wanted} needs GPUs (NCCL/RCCL); this job tests {backend}"
    if wanted == "ray.util.collective":
        return ray_collective_usable(backend)
    import importlib

    try:
        importlib.import_module("vllm.distributed.utils")
        importlib.import_module("openrlhf.utils.distributed_util")
    except Exception as exc:  # any import failure: OpenRLHF's own sync would fail too
        cause = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return CANNOT_RUN, (
            f"OpenRLHF's weight sync (vLLM's PyNccl group) cannot be made in this image: "
            f"{cause}; fix: install vLLM and OpenRLHF in the image as the workload needs them"
        )
    return wanted, ""


def ray_collective_usable(backend: str) -> tuple[str, str]:
    """Whether ray.util.collective can make a BACKEND group here, as Ray itself decides
    (collective.gloo_available / nccl_available): Ray 2.48's GLOO needs pygloo, Ray 2.55's
    runs on torch.distributed; its NCCL needs cupy (ray/util/collective/collective.py)."""
    try:
        import ray
        from ray.util.collective import collective
    except Exception as exc:  # numpy missing, a broken install
        cause = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return CANNOT_RUN, (
            "OpenRLHF's weight sync (vllm.sync_with_ray) imports ray.util.collective, which "
            f"fails in this image: {cause}; fix: install what it needs (numpy) in the image"
        )
    version = getattr(ray, "__version__", "?")
    if backend == "gloo" and not collective.gloo_available():  # type: ignore[no-untyped-call]
        needs = "pygloo" if hasattr(collective, "_GLOO_AVAILABLE") else "torch.distributed"
        return CANNOT_RUN, (
            f"OpenRLHF's weight sync (vllm.sync_with_ray, backend gloo) cannot run in this "
            f"image: Ray {version}'s ray.util.collective has no GLOO backend ({needs} is not "
            f"importable; Ray raises 'GLOO is not available'); fix: install {needs} in the "
            "image, use a Ray whose gloo runs on torch.distributed (2.55), or sync without "
            "Ray (vllm.sync_with_ray false)"
        )
    if backend == "nccl" and not collective.nccl_available():  # type: ignore[no-untyped-call]
        return CANNOT_RUN, (
            f"OpenRLHF's weight sync (vllm.sync_with_ray, backend nccl) cannot run in this "
            f"image: Ray {version}'s ray.util.collective has no NCCL backend (it needs cupy, "
            "which ROCm images lack); fix: sync with vllm.sync_backend gloo or without Ray"
        )
    return "ray.util.collective", ""


def probe_class(ray: Any) -> Any:
    """The actor placed on every node for the self-test."""

    @ray.remote(num_cpus=0)
    class Probe:
        def warm(self) -> bool:
            """Import torch now, while the other nodes are still joining."""
            try:
                import torch  # noqa: F401
            except ImportError:
                return False
            return True

        def versions(self) -> dict[str, str]:
            return node_versions()

        def free_port(self) -> int:
            import socket

            with socket.socket() as sock:
                sock.bind(("", 0))
                return int(sock.getsockname()[1])

        def listen(self) -> tuple[str, int]:
            """An echo server on the address Ray (and the job) uses for this node."""
            import socket
            import threading

            from ray.util import get_node_ip_address

            address: str = get_node_ip_address()  # type: ignore[no-untyped-call]
            server = socket.socket()
            server.bind((address, 0))
            server.listen(64)

            def serve() -> None:
                while True:
                    conn, _ = server.accept()
                    with conn:
                        conn.sendall(conn.recv(1))

            threading.Thread(target=serve, daemon=True).start()
            return address, int(server.getsockname()[1])

        def ping(self, targets: dict[str, tuple[str, int]], timeout: float) -> dict[str, Any]:
            """TCP round trip (connect + one byte each way) to every other node, in ms."""
            import socket

            out: dict[str, Any] = {}
            for name, (host, port) in targets.items():
                start = time.perf_counter()
                try:
                    with socket.create_connection((host, port), timeout=timeout) as sock:
                        sock.sendall(b"x")
                        if sock.recv(1) != b"x":
                            raise OSError("no echo")
                    out[name] = (time.perf_counter() - start) * 1000
                except OSError as exc:
                    out[name] = f"{host}:{port}: {exc}"
            return out

        def sync_constructor(self, path: str, backend: str) -> tuple[str, str]:
            """The group constructor this rank can run for PATH (see WEIGHT_SYNC), or
            "torch" and why not."""
            return weight_sync_constructor(path, backend)

        def weight_sync(
            self,
            constructor: str,
            rank: int,
            world: int,
            master: str,
            port: int,
            numel: int,
            backend: str,
            logical: bool = False,
        ) -> dict[str, Any]:
            """The trainer -> rollout broadcast in a group made the way the framework makes it:
            ray.util.collective (OpenRLHF with vllm.sync_with_ray), OpenRLHF's own
            stateless_init_process_group (vLLM PyNccl), or a torch.distributed group."""
            if constructor == "torch":
                return self.collective(
                    "broadcast", rank, world, master, port, numel, backend, logical
                )
            import torch

            device = "cpu"
            if backend == "nccl":
                from ray import get_gpu_ids

                index = gpu_index(torch.cuda.device_count(), get_gpu_ids(), visibility_mask())
                torch.cuda.set_device(index)
                device = f"cuda:{index}"
            fill = 7.0 if rank == 0 else 0.0
            tensor = torch.full((numel,), fill, dtype=torch.float32, device=device)
            if constructor == "ray.util.collective":
                import ray.util.collective as collective
                import torch.distributed as dist

                # openrlhf/trainer/ray/ppo_actor.py and vllm_worker_wrap.py (0.9.10-0.11.2)
                collective.init_collective_group(
                    world_size=world,
                    rank=rank,
                    backend=backend,  # type: ignore[arg-type]  # a string, as OpenRLHF passes
                    group_name="openrlhf",
                )
                try:
                    collective.broadcast(tensor, 0, group_name="openrlhf")
                    ok = bool(torch.all(tensor == 7.0))
                    start = time.perf_counter()
                    collective.broadcast(tensor, 0, group_name="openrlhf")
                    seconds = time.perf_counter() - start
                finally:
                    collective.destroy_collective_group("openrlhf")
                    if dist.is_initialized():
                        dist.destroy_process_group()
                return {"ok": ok, "seconds": seconds}
            import importlib

            # openrlhf/utils/distributed_util.py stateless_init_process_group (0.9.10-0.11.2)
            make = importlib.import_module("openrlhf.utils.distributed_util")
            group = make.stateless_init_process_group(master, port, rank, world, device)
            stream = torch.cuda.current_stream()
            group.broadcast(tensor, src=0, stream=stream)
            torch.cuda.synchronize()
            ok = bool(torch.all(tensor == 7.0))
            start = time.perf_counter()
            group.broadcast(tensor, src=0, stream=stream)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            # vLLM's PyNcclCommunicator keeps its ncclComm until destroyed: free it here (its
            # NCCLLibrary binds ncclCommDestroy, vllm/distributed/device_communicators)
            if hasattr(group, "nccl") and hasattr(group, "comm"):
                group.nccl.ncclCommDestroy(group.comm)
            return {"ok": ok, "seconds": seconds}

        def collective(
            self,
            kind: str,
            rank: int,
            world: int,
            master: str,
            port: int,
            numel: int,
            backend: str,
            logical: bool = False,
        ) -> dict[str, Any]:
            """A fresh process group; an all-reduce of all ranks, or a broadcast from rank 0
            (the trainer -> rollout weight sync); timed after a warm-up, result checked."""
            try:
                import torch
                import torch.distributed as dist
            except ImportError:
                return {"skipped": "torch is not installed in the image"}
            if backend == "nccl":
                missing = no_device(torch)
                if missing and logical:
                    return {"skipped": f"{missing}; hardware.logical_gpus: the {kind} not run"}
                if missing:
                    raise RuntimeError(missing)
            dist.init_process_group(
                backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world
            )
            try:
                # nccl (RCCL on ROCm) needs device memory; the actor holds one GPU then.
                device = "cpu"
                if backend == "nccl":
                    from ray import get_gpu_ids

                    index = gpu_index(torch.cuda.device_count(), get_gpu_ids(), visibility_mask())
                    torch.cuda.set_device(index)
                    device = f"cuda:{index}"
                if kind == "allreduce":
                    tensor = torch.ones(numel, dtype=torch.float32, device=device)
                    dist.all_reduce(tensor)  # the correctness check below
                    ok = bool(torch.all(tensor == world))
                else:
                    fill = 7.0 if rank == 0 else 0.0
                    tensor = torch.full((numel,), fill, dtype=torch.float32, device=device)
                    dist.broadcast(tensor, src=0)
                    ok = bool(torch.all(tensor == 7.0))

                def once() -> None:
                    if kind == "allreduce":
                        dist.all_reduce(tensor)
                    else:
                        dist.broadcast(tensor, src=0)

                # as nccl-tests times it (README, Performance: 5 warm-up iterations, not timed,
                # then 20 timed; the average iteration): between barriers, device synchronised
                for _ in range(WARMUP_ITERS):
                    once()
                if device != "cpu":
                    torch.cuda.synchronize()
                dist.barrier()
                start = time.perf_counter()
                for _ in range(TIMED_ITERS):
                    once()
                if device != "cpu":
                    torch.cuda.synchronize()
                seconds = (time.perf_counter() - start) / TIMED_ITERS
                dist.barrier()
            finally:
                dist.destroy_process_group()
            return {"ok": ok, "seconds": seconds}

    return Probe


class Probes:
    """One Probe per node of the job, created as each node joins (so torch's import overlaps
    the wait for the others); the collectives' ranks come after the placement rehearsal."""

    def __init__(
        self, ray: Any, expected: list[str], backend: str, ranks_per_node: int = 1
    ) -> None:
        self.ray, self.expected, self.backend = ray, expected, backend
        self.ranks_per_node = ranks_per_node
        self.actors: dict[str, Any] = {}  # one per node, no GPU: tasks, versions, pairs
        self.ranks: dict[str, list[Any]] = {}  # every rank of a node: the collectives
        self.warming: dict[str, Any] = {}
        self._node_ids: dict[str, str] = {}
        self._cls: Any = None

    def _on(self, name: str, gpus: int) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id=self._node_ids[name], soft=False)
        return self._cls.options(num_gpus=gpus, scheduling_strategy=strategy).remote()

    def add_joined(self, nodes: list[dict[str, Any]]) -> None:
        if self._cls is None:
            self._cls = probe_class(self.ray)
        for node in nodes:
            name = str(node.get("NodeName"))
            if name in self.expected and name not in self.actors:
                self._node_ids[name] = str(node["NodeID"])
                self.actors[name] = self._on(name, 0)
                self.warming[name] = self.actors[name].warm.remote()

    def make_ranks(self) -> dict[str, Any]:
        """The collectives' ranks: the node probes for gloo; for nccl one actor per GPU holding
        it, as the workload's ranks do. They are made only now: GPU ranks made at join would
        hold every GPU while the placement rehearsal asks for them. Returns warm-up refs."""
        if self.backend != "nccl":
            self.ranks = {name: [actor] for name, actor in self.actors.items()}
            return {}
        refs = {}
        for name in self.actors:
            self.ranks[name] = [self._on(name, 1) for _ in range(self.ranks_per_node)]
            for index, rank in enumerate(self.ranks[name]):
                refs[f"{name}:{index}"] = rank.warm.remote()
        return refs


def _wait_all(ray: Any, refs: dict[str, Any], deadline: float) -> list[str]:
    """Names whose result did not arrive by the deadline (placement groups' ready())."""
    ready, _ = ray.wait(
        list(refs.values()), num_returns=len(refs), timeout=max(1.0, deadline - time.monotonic())
    )
    return [name for name, ref in refs.items() if ref not in ready]


def collect(
    ray: Any, refs: dict[str, Any], deadline: float, doing: str
) -> tuple[dict[str, Any], list[str]]:
    """Every result that arrives by the deadline, by name ("NODE" or "NODE rank R"), and one
    problem per name that did not: late, or raised (the exception's type and last line: the
    error itself, after Ray's traceback). No ray.get here can block past the deadline or raise
    out of the waiter."""
    if not refs:
        return {}, []
    late = set(_wait_all(ray, refs, deadline))
    results: dict[str, Any] = {}
    problems: list[str] = []
    for name, ref in refs.items():
        node, _, rank = name.partition(" ")
        who = f"node={node}" + (f" {rank}" if rank else "")
        if name in late:
            problems.append(f"{who} did not finish {doing} before the self-test's deadline")
            continue
        try:
            results[name] = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
        except Exception as exc:  # a rank's NCCL/gloo error, a dead actor, a timeout
            cause = (str(exc).strip().splitlines() or [""])[-1][:300]
            problems.append(f"{who} failed {doing}: {type(exc).__name__}: {cause}")
    return results, problems


def partners(names: list[str], extra: int = PAIR_PARTNERS) -> dict[str, list[str]]:
    """Whom each node tries to reach: every other node up to EXTRA + 2 nodes; beyond, the next
    node on a ring (every node is reached by one) and EXTRA others drawn by a shuffle seeded
    with the node names (the same job, the same pairs)."""
    if len(names) <= extra + 2:
        return {a: [b for b in names if b != a] for a in names}
    draw = random.Random(",".join(names))
    out = {}
    for i, name in enumerate(names):
        ring = names[(i + 1) % len(names)]
        out[name] = [ring, *draw.sample([b for b in names if b not in (name, ring)], extra)]
    return out


def check_pairs(
    ray: Any, probes: dict[str, Any], deadline: float
) -> tuple[dict[str, Any], list[str]]:
    """Each node reaches its partners on the address the job uses (a latency table)."""
    listeners, problems = collect(
        ray, {name: p.listen.remote() for name, p in probes.items()}, deadline, "opening a port"
    )
    if problems:
        return {}, problems
    chosen = partners(sorted(listeners))
    refs = {
        name: p.ping.remote({n: listeners[n] for n in chosen[name]}, 5.0)
        for name, p in probes.items()
    }
    pings, problems = collect(ray, refs, deadline, "its reachability test")
    table: dict[str, Any] = {}
    for name, rtts in pings.items():
        for other, rtt in rtts.items():
            table[f"{name}->{other}"] = rtt
            if isinstance(rtt, str):
                problems.append(f"node={name} cannot reach {other} at {rtt}")
    return table, problems


def rank_names(ranks: list[tuple[str, Any]]) -> list[str]:
    return [f"{node} rank {i}" for i, (node, _) in enumerate(ranks)]


def run_collective(
    ray: Any,
    ranks: list[tuple[str, Any]],
    kind: str,
    master: str,
    numel: int,
    backend: str,
    deadline: float,
    logical: bool = False,
) -> tuple[dict[str, Any] | None, list[str]]:
    """One collective over RANKS, (node, actor) pairs, the first being rank 0; the ranks'
    average iteration seconds (nccl-tests' -a 1). Failures name the node and the rank."""
    names = rank_names(ranks)
    ports, problems = collect(ray, {names[0]: ranks[0][1].free_port.remote()}, deadline, "a port")
    if problems:
        return None, problems
    port = ports[names[0]]
    refs = {
        names[rank]: actor.collective.remote(
            kind, rank, len(ranks), master, port, numel, backend, logical
        )
        for rank, (_, actor) in enumerate(ranks)
    }
    outcomes, problems = collect(ray, refs, deadline, f"the {kind}")
    if problems:
        return None, problems
    if any("skipped" in o for o in outcomes.values()):
        return {"skipped": next(iter(outcomes.values())).get("skipped")}, []
    bad = [name for name, o in outcomes.items() if not o["ok"]]
    if bad:
        return None, [f"node={n} got a wrong {kind} result" for n in bad]
    seconds = sum(o["seconds"] for o in outcomes.values()) / len(outcomes)
    return {"seconds": seconds}, []


def selftest(
    ray: Any,
    probes: Probes,
    head_ip: str,
    size_mb: int,
    deadline: float,
    placement: list[dict[str, Any]] | None = None,
    sync_mb: int = 0,
    sync_path: str = "torch",
    logical: bool = False,
) -> dict[str, Any]:
    """Rehearse the workload: a task and the versions on every node, the placement groups of
    its framework, every node pair's reachability, an all-reduce over all nodes and a weight-sync
    broadcast between two nodes. Returns the report; its "problems" fail the job."""
    expected, backend = probes.expected, probes.backend
    actors = {name: probes.actors[name] for name in expected if name in probes.actors}
    timings: dict[str, float] = {}
    report: dict[str, Any] = {"ok": True, "backend": backend, "seconds": timings}
    clock = [time.monotonic()]

    def lap(part: str) -> None:
        now = time.monotonic()
        timings[part] = round(now - clock[0], 3)
        clock[0] = now

    missing = [f"node={n} did not run a task" for n in expected if n not in actors]
    refs = {name: p.versions.remote() for name, p in actors.items()}
    versions, failed = collect(ray, refs, deadline, "a task")
    if missing or failed:
        return {"ok": False, "problems": missing + failed}
    report["tasks"] = len(refs)
    report["versions"] = versions
    problems = version_problems(versions)
    lap("tasks")
    if placement:
        report["placement"], found = check_placements(ray, placement, deadline)
        problems += found
        lap("placement")
    world = len(expected)
    unreachable: list[str] = []
    if world >= 2:
        report["pairs_ms"], unreachable = check_pairs(ray, actors, deadline)
        lap("pairs")
    # versions and placement problems are reported with the collectives' findings; nodes
    # that cannot reach each other would only make the collectives wait for the deadline.
    # One node runs them too when it has several ranks (one per GPU).
    if unreachable or len(expected) * probes.ranks_per_node < 2:
        problems += unreachable
        return {**report, "ok": not problems, "problems": problems}
    starting = probes.make_ranks()
    _warm, failed = collect(ray, probes.warming, deadline, "importing torch")
    if failed:
        return {**report, "ok": False, "problems": problems + failed}
    late = _wait_all(ray, starting, deadline) if starting else []
    stuck = sorted({key.split(":")[0] for key in late})
    if stuck:
        problems += [
            f"node={name} could not start its {probes.ranks_per_node} GPU ranks (Ray has "
            "fewer free GPUs there than the job asks for)"
            for name in stuck
        ]
        return {**report, "ok": False, "problems": problems}
    lap("torch-import")
    ranks = [(name, actor) for name in expected for actor in probes.ranks[name]]
    numel = size_mb * 1024 * 1024 // 4
    report["ranks"] = len(ranks)
    outcome, found = run_collective(
        ray, ranks, "allreduce", head_ip, numel, backend, deadline, logical
    )
    problems += found
    lap("allreduce")
    if outcome is not None and "skipped" in outcome:
        report["allreduce"] = "skipped: " + str(outcome["skipped"])
        return {**report, "problems": problems, "ok": not problems}
    if outcome is not None:
        algbw, busbw = busbw_allreduce(numel * 4, outcome["seconds"], len(ranks))
        report.update(allreduce_seconds=outcome["seconds"], allreduce_algbw_gbps=algbw,
                      allreduce_busbw_gbps=busbw)  # fmt: skip
    if not found and sync_mb and sync_path in ("cuda-ipc", "none"):
        report["weight_sync"] = {"skipped": WEIGHT_SYNC_SKIPPED[sync_path]}
    elif not found and sync_mb and world >= 2:
        # the trainer's rank 0 on the head, a rollout rank on another node: the weight-sync
        # group made as the framework makes it, timed, so a hang shows here, named
        sync_numel = sync_mb * 1024 * 1024 // 4
        pair = [expected[0], expected[-1]]
        sync_backend = "gloo" if sync_path == "ray-gloo" else backend
        first = probes.ranks[pair[0]][0]
        found_now, failed = collect(
            ray,
            {pair[0]: first.sync_constructor.remote(sync_path, sync_backend)},
            deadline,
            "choosing the weight-sync group",
        )
        ports, failed_port = collect(ray, {pair[0]: first.free_port.remote()}, deadline, "a port")
        problems += failed + failed_port
        if failed or failed_port:
            return {**report, "problems": problems, "ok": False}
        constructor, why_not = found_now[pair[0]]
        if constructor == CANNOT_RUN and logical:
            report["weight_sync"] = {"skipped": f"{why_not} (hardware.logical_gpus)"}
            return {**report, "problems": problems, "ok": not problems}
        if constructor == CANNOT_RUN:
            problems.append(f"node={pair[0]} {why_not}")
            return {**report, "problems": problems, "ok": False}
        if constructor == "torch":
            sync_backend = backend
        names = [f"{pair[0]} rank 0", f"{pair[1]} rank 1"]
        refs = {
            names[rank]: probes.ranks[name][0].weight_sync.remote(
                constructor, rank, 2, head_ip, ports[pair[0]], sync_numel, sync_backend, logical
            )
            for rank, name in enumerate(pair)
        }
        outcomes, failed = collect(ray, refs, deadline, "the weight-sync broadcast")
        problems += failed
        problems += [
            f"node={name} got a wrong weight-sync broadcast result"
            for name, o in outcomes.items()
            if "ok" in o and not o["ok"]
        ]
        lap("weight-sync")
        skipped = [o["skipped"] for o in outcomes.values() if "skipped" in o]
        if skipped:
            report["weight_sync"] = {"skipped": skipped[0]}
        elif not failed and all(o.get("ok") for o in outcomes.values()):
            seconds = max(o["seconds"] for o in outcomes.values())
            report["weight_sync"] = {
                "from": pair[0],
                "to": pair[1],
                "mb": sync_mb,
                "seconds": seconds,
                "gbps": sync_numel * 4 / seconds / 1e9,
                "backend": sync_backend,
                "constructor": constructor,
                "framework_path": sync_path,
                **({"not_rehearsed": why_not} if why_not else {}),
            }
    return {**report, "problems": problems, "ok": not problems}


def summary_lines(report: dict[str, Any], size_mb: int) -> list[str]:
    """The self-test as a few lines for the job log (the JSON goes to cluster.json)."""
    lines = []
    versions = report.get("versions") or {}
    if versions:
        first = next(iter(versions.values()))
        shown = ", ".join(f"{k} {v}" for k, v in first.items() if v != "absent")
        lines.append(f"selftest: {len(versions)} nodes ran tasks; versions identical: {shown}")
    for stage in report.get("placement") or []:
        if stage.get("placed") == stage.get("groups"):
            lines.append(
                f"selftest: placement: {stage['stage']}: {'; '.join(stage['shapes'])} placed in "
                f"{stage['seconds']:.1f}s"
                + (f", engines sliced by {stage['sliced_by']}" if "sliced_by" in stage else "")
            )
    pairs = {k: v for k, v in (report.get("pairs_ms") or {}).items() if not isinstance(v, str)}
    if pairs:
        slowest = max(pairs, key=pairs.__getitem__)
        lines.append(
            f"selftest: {len(pairs)} node pairs reachable, TCP round trip "
            f"{min(pairs.values()):.2f}-{pairs[slowest]:.2f} ms (slowest {slowest})"
        )
    if "allreduce_busbw_gbps" in report:
        lines.append(
            f"selftest: {report['backend']} all-reduce {size_mb} MB over {report['ranks']} "
            "ranks: algbw "
            f"{report['allreduce_algbw_gbps']:.3f} GB/s, "
            f"busbw {report['allreduce_busbw_gbps']:.3f} GB/s"
        )
    elif "allreduce" in report:
        lines.append(f"selftest: all-reduce {report['allreduce']}")
    sync = report.get("weight_sync")
    parts = ", ".join(f"{k} {v:.1f}s" for k, v in (report.get("seconds") or {}).items())
    if sync and "skipped" in sync:
        lines.append(f"selftest: weight-sync rehearsal skipped: {sync['skipped']}")
    elif sync:
        lines.append(
            f"selftest: weight-sync rehearsal: {sync['backend']} broadcast {sync['mb']} MB "
            f"{sync['from']} -> {sync['to']} in {sync['seconds']:.3f}s ({sync['gbps']:.3f} GB/s) "
            f"through {sync['constructor']}"
            + (
                f" (the framework's own group not run: {sync['not_rehearsed']})"
                if "not_rehearsed" in sync
                else ""
            )
        )
    if parts:
        lines.append(f"selftest: took {parts}")
    return lines


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
    global PHASE_TOKEN
    PHASE_TOKEN = sys.stdin.readline().strip() if args.phase_token == "-" else args.phase_token
    names = sys.stdin.read() if args.nodes == "-" else args.nodes
    expected = [n for n in names.replace("\n", ",").split(",") if n]

    import ray

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
