"""How each phase of a job grows with its node count, measured on the real dev cluster.

One run renders the CPU example at N = 2, 4, 8, 16, 32 nodes (every node joined, self-test
on), runs each with sbatch, and reads:
  - each phase's seconds from the job's own timeline (timeline.json);
  - the batch side's CPU seconds (the batch shell's own and its waited-for children's, from
    /proc/PID/stat when it ends) and its peak resident memory (the batch shell's process tree,
    sampled every 0.2 s);
  - every node's CPU seconds in each phase (its container's cgroup, sampled every 0.5 s): the
    head's, the busiest worker's, and all nodes' together. On this host all nodes share 2
    cores, so a phase's seconds grow with everybody's work; on a real cluster a phase lasts
    about as long as its busiest node's and the head's work, which these separate;
then fits every phase to a + b f(N), f one of 1, N, N log N, N^2 (least squares, the lowest
Akaike score), and extrapolates to 128, 512 and 1024 nodes with the fitted constants.

    python -m benchmarks.scale [--nodes 2 4 8 16 32] [--plot docs/scale.png]

It brings the dev cluster to max(--nodes) nodes first (`clusterctl dev-cluster up --nodes`).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks import save_results
from clusterctl.jobs.records import read_timeline, summarize

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"
HEAD = "node1"  # the batch node hosts the head: SLURM gives the first node of node[1-N]
EXTRAPOLATE = (128, 512, 1024)
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

GROWTHS: dict[str, Callable[[float], float]] = {
    "constant": lambda n: 0.0,
    "N": lambda n: n,
    "N log N": lambda n: n * math.log2(n),
    "N^2": lambda n: n * n,
}


@dataclass(frozen=True)
class Fit:
    growth: str
    a: float
    b: float
    rss: float

    def at(self, nodes: float) -> float:
        return self.a + self.b * GROWTHS[self.growth](nodes)


def fit_one(growth: str, xs: list[float], ys: list[float]) -> Fit:
    """Least squares y = a + b f(x), b >= 0 (a phase does not get faster with more nodes:
    a negative slope is noise, fitted as a constant)."""
    f = [GROWTHS[growth](x) for x in xs]
    mean_f, mean_y = sum(f) / len(f), sum(ys) / len(ys)
    spread = sum((v - mean_f) ** 2 for v in f)
    covariance = sum((v - mean_f) * (y - mean_y) for v, y in zip(f, ys, strict=True))
    b = max(0.0, covariance / spread) if spread else 0.0
    a = mean_y - b * mean_f
    rss = sum((y - a - b * v) ** 2 for v, y in zip(f, ys, strict=True))
    return Fit(growth, a, b, rss)


def fit_growth(xs: list[float], ys: list[float]) -> Fit:
    """The growth that explains the points best for its parameters (Akaike's criterion,
    n log(RSS/n) + 2k: a slope must pay for itself); ties go to the slower growth."""
    n = len(xs)

    def score(fit: Fit) -> float:
        k = 1 if fit.growth == "constant" or fit.b == 0 else 2
        return n * math.log(max(fit.rss, 1e-9) / n) + 2 * k

    fits = [fit_one(g, xs, ys) for g in GROWTHS]
    return min(fits, key=lambda fit: (round(score(fit), 6), list(GROWTHS).index(fit.growth)))


# ---- one job --------------------------------------------------------------------------------


def batch_shell(job_id: str) -> int | None:
    """The pid of the job's batch shell (slurmstepd runs the script it spooled)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.endswith(f"job{int(job_id):05d}/slurm_script".encode()) for part in cmd):
            return int(proc.name)
    return None


