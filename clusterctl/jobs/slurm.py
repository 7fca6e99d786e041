"""What SLURM says about a job (gather: scontrol / squeue output; judge: pure parsing)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from clusterctl.errors import UsageError


@dataclass(frozen=True)
class JobState:
    job_id: str
    name: str
    state: str  # RUNNING, PENDING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... or UNKNOWN
    nodes: str  # SLURM's node list expression, "" when none
    elapsed: str
    exit_code: str


def parse_scontrol_job(text: str) -> JobState | None:
    """`scontrol show job -o ID` output as a JobState; None when SLURM no longer knows it."""
    fields = dict(re.findall(r"(\w+)=(\S*)", text))
    if "JobId" not in fields:
        return None
    return JobState(
        job_id=fields["JobId"],
        name=fields.get("JobName", ""),
        state=fields.get("JobState", "UNKNOWN"),
        nodes="" if fields.get("NodeList", "(null)") == "(null)" else fields.get("NodeList", ""),
        elapsed=fields.get("RunTime", ""),
        exit_code=fields.get("ExitCode", ""),
    )


SACCT_FIELDS = "JobID,JobName,State,NodeList,Elapsed,ExitCode"


def parse_sacct_job(text: str) -> JobState | None:
    """`sacct -X -n -P -o SACCT_FIELDS -j ID` output (one job line, fields split by |)."""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != 6 or not fields[0]:
            continue
        job_id, name, state, nodes, elapsed, exit_code = fields
        # "CANCELLED by 0": the state is the first word
        return JobState(
            job_id,
            name,
            state.split()[0] if state else "UNKNOWN",
            "" if nodes in ("None assigned", "(null)") else nodes,
            elapsed,
            exit_code,
        )
    return None


def job_state(job_id: str) -> JobState | None:
    """SLURM's view of the job: slurmctld's (scontrol), else the accounting database's
    (sacct) once slurmctld has forgotten it (MinJobAge); None when neither knows it."""
    if shutil.which("scontrol") is None:
        return None
    proc = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    state = parse_scontrol_job(proc.stdout) if proc.returncode == 0 else None
    if state is not None or shutil.which("sacct") is None:
        return state
    accounted = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", SACCT_FIELDS, "-j", job_id],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )  # fails where accounting storage is disabled (the dev cluster): nothing more known
    return parse_sacct_job(accounted.stdout) if accounted.returncode == 0 else None


def queued(job_id: str) -> bool:
    """Does squeue still list the job (pending, running or completing)?"""
    proc = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return proc.returncode == 0 and bool(proc.stdout.strip())


def scancel(job_id: str) -> None:
    proc = subprocess.run(
        ["scancel", job_id], capture_output=True, text=True, timeout=30, check=False
    )
    if proc.returncode != 0:
        raise UsageError(f"scancel {job_id}: {proc.stderr.strip() or 'failed'}")


ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
         "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")  # fmt: skip


def has_ended(state: JobState | None) -> bool:
    return state is None or state.state in ENDED
