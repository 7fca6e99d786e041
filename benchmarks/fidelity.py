"""What the frameworks' own start-up checks cost `clusterctl validate`.

Each example is validated with its framework's checks off (the release is not found) and on
(the pinned OpenRLHF on CLUSTERCTL_FRAMEWORK_PATH; verl 0.9.1 in CLUSTERCTL_VERL_PYTHON, with
a small local model config so the model-dependent checks run too), interleaved in one run.

    python -m benchmarks.fidelity [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import save_results
from benchmarks.startup import entry_point

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "clusterctl" / "frameworks"
MODEL = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_attention_heads": 14,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
}


def seconds(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:")]
    return time.perf_counter() - start, notes[0] if notes else proc.stderr.strip()[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    verl_python = subprocess.run(
        ["bash", str(ROOT / "scripts" / "framework-judges.sh")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    off = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERCTL_")}
    with tempfile.TemporaryDirectory() as model:
        (Path(model) / "config.json").write_text(json.dumps(MODEL))
        local = [
            "--set",
            f"workload.overrides.actor_rollout_ref.model.path={model}",
            "--set",
            f"workload.overrides.critic.model.path={model}",
        ]
        cases = {
            "verl-gsm8k-mi300x": (local, {"CLUSTERCTL_VERL_PYTHON": verl_python}),
            "openrlhf-70b-h800": (
                [],
                {"CLUSTERCTL_FRAMEWORK_PATH": str(CACHE / "openrlhf-0.11.2")},
            ),
            "openrlhf-mi300x-single-node": (
                [],
                {"CLUSTERCTL_FRAMEWORK_PATH": str(CACHE / "openrlhf-0.9.10")},
            ),
        }
        rows = {}
        for example, (extra, on_env) in cases.items():
            cmd = [entry_point(), "validate", str(ROOT / "examples" / f"{example}.yaml"), *extra]
            runs: dict[str, list[float]] = {"off": [], "on": []}
            notes = {}
            for _ in range(args.repeat):
                for label, env in (("off", off), ("on", {**off, **on_env})):
                    took, note = seconds(cmd, env)
                    runs[label].append(took)
                    notes[label] = note
            off_s, on_s = statistics.median(runs["off"]), statistics.median(runs["on"])
            rows[example] = {"off": off_s, "on": on_s, "notes": notes}
    print("| example | checks off (s) | checks on (s) | on / off | what ran (on) |")
    print("|---|---|---|---|---|")
    for example, row in rows.items():
        note = str(row["notes"]["on"]).removeprefix("note: ")  # type: ignore[index]
        print(
            f"| {example} | {row['off']:.2f} | {row['on']:.2f} | "
            f"{row['on'] / row['off']:.1f} | {note[:90]} |"
        )
    save_results("fidelity", rows)


if __name__ == "__main__":
    main()
