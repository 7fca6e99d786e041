"""Hostile-sized inputs: a 10 MB spec and a 1 GB log with a 1 MB line.

Goals (issue 8): validation of a 10 MB spec and doctor on a 1 GB log end in seconds, not
minutes, and never hang. Each figure is a median next to a reference measured in the same
run: `clusterctl validate` of the example spec, and `wc -l` over the same log (which, like
doctor, reads the whole file: doctor judges its head and tail and counts the lines between).
The regex engines are compared on one long repetitive line: Python's re against RE2.

    python -m benchmarks.inputs [--repeat 3] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import save_results
from benchmarks.startup import entry_point

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "verl-gsm8k-mi300x.yaml"
LONG_LINE = "NCCL error "


def timed(cmd: list[str], repeat: int) -> tuple[float, int]:
    """Median wall seconds of a command, and its exit status."""
    runs, status = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        status = subprocess.run(cmd, capture_output=True, check=False).returncode
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), status


def big_specs(directory: Path) -> tuple[Path, Path]:
    """A valid spec padded with 10 MB of comments, and one with 10 MB of env entries."""
    base = EXAMPLE.read_text()
    comments = directory / "comments-10mb.yaml"
    line = "# " + "x" * 98 + "\n"
    comments.write_text(base + line * (10 * 1024 * 1024 // len(line)))
    entries = directory / "env-10mb.yaml"
    data = base.replace(
        "  env:\n", "  env:\n" + "".join(f"    V{i}: '{'v' * 80}'\n" for i in range(110_000)), 1
    )
    entries.write_text(data)
    return comments, entries


def big_log(directory: Path) -> Path:
    """1 GiB of ordinary log lines with one 1 MB line of repeated 'NCCL error ' near the end
    and a clusterctl FAIL line after it."""
    path = directory / "big.log"
    block = "".join(
        f"(RayTrainWorker pid=1234) step {i}: loss=0.{i % 97:02d} lr=1e-6\n" for i in range(20_000)
    ).encode()
    target = 1024 * 1024 * 1024
    with path.open("wb") as handle:
        written = 0
        while written < target:
            handle.write(block)
            written += len(block)
        handle.write((LONG_LINE * (1024 * 1024 // len(LONG_LINE))).encode() + b"\n")
        handle.write(b"clusterctl: FAIL node=node7 phase=workload: the verl workload exited\n")
    return path


def engine_seconds(engine: str, length: int) -> float:
    """One search of the slowest-to-fail signature over a repetitive line, in a fresh process."""
    code = (
        f"import time, {engine} as r\n"
        "p = r.compile(r'NCCL error.*unhandled system error|ncclSystemError')\n"
        f"line = {LONG_LINE!r} * {length // len(LONG_LINE)}\n"
        "t = time.perf_counter(); p.search(line); print(time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default="/var/tmp", help="where the 1 GB log is written")
    args = parser.parse_args()
    cli = entry_point()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        comments, entries = big_specs(directory)
        log = big_log(directory)
        rows = {
            "validate example spec": timed([cli, "validate", str(EXAMPLE)], args.repeat),
            "validate 10 MB of comments": timed([cli, "validate", str(comments)], args.repeat),
            "validate 10 MB of env entries (refused)": timed(
                [cli, "validate", str(entries)], args.repeat
            ),
            "wc -l, 1 GB log": timed(["wc", "-l", str(log)], args.repeat),
            "doctor, 1 GB log with a 1 MB line": timed([cli, "doctor", str(log)], args.repeat),
        }
    engines = {
        f"{engine}, one 256 KB line": engine_seconds(engine, 256 * 1024) for engine in ("re", "re2")
    }
    engines["re2, one 1 MB line"] = engine_seconds("re2", 1024 * 1024)
    print("| measurement | median seconds | exit status |")
    print("|---|---|---|")
    for name, (seconds, status) in rows.items():
        print(f"| {name} | {seconds:.2f} | {status} |")
    print()
    print("| regex engine, signature `NCCL error.*unhandled system error` | seconds |")
    print("|---|---|")
    for name, seconds in engines.items():
        print(f"| {name} | {seconds:.3f} |")
    save_results("inputs", {"commands": rows, "engines": engines})


if __name__ == "__main__":
    main()
