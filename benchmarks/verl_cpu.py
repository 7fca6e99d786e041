"""verl's own GRPO trainer on the dev cluster (examples/verl-grpo-cpu-dev-cluster.yaml): the
dev verl image's build time, then per node count, in one run, seconds from job start to the
first trainer step and seconds per step (verl's own timing_s/step, median over the steps
after the first).

    python -m benchmarks.verl_cpu [--nodes 1 2 4] [--steps 8]    (needs `dev-cluster up`)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import save_results
from clusterctl.devcluster import verl_image
from clusterctl.jobs.slurm import queued

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "verl-grpo-cpu-dev-cluster.yaml"
STEP_TIME = re.compile(r"step:(\d+) - .*?timing_s/step:([0-9.]+)")


def build_seconds() -> float:
    """The dev verl image built again from the cached wheels, its old layers removed."""
    subprocess.run(["docker", "image", "rm", "-f", verl_image.VERL_IMAGE], capture_output=True)
    started = time.monotonic()
    verl_image.build(lambda _line: None)
    return time.monotonic() - started


def run_job(workdir: Path, assets: Path, nodes: int, steps: int) -> dict[str, object]:
    # batch sizes divisible by every worker count measured (1, 2, 4)
    sets = [
        f"slurm.nodes={nodes}",
        f"container.mounts=[{{source: {assets}, target: /verl}}]",
        f"resume.checkpoint_dir=/verl/checkpoints/bench-{nodes}",  # fresh: nothing to resume
        "resume.save_every=100000",
        "workload.overrides.data.train_batch_size=8",
        "workload.overrides.actor_rollout_ref.actor.ppo_mini_batch_size=8",
        f"workload.overrides.trainer.total_training_steps={steps}",
    ]
    args = ["clusterctl", "render", str(EXAMPLE), "-o", str(workdir / "bundle")]
    for assignment in sets:
        args += ["--set", assignment]
    rendered = subprocess.run(args, capture_output=True, text=True)
    if rendered.returncode != 0:
        raise SystemExit(rendered.stderr)
    submitted = time.time()
    job_id = subprocess.run(
        ["sbatch", "--parsable", str(workdir / "bundle" / "job.sbatch")],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the workload log has no clock: the first step line is stamped as it appears
    first_step_seen = None
    while queued(job_id):
        log = next(iter((workdir / "clusterctl-logs").glob("*/workload.log")), None)
        if first_step_seen is None and log and "step:1 - " in log.read_text(errors="replace"):
            first_step_seen = time.time()
        time.sleep(0.2)
    (log_dir,) = (workdir / "clusterctl-logs").glob("*")
    timeline = json.loads((log_dir / "timeline.json").read_text())
    start = float(timeline[0]["t"])
    end = timeline[-1]
    step_times = [float(t) for _s, t in STEP_TIME.findall((log_dir / "workload.log").read_text())]
    return {
        "nodes": nodes,
        "status": end.get("status"),
        "steps": len(step_times),
        "submit_to_start": round(start - submitted, 1),
        "start_to_first_step": round(first_step_seen - start, 1) if first_step_seen else None,
        "seconds_per_step": round(statistics.median(step_times[1:]), 3)
        if len(step_times) > 1
        else None,
        "job_seconds": round(float(end["t"]) - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    results: dict[str, object] = {"image_build_seconds": build_seconds(), "runs": []}
    assets = Path(tempfile.mkdtemp(prefix="verl-bench-", dir="/var/tmp"))
    verl_image.make_assets(assets, lambda _line: None)
    runs: list[dict[str, object]] = []
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory(prefix="verl-bench-") as tmp:
            runs.append(run_job(Path(tmp), assets, nodes, args.steps))
    results["runs"] = runs
    print(f"dev verl image build (wheels cached): {results['image_build_seconds']:.1f} s")
    print("| nodes | status | steps | start to first step (s) | s per step (median) | job (s) |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['nodes']} | {r['status']} | {r['steps']} | {r['start_to_first_step']} "
            f"| {r['seconds_per_step']} | {r['job_seconds']} |"
        )
    save_results("verl_cpu", results)


if __name__ == "__main__":
    main()
