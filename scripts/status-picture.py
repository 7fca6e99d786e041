"""Make docs/status.svg, the README's picture of `clusterctl status`: a real job on the dev
cluster (`clusterctl dev-cluster up`) whose workload fails, and the real command's colored
output drawn by rich. Run from the repository root: python3 scripts/status-picture.py"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="status-picture-"))
    submitted = subprocess.run(
        ["clusterctl", "submit", str(ROOT / "examples" / "cpu-dev-cluster.yaml"), "--wait",
         "-o", str(work / "bundle"), "--set", "slurm.job_name=ppo-demo",
         "--set", "workload.command=echo 'NCCL error in ProcessGroupNCCL.cpp, unhandled system "
         "error'; exit 3"],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = re.search(r"^submitted job (\d+)", submitted.stdout, re.M)
    if not found:
        print(submitted.stdout + submitted.stderr, file=sys.stderr)
        return 1
    shown = subprocess.run(
        ["clusterctl", "status", found.group(1)],
        cwd=work, capture_output=True, text=True, check=False,
        env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "110"},
    )  # fmt: skip
    console = Console(record=True, width=110, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(Text("$ clusterctl status " + found.group(1), style="bold"))
    console.print(Text.from_ansi(shown.stdout.rstrip()))
    console.save_svg(str(ROOT / "docs" / "status.svg"), title="clusterctl status")
    print(shown.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
