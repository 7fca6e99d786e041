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


def still_queued(job_id: str) -> Callable[[], bool]:
    """A test that the job is still in the queue, which asks squeue only as often as
    poll_intervals says (backing off), however often it is called."""
    intervals, next_at, gone = poll_intervals(), 0.0, False

    def running() -> bool:
        nonlocal next_at, gone
        if gone or time.monotonic() < next_at:
            return not gone
        queued = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        left = queued.returncode == 0 and not queued.stdout.strip()
        gone = left or (queued.returncode != 0 and "Invalid job id" in queued.stderr)
        next_at = time.monotonic() + next(intervals)
        return not gone

    return running


def until_gone(job_id: str, watch: Callable[[Callable[[], bool]], None] | None = None) -> None:
    """Return once the job has left the queue; WATCH (given the queue test) shows it
    meanwhile."""
    running = still_queued(job_id)
    if watch is not None:
        watch(running)
    while running():
        time.sleep(POLL_FIRST)


def wait_for_job(job_id: str, watch: Callable[[Callable[[], bool]], None] | None = None) -> int:
    """Until the job has left the queue (WATCH shows it meanwhile, given the queue test); its
    exit status, from slurmctld or, once slurmctld has forgotten the job (MinJobAge), from
    accounting."""
    from clusterctl.jobs.slurm import job_state

    until_gone(job_id, watch)
    state = job_state(job_id)
    status = job_exit_status(state.exit_code) if state else None
    if status is None:
        raise UsageError(f"job {job_id} ended, but SLURM no longer reports its exit status")
    return status


def follower(
    job_id: str, logs_root: Path, say: Callable[[str], None]
) -> Callable[[Callable[[], bool]], None]:
    """What shows the job while it runs (jobs/live.py): a live panel on a terminal, else a
    plain line per change."""
    import sys

    from clusterctl.jobs.live import follow

    live = sys.stdout.isatty()
    return lambda running: follow(job_id, logs_root, running, say, live)


def submit_bundle(
    bundle_dir: Path, wait: bool, say: Callable[[str], None], logs_root: Path | None = None
) -> int:
    """Run sbatch on the bundle's script; with wait, follow the job (its records under
    LOGS_ROOT) and return its status."""
    if shutil.which("sbatch") is None:
        raise UsageError("sbatch not found: submit from a SLURM login node (or use render)")
    proc = subprocess.run(sbatch_command(bundle_dir), capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"sbatch refused the job: {proc.stderr.strip() or proc.returncode}")
    job_id = proc.stdout.strip().split(";")[0]  # --parsable: "id[;cluster]"
    say(f"submitted job {job_id} ({bundle_dir / SCRIPT})")
    if not wait:
        return 0
    status = wait_for_job(job_id, follower(job_id, logs_root, say) if logs_root else None)
    say(ended_line(job_id, status, logs_root))
    if logs_root is not None:
        say(report_line(job_id, logs_root))
    return status


def report_line(job_id: str, logs_root: Path) -> str:
    """Write the job's page into its log directory at its end; the line that says where."""
    from clusterctl.jobs.report import job_report

    try:
        return f"report: {job_report(job_id, logs_root)}"
    except (OSError, UsageError) as exc:
        return f"report: not written: {exc}"


def ended_line(job_id: str, status: int, logs_root: Path | None) -> str:
    """What `status` says of an ended job, in one line: succeeded, or failed with the node
    and cause its record names."""
    if status == 0:
        return f"job {job_id} succeeded"
    said = f"job {job_id} failed with status {status}"
    if logs_root is not None:
        from clusterctl.console import printable
        from clusterctl.jobs.records import latest_run

        record = latest_run(job_id, logs_root) if logs_root.is_dir() else None
        if record is not None and record.cause:
            said += printable(f": node {record.failed_node}: {record.cause}")
    return said
