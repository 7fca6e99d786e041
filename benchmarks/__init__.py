"""Benchmarks: figures as ratios within one run on this noisy machine (see the README)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_results(name: str, data: object) -> None:
    """Keep the raw figures of a run beside the tables printed for the README."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
