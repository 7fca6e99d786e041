"""Seconds from job start to workload start on the real dev cluster, and how many nodes had
joined Ray when the workload started.

Variants, all real sbatch jobs on the same cluster, same image, same workload, in one run:
  baseline   the verl docs pattern: containers, head, `sleep 10`, workers one at a time with
             `sleep 5`, then the workload
  floor      all containers at once, head, all workers at once, poll until N nodes are alive
  clusterctl the rendered job.sbatch with the self-test off (what the floor also does), and
             with the self-test on (the default: a task on every node plus an all-reduce)

    python -m benchmarks.bringup [--nodes 2 4] [--repeat 2]    (needs `dev-cluster up`)
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
from clusterctl.devcluster.cluster import DEV_IMAGE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu-dev-cluster.yaml"

# The same workload everywhere: note the time it starts, then count the alive Ray nodes.
WORKLOAD = (
    "import time; t = time.time(); import ray; ray.init(address='auto'); "
    "n = sum(1 for x in ray.nodes() if x['Alive']); print('BENCH_WORKLOAD', t, n, flush=True)"
)

COMMON = r"""#!/bin/bash
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --output={out}
echo "BENCH_START $(date +%s.%N)"
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head=${{nodes[0]}}
addr() {{ scontrol show node -o "$1" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2; }}
head_ip=$(addr "$head")
name=bench-$SLURM_JOB_ID
cleanup() {{
  srun --overlap -N{nodes} -n{nodes} --ntasks-per-node=1 bash -c \
    'docker rm -f '"$name"'-$SLURMD_NODENAME' > /dev/null 2>&1
}}
trap cleanup EXIT
srun -N{nodes} -n{nodes} --ntasks-per-node=1 bash -c \
  'docker run -d --init --network host --ipc host --name '"$name"'-$SLURMD_NODENAME \
   --label clusterctl.bench='"$SLURM_JOB_ID"' {image} sleep infinity > /dev/null'
"""

BASELINE = (
    COMMON
    + r"""
srun --overlap -N1 -n1 -w "$head" docker exec "$name-$head" ray start --head \
  --node-ip-address="$head_ip" --port=6379 --num-cpus=1 --disable-usage-stats --block \
  > /dev/null 2>&1 &
sleep 10
for node in "${{nodes[@]:1}}"; do
  srun --overlap -N1 -n1 -w "$node" docker exec "$name-$node" ray start \
    --address="$head_ip:6379" --node-ip-address="$(addr "$node")" --num-cpus=1 --block \
    > /dev/null 2>&1 &
  sleep 5
done
docker exec -e RAY_ADDRESS="$head_ip:6379" "$name-$head" python3 -c "{workload}"
"""
)

FLOOR = (
    COMMON
    + r"""
docker exec "$name-$head" ray start --head --node-ip-address="$head_ip" --port=6379 \
  --num-cpus=1 --disable-usage-stats > /dev/null 2>&1
srun --overlap -N$(({nodes} - 1)) -n$(({nodes} - 1)) --ntasks-per-node=1 -x "$head" bash -c \
  'ip=$(scontrol show node -o $SLURMD_NODENAME | grep -o "NodeAddr=[^ ]*" | cut -d= -f2)
   docker exec '"$name"'-$SLURMD_NODENAME ray start --address='"$head_ip"':6379 \
     --node-ip-address=$ip --num-cpus=1 > /dev/null 2>&1'
docker exec "$name-$head" python3 -c "import ray, time
ray.init(address='$head_ip:6379', logging_level='ERROR')
while sum(1 for x in ray.nodes() if x['Alive']) < {nodes}:
    time.sleep(0.25)"
docker exec -e RAY_ADDRESS="$head_ip:6379" "$name-$head" python3 -c "{workload}"
"""
)


def run_job(script: Path, workdir: Path) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", "--wait", str(script)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    job_id = out.stdout.strip().split(";")[0]
    logs = list(workdir.glob(f"*{job_id}*.out"))
    return logs[0].read_text() if logs else out.stderr


def measure_raw(template: str, nodes: int, workdir: Path) -> tuple[float, int]:
    script = workdir / "bench.sbatch"
    out = workdir / "bench-%j.out"
    script.write_text(
        template.format(
            nodes=nodes, out=out, image=DEV_IMAGE, workload=WORKLOAD.replace('"', '\\"')
        )
    )
    log = run_job(script, workdir)
    start = float(re.search(r"BENCH_START (\S+)", log).group(1))  # type: ignore[union-attr]
    t, joined = re.search(r"BENCH_WORKLOAD (\S+) (\d+)", log).groups()  # type: ignore[union-attr]
    return float(t) - start, int(joined)


def measure_clusterctl(nodes: int, selftest: bool, workdir: Path) -> tuple[float, int]:
    bundle = workdir / "bundle"
    subprocess.run(
        [
            "clusterctl",
            "render",
            str(EXAMPLE),
            "-o",
            str(bundle),
            "--set",
            f"slurm.nodes={nodes}",
            "--set",
            f"selftest.enabled={selftest}",
            "--set",
            f"workload.command={json.dumps(['python3', '-c', WORKLOAD])}",
        ],
        check=True,
        capture_output=True,
    )
    log = run_job(bundle / "job.sbatch", workdir)
    (log_dir,) = sorted((workdir / "clusterctl-logs").glob("*"))[-1:]
    timeline = json.loads((log_dir / "timeline.json").read_text())
    start = timeline[0]["t"]
    match = re.search(r"BENCH_WORKLOAD (\S+) (\d+)", log)
    assert match, log
    return float(match.group(1)) - start, int(match.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["baseline", "floor", "clusterctl", "clusterctl+selftest"],
        choices=["baseline", "floor", "clusterctl", "clusterctl+selftest"],
    )
    args = parser.parse_args()
    results: dict[str, dict[str, list[list[float]]]] = {}
    for nodes in args.nodes:
        runs: dict[str, list[list[float]]] = {}
        for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
            for variant in args.variants:
                with tempfile.TemporaryDirectory() as tmp:
                    work = Path(tmp)
                    if variant == "baseline":
                        seconds, joined = measure_raw(BASELINE, nodes, work)
                    elif variant == "floor":
                        seconds, joined = measure_raw(FLOOR, nodes, work)
                    else:
                        seconds, joined = measure_clusterctl(nodes, variant.endswith("test"), work)
                runs.setdefault(variant, []).append([seconds, joined])
                print(
                    f"{nodes} nodes {variant}: {seconds:.1f}s, {joined}/{nodes} joined", flush=True
                )
                time.sleep(1)
        results[str(nodes)] = runs
    print()
    reference = "floor" if "floor" in args.variants else args.variants[0]
    print(
        f"| nodes | variant | seconds to workload (median) | x {reference} "
        "| nodes joined at start |"
    )
    print("|---|---|---|---|---|")
    for nodes, runs in results.items():
        floor = statistics.median(r[0] for r in runs[reference])
        for variant, samples in runs.items():
            median = statistics.median(r[0] for r in samples)
            joined = ", ".join(f"{int(r[1])}/{nodes}" for r in samples)
            print(f"| {nodes} | {variant} | {median:.1f} | {median / floor:.2f} | {joined} |")
    save_results("bringup", results)


if __name__ == "__main__":
    main()