def _stat_fields(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command name (state, ppid, ...; utime is [11])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int(_stat_fields(proc.name)[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class BatchSampler(threading.Thread):
    """The batch side's CPU seconds and peak resident memory, read from /proc."""

    def __init__(self, job_id: str) -> None:
        super().__init__(daemon=True)
        self.job_id, self.cpu, self.peak_rss, self.stop = job_id, 0.0, 0, threading.Event()

    def run(self) -> None:
        pid = None
        while not self.stop.is_set():
            pid = pid or batch_shell(self.job_id)
            if pid:
                try:
                    fields = _stat_fields(pid)
                    # utime stime cutime cstime: its own and its waited-for children's
                    self.cpu = sum(int(v) for v in fields[11:15]) / CLK_TCK
                except (OSError, IndexError, ValueError):
                    pid = None
                rss = 0
                for p in tree(pid) if pid else []:
                    with contextlib.suppress(OSError, IndexError, ValueError):
                        rss += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
                self.peak_rss = max(self.peak_rss, rss)
            time.sleep(0.2)


# A container's cgroup: v1 (its cpuacct controller), v2 with the cgroupfs driver, v2 with the
# systemd driver.
CGROUP_DIRS = (
    "/sys/fs/cgroup/cpuacct/docker/{}",
    "/sys/fs/cgroup/docker/{}",
    "/sys/fs/cgroup/system.slice/docker-{}.scope",
)


def _cgroup_dir(container_id: str) -> Path | None:
    dirs = (Path(d.format(container_id)) for d in CGROUP_DIRS)
    return next((d for d in dirs if d.is_dir()), None)


def _cgroup_cpu_seconds(container_id: str) -> float | None:
    """A container's CPU seconds so far, from its cgroup (v1 cpuacct.usage in ns, or v2
    cpu.stat's usage_usec)."""
    cgroup = _cgroup_dir(container_id)
    try:
        if cgroup is None:
            return None
        if (cgroup / "cpuacct.usage").exists():
            return int((cgroup / "cpuacct.usage").read_text()) * 1e-9
        text = (cgroup / "cpu.stat").read_text()
    except OSError:
        return None  # the container is gone
    fields = dict(line.split() for line in text.splitlines())
    return int(fields["usage_usec"]) * 1e-6


class NodeCpuSampler(threading.Thread):
    """Every node container's CPU seconds over time: [(epoch seconds, {node: CPU s})]."""

    def __init__(self, job_id: str) -> None:
        super().__init__(daemon=True)
        self.job_id, self.stop = job_id, threading.Event()
        self.samples: list[tuple[float, dict[str, float]]] = []
        # the head's processes: [(epoch seconds, {"PID KIND": CPU s})]
        self.head_samples: list[tuple[float, dict[str, float]]] = []

    def run(self) -> None:
        nodes: dict[str, str] = {}  # container id -> node
        prefix = f"cc-{self.job_id}-"
        while not self.stop.is_set():
            listed = subprocess.run(
                ["docker", "ps", "--no-trunc", "--filter", f"name=^{prefix}",
                 "--format", "{{.ID}} {{.Names}}"],
                capture_output=True, text=True,
            ).stdout.split("\n")  # fmt: skip
            for line in filter(None, listed):
                cid, name = line.split()
                nodes.setdefault(cid, name.removeprefix(prefix))
            now = time.time()
            usage = {}
            for cid, node in nodes.items():
                seconds = _cgroup_cpu_seconds(cid)
                if seconds is not None:
                    usage[node] = seconds
                if node == HEAD:
                    self.head_samples.append((now, _container_processes(cid)))
            self.samples.append((now, usage))
            time.sleep(0.5)


# The head container's processes, by what they are (their command line): which of them a
# phase's head CPU went to. Ray's own are named as `ray start --head` starts them.
HEAD_PROCESSES = (
    ("gcs_server", "Ray GCS"),
    ("raylet", "raylet"),
    ("dashboard/agent.py", "dashboard agent"),
    ("runtime_env/agent", "runtime-env agent"),
    ("dashboard/dashboard.py", "dashboard"),
    ("dashboard/modules", "dashboard"),
    ("ray-dashboard-", "dashboard"),  # the dashboard's module processes (forkserver)
    ("bin/ray start", "ray start (CLI)"),
    ("log_monitor", "log monitor"),
    ("monitor.py", "autoscaler monitor"),
    ("clusterctl-ray-wait", "clusterctl waiter"),  # CC_WAITER_BOOT, cluster.sh.j2
    ("ray::", "Ray workers (probes, ranks)"),
    ("default_worker.py", "Ray workers (probes, ranks)"),
)


# the head's processes whose CPU the table shows: clusterctl's own, and Ray's two that grow
SPLIT_SHOWN = ("clusterctl waiter", "Ray GCS", "dashboard")


def process_kind(cmdline: str) -> str:
    return next((kind for mark, kind in HEAD_PROCESSES if mark in cmdline), "other")


def _container_processes(container_id: str) -> dict[str, float]:
    """CPU seconds of each process now in a container (its cgroup), keyed "PID KIND"."""
    cgroup = _cgroup_dir(container_id)
    try:
        pids = (cgroup / "cgroup.procs").read_text().split() if cgroup else []
    except OSError:
        return {}  # the container is gone
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = _stat_fields(pid)
            out[f"{pid} {process_kind(cmd)}"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def phase_spent(
    samples: list[tuple[float, dict[str, float]]], timeline: list[dict[str, object]]
) -> dict[str, dict[str, float]]:
    """Per timed phase, the CPU seconds each sampled key spent within it (its usage carried
    forward from its last sample; 0 before it first appears)."""
    marks = [(str(e["phase"]), float(e["t"])) for e in timeline if "t" in e and "phase" in e]

    def usage_at(t: float) -> dict[str, float]:
        seen: dict[str, float] = {}
        for when, usage in samples:
            if when > t:
                break
            seen.update(usage)
        return seen

    out: dict[str, dict[str, float]] = {}
    for (phase, start), (_, end) in itertools.pairwise(marks):
        if phase in SHOWN:
            before, after = usage_at(start), usage_at(end)
            out[phase] = {key: after[key] - before.get(key, 0.0) for key in after}
    return out


def phase_cpu(
    samples: list[tuple[float, dict[str, float]]], timeline: list[dict[str, object]], head: str
) -> dict[str, dict[str, float]]:
    """Per timed phase: the head's, the busiest worker's and all nodes' CPU seconds within it."""
    out: dict[str, dict[str, float]] = {}
    for phase, spent in phase_spent(samples, timeline).items():
        workers = [v for node, v in spent.items() if node != head]
        out[phase] = {
            "head": spent.get(head, 0.0),
            "busiest worker": max(workers, default=0.0),
            "all nodes": sum(spent.values()),
        }
    return out


def head_process_cpu(
    samples: list[tuple[float, dict[str, float]]], timeline: list[dict[str, object]]
) -> dict[str, dict[str, float]]:
    """Per timed phase: the head's CPU seconds by kind of process (a process that ended keeps
    the CPU seconds it was last seen with)."""
    out: dict[str, dict[str, float]] = {}
    for phase, spent in phase_spent(samples, timeline).items():
        kinds: dict[str, float] = {}
        for key, seconds in spent.items():
            kind = key.split(" ", 1)[1]
            kinds[kind] = kinds.get(kind, 0.0) + seconds
        out[phase] = dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
    return out


def job_ended(job_id: str) -> bool:
    """SLURM no longer lists the job. An squeue that fails (slurmctld slow to answer while
    every node starts Ray on the same cores) says nothing: the job is asked about again."""
    listed = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        return "Invalid job id" in listed.stderr
    return not listed.stdout.strip()


def run_job(nodes: int, work: Path, sets: list[str]) -> dict[str, object]:
    bundle = work / "bundle"
    overrides = [arg for value in [f"slurm.nodes={nodes}", *sets] for arg in ("--set", value)]
    subprocess.run(
        ["clusterctl", "render", str(EXAMPLE), "-o", str(bundle), *overrides],
        check=True,
        capture_output=True,
    )
    script = bundle / "job.sbatch"
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], cwd=work, capture_output=True, text=True, check=True
    )
    job_id = submitted.stdout.strip().split(";")[0]
    sampler, node_cpu = BatchSampler(job_id), NodeCpuSampler(job_id)
    sampler.start()
    node_cpu.start()
    while not job_ended(job_id):
        time.sleep(1)
    for thread in (sampler, node_cpu):
        thread.stop.set()
        thread.join()
    (log_dir,) = sorted((work / "clusterctl-logs").glob("*"))[-1:]
    timeline = read_timeline(log_dir)
    record = summarize(log_dir, timeline)
    if record.status != 0:  # the temporary directory goes: keep what says why
        kept = Path(os.environ.get("CLUSTERCTL_BENCH_RESULTS", "/var/tmp/clusterctl-bench"))
        shutil.copytree(log_dir, kept / f"failed-{log_dir.name}", dirs_exist_ok=True)
        for out in work.glob("clusterctl-*.out"):
            shutil.copy(out, kept / f"failed-{log_dir.name}")
    return {
        "nodes": nodes,
        "status": record.status,
        "cause": record.cause,
        "phases": {row.phase: row.seconds for row in record.rows if row.seconds is not None},
        "node_cpu_s": phase_cpu(node_cpu.samples, timeline, HEAD),
        "head_process_cpu_s": head_process_cpu(node_cpu.head_samples, timeline),
        "selftest_parts_s": selftest_parts(log_dir),
        "batch_cpu_s": sampler.cpu,
        "batch_peak_rss_mib": sampler.peak_rss / 2**20,
        "script_bytes": script.stat().st_size,
        "containers_left": len(
            subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"label=clusterctl.job={job_id}"],
                capture_output=True,
                text=True,
            ).stdout.split()
        ),
    }


