"""Submit a rendered bundle: the same files a dry run shows, handed to sbatch."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.render.bundle import SCRIPT

POLL_SECONDS = 0.5  # sbatch --wait backs off to polls tens of seconds apart


def sbatch_command(bundle_dir: Path) -> list[str]:
    """The sbatch call; the script's path is absolute, so it can never read as an option."""
    script = (bundle_dir / SCRIPT).absolute()
    return ["sbatch", "--parsable", str(script)]


def job_exit_status(scontrol_job: str) -> int | None:
    """The job's exit status from `scontrol show job -o`: its code, else 128 + the signal
    that ended it; None when SLURM no longer reports it."""
    found = re.search(r"\bExitCode=(\d+):(\d+)", scontrol_job)
    if found is None:
        return None
    code, signal = int(found.group(1)), int(found.group(2))
    return code or (128 + signal if signal else 0)


def wait_for_job(job_id: str, poll: float = POLL_SECONDS) -> int:
    """Poll squeue until the job has left the queue; its exit status."""
    while True:
        queued = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        if queued.returncode == 0 and not queued.stdout.strip():
            break
        if queued.returncode != 0 and "Invalid job id" in queued.stderr:
            break
        time.sleep(poll)
    info = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True)
    status = job_exit_status(info.stdout)
    if status is None:
        raise UsageError(f"job {job_id} ended, but SLURM no longer reports its exit status")
    return status


def submit_bundle(bundle_dir: Path, wait: bool, say: Callable[[str], None]) -> int:
    """Run sbatch on the bundle's script; with wait, follow the job and return its status."""
    if shutil.which("sbatch") is None:
        raise UsageError("sbatch not found: submit from a SLURM login node (or use render)")
    proc = subprocess.run(sbatch_command(bundle_dir), capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"sbatch refused the job: {proc.stderr.strip() or proc.returncode}")
    job_id = proc.stdout.strip().split(";")[0]  # --parsable: "id[;cluster]"
    say(f"submitted job {job_id} ({bundle_dir / SCRIPT})")
    if not wait:
        return 0
    status = wait_for_job(job_id)
    say(f"job {job_id} {'succeeded' if status == 0 else f'failed with status {status}'}")
    return status
