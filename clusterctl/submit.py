"""Submit a rendered bundle: the same files a dry run shows, handed to sbatch."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.render.bundle import SCRIPT


def sbatch_command(bundle_dir: Path, wait: bool) -> list[str]:
    """The sbatch call; the script's path is absolute, so it can never read as an option."""
    script = (bundle_dir / SCRIPT).absolute()
    return ["sbatch", "--parsable", *(["--wait"] if wait else []), str(script)]


def submit_bundle(bundle_dir: Path, wait: bool, say: Callable[[str], None]) -> int:
    """Run sbatch on the bundle's script; returns sbatch's exit status (the job's with wait)."""
    if shutil.which("sbatch") is None:
        raise UsageError("sbatch not found: submit from a SLURM login node (or use render)")
    proc = subprocess.Popen(sbatch_command(bundle_dir, wait), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    job_id = proc.stdout.readline().strip().split(";")[0]  # --parsable: "id[;cluster]"
    if job_id:
        say(f"submitted job {job_id} ({bundle_dir / SCRIPT})")
    status = proc.wait()
    if wait and job_id:
        say(f"job {job_id} {'succeeded' if status == 0 else f'failed with status {status}'}")
    return status