def selftest_parts(log_dir: Path) -> dict[str, float]:
    """The self-test's own laps (tasks, pairs, torch-import, allreduce, ...) from the report
    the head wrote to cluster.json; {} when the job did not get that far."""
    try:
        report = json.loads((log_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    return dict(report.get("selftest", report).get("seconds") or {})


# ---- report ---------------------------------------------------------------------------------


# The timeline marks where each phase starts; these are the ones that take time (the others,
# marks such as ray-joined or workload-done, last milliseconds). ray-head lasts from the head's
# start until every node has joined.
SHOWN = {
    "preflight": "preflight (gather, judge, image)",
    "containers": "containers",
    "ray-head": "Ray head + every node joined",
    "selftest": "self-test",
    "workload": "workload",
    "cleanup": "cleanup",
}


def series(runs: list[dict[str, object]]) -> dict[str, tuple[list[float], list[float]]]:
    """Every measured quantity by name: (nodes, values)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for run in runs:
        n = float(run["nodes"])  # type: ignore[arg-type]
        phases: dict[str, float] = run["phases"]  # type: ignore[assignment]
        values = {label: phases.get(name, 0.0) for name, label in SHOWN.items()}
        values["start to workload"] = sum(
            v for k, v in phases.items() if k not in ("workload", "workload-done", "cleanup")
        )
        node_cpu: dict[str, dict[str, float]] = run.get("node_cpu_s", {})  # type: ignore[assignment]
        by_process: dict[str, dict[str, float]] = run.get("head_process_cpu_s", {})  # type: ignore[assignment]
        for phase in ("ray-head", "selftest"):
            for who, seconds in node_cpu.get(phase, {}).items():
                values[f"{SHOWN[phase]}: CPU s, {who}"] = seconds
            for kind in SPLIT_SHOWN:
                values[f"{SHOWN[phase]}: head CPU s, {kind}"] = by_process.get(phase, {}).get(
                    kind, 0.0
                )
        parts: dict[str, float] = run.get("selftest_parts_s", {})  # type: ignore[assignment]
        for part, seconds in parts.items():
            values[f"self-test: {part}"] = seconds
        values["batch CPU s"] = run["batch_cpu_s"]
        values["batch peak MiB"] = run["batch_peak_rss_mib"]
        values["script bytes"] = run["script_bytes"]
        for name, value in values.items():
            xs, ys = out.setdefault(name, ([], []))
            xs.append(n)
            ys.append(float(value))
    return out


def succeeded(runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """The runs whose job succeeded: a failed job's phases stop early, and its zeros are no
    measurement of a phase's growth."""
    return [run for run in runs if run["status"] == 0]


def failures(runs: list[dict[str, object]]) -> str:
    return "\n".join(
        f"N={run['nodes']}: failed (status {run['status']}): {run['cause']}"
        for run in runs
        if run["status"] != 0
    )


def table(runs: list[dict[str, object]]) -> str:
    """The successful runs' table (the failed ones are listed by `failures`)."""
    runs = succeeded(runs)
    data = series(runs)
    sizes = [int(r["nodes"]) for r in runs]  # type: ignore[call-overload]
    head = " | ".join(f"N={n}" for n in sizes) + " | " + " | ".join(f"~N={n}" for n in EXTRAPOLATE)
    lines = [f"| quantity | {head} | growth |", "|---" * (len(sizes) + len(EXTRAPOLATE) + 2) + "|"]
    for name, (xs, ys) in data.items():
        if len(xs) < len(sizes):
            continue  # a phase some runs did not reach
        fit = fit_growth(xs, ys)
        measured = " | ".join(f"{y:.4g}" for y in ys)
        guessed = " | ".join(f"{fit.at(n):.4g}" for n in EXTRAPOLATE)
        slope = f"{fit.b:.3g} x {fit.growth}" if fit.growth != "constant" and fit.b else "constant"
        lines.append(f"| {name} | {measured} | {guessed} | {fit.a:.3g} + {slope} |")
    return "\n".join(lines)


def plot(runs: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = succeeded(runs)
    data = series(runs)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    grid = [2 ** (i / 4) for i in range(4, 41)]  # 2 .. 1024
    for name, (xs, ys) in data.items():
        # the nodes' CPU seconds are in the table: the plot keeps to the phases' seconds
        if name in ("batch peak MiB", "script bytes") or "CPU s," in name or len(xs) < len(runs):
            continue
        fit = fit_growth(xs, ys)
        (line,) = ax.plot(xs, ys, "o", label=f"{name} ({fit.growth})")
        ax.plot(grid, [max(fit.at(n), 0.005) for n in grid], "--", color=line.get_color(), lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes (measured to the dots; dashed: fitted growth, extrapolated)")
    ax.set_ylabel("seconds")
    ax.set_title("clusterctl's phases by node count, CPU example on the dev cluster (2 cores)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--plot", type=Path, default=None, help="write the PNG plot here")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a spec value in every job (the dev host's 32 nodes need "
        "ray.join_deadline=900: all their start-ups share 2 cores)",
    )
    parser.add_argument(
        "--from-results", type=Path, help="print the table (and plot) of a saved run's JSON"
    )
    args = parser.parse_args()
    if args.from_results:
        runs = json.loads(args.from_results.read_text())
        print(table(runs))
        print(failures(runs))
        if args.plot:
            plot(runs, args.plot)
        return
    subprocess.run(
        [
            "clusterctl",
            "dev-cluster",
            "up",
            "--nodes",
            str(max(args.nodes)),
            "--gpus-per-node",
            "8",
        ],
        check=True,
    )
    runs = []
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory() as tmp:
            run = run_job(nodes, Path(tmp), args.set)
        runs.append(run)
        print(
            f"{nodes} nodes: status {run['status']}, {run['phases']}, batch CPU "
            f"{run['batch_cpu_s']:.1f}s, peak {run['batch_peak_rss_mib']:.0f} MiB, "
            f"{run['containers_left']} containers left {run['cause'] or ''}",
            flush=True,
        )
    print()
    print(table(runs))
    print(failures(runs))
    save_results("scale", runs)
    if args.plot:
        plot(runs, args.plot)


if __name__ == "__main__":
    main()
