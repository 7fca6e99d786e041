"""CLI start-up and render speed.

Goals (issue 2): `clusterctl --help` and `clusterctl validate` on an example under 0.3 s;
rendering a 1024-node spec under 0.5 s. Measured in one run next to the bare interpreter
start (`python3 -c pass`), so the ratio says what clusterctl itself adds on a noisy machine.

    python -m benchmarks.startup [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import save_results

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "verl-gsm8k-mi300x.yaml"


def entry_point() -> str:
    """The installed console script itself, not a version manager's shim in front of it."""
    beside = Path(sys.executable).parent / "clusterctl"
    return str(beside) if beside.exists() else "clusterctl"


def timed(cmd: list[str], repeat: int) -> float:
    """Median wall time of a command, in seconds."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def render_1024(repeat: int) -> float:
    code = (
        "import time, sys\n"
        "from clusterctl.spec import load_spec\n"
        "from clusterctl.lint.engine import lint_or_raise\n"
        "from clusterctl.render import render_bundle\n"
        "t = time.perf_counter()\n"
        f"loaded = load_spec({str(EXAMPLE)!r}, ['slurm.nodes=1024'])\n"
        "lint_or_raise(loaded)\n"
        "render_bundle(loaded.spec)\n"
        "print(time.perf_counter() - t)\n"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(repeat)
    ]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    python = timed([sys.executable, "-c", "pass"], args.repeat)
    results = {
        "python -c pass": python,
        "clusterctl --help": timed([entry_point(), "--help"], args.repeat),
        "clusterctl validate (example)": timed(
            [entry_point(), "validate", str(EXAMPLE)], args.repeat
        ),
        "render 1024 nodes (in process)": render_1024(args.repeat),
    }
    print("| measurement | median seconds | x python start |")
    print("|---|---|---|")
    for name, seconds in results.items():
        print(f"| {name} | {seconds:.3f} | {seconds / python:.1f} |")
    save_results("startup", results)


if __name__ == "__main__":
    main()
