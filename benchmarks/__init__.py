"""Benchmarks: figures as ratios within one run on this noisy machine (docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

# The committed raw figures behind docs/benchmarks.md's tables live in benchmarks/results; a run
# writes elsewhere unless asked, so measuring never changes tracked files.
COMMITTED = Path(__file__).resolve().parent / "results"


def save_results(name: str, data: object) -> None:
    """Keep the raw figures of a run beside the tables printed for docs/benchmarks.md:
    $CLUSTERCTL_BENCH_RESULTS (benchmarks/results to update the committed ones), else
    /var/tmp/clusterctl-bench."""
    directory = Path(os.environ.get("CLUSTERCTL_BENCH_RESULTS", "/var/tmp/clusterctl-bench"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"raw figures: {path}")
