"""Submit a rendered bundle: the same files a dry run shows, handed to sbatch."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.render.bundle import SCRIPT

# Polls start fast (a failing job ends in seconds) and back off to one every 30 s, as sbatch
# --wait's own polling does: a 3-day job asks slurmctld about 8,700 times, not 518,000.
POLL_FIRST, POLL_GROWTH, POLL_MOST = 0.5, 1.5, 30.0


def sbatch_command(bundle_dir: Path) -> list[str]:
    """The sbatch call; the script's path is absolute, so it can never read as an option."""
    script = (bundle_dir / SCRIPT).absolute()
    return ["sbatch", "--parsable", str(script)]


def job_exit_status(exit_code: str) -> int | None:
    """The job's exit status from SLURM's "code:signal": its code, else 128 + the signal
    that ended it; None when that is not what SLURM reported."""
    found = re.fullmatch(r"(\d+):(\d+)", exit_code)
    if found is None:
        return None
    code, signal = int(found.group(1)), int(found.group(2))
    return code or (128 + signal if signal else 0)


def poll_intervals() -> Iterator[float]:
    """Seconds between polls: POLL_FIRST, growing by POLL_GROWTH up to POLL_MOST."""
    interval = POLL_FIRST
    while True:
        yield interval
        interval = min(interval * POLL_GROWTH, POLL_MOST)


def wait_for_job(job_id: str) -> int:
    """Poll squeue (backing off) until the job has left the queue; its exit status, from
    slurmctld or, once slurmctld has forgotten the job (MinJobAge), from accounting."""
    from clusterctl.jobs.slurm import job_state

    for interval in poll_intervals():
        queued = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        if queued.returncode == 0 and not queued.stdout.strip():
            break
        if queued.returncode != 0 and "Invalid job id" in queued.stderr:
            break
        time.sleep(interval)
    state = job_state(job_id)
    status = job_exit_status(state.exit_code) if state else None
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
