"""What SLURM says about a job, read field by field (squeue -O, sacct -P): never
`scontrol show job` scraped, whose values may hold spaces."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from clusterctl.errors import UsageError

# A SLURM node name as clusterctl accepts one from a file or a flag: never a node list
# expression (node[1-512]) or an option (-x)
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class JobState:
    job_id: str
    name: str
    state: str  # RUNNING, PENDING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... or UNKNOWN
    nodes: str  # SLURM's node list expression, "" when none
    elapsed: str
    exit_code: str


# Field by field, the name last: a name may hold the delimiter, the other fields cannot.
SQUEUE_FORMAT = "JobID:|,State:|,TimeUsed:|,exit_code:|,NodeList:|,Name:|"


def parse_squeue_job(text: str) -> JobState | None:
    """`squeue -h -t all -j ID -O SQUEUE_FORMAT` output (each field ends in |); None when
    squeue printed no job line."""
    for line in text.splitlines():
        fields = line.split("|", 5)
        if len(fields) != 6 or not fields[0].isdigit() or not fields[5].endswith("|"):
            continue
        job_id, state, elapsed, exit_code, nodes, name = fields
        return JobState(
            job_id,
            name[:-1],
            state or "UNKNOWN",
            "" if nodes in ("", "(null)") else nodes,
            elapsed,
            _exit_code(exit_code),
        )
    return None


def _exit_code(value: str) -> str:
    """SLURM's "code:signal": squeue 22.05 prints the raw wait status (768 for exit 3)."""
    if not value.isdigit():
        return value
    status = int(value)
    return f"{status >> 8}:{status & 0x7F}"


# sacct -P separates by |; the name goes last, as in squeue's format.
SACCT_FIELDS = "JobID,State,NodeList,Elapsed,ExitCode,JobName"


def parse_sacct_job(text: str) -> JobState | None:
    """`sacct -X -n -P -o SACCT_FIELDS -j ID` output (one job line, fields split by |)."""
    for line in text.splitlines():
        fields = line.split("|", 5)
        if len(fields) != 6 or not fields[0]:
            continue
        job_id, state, nodes, elapsed, exit_code, name = fields
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


def job_state(job_id: str, strict: bool = False) -> JobState | None:
    """SLURM's view of the job: slurmctld's (squeue, every state), else the accounting
    database's (sacct) once slurmctld has forgotten it (MinJobAge); None when neither
    knows it. STRICT: a slurmctld that does not answer is an error, not "unknown" (for a
    caller that would act on a job it believes ended)."""
    if shutil.which("squeue") is None:
        if strict:
            raise UsageError("squeue is not on PATH: SLURM cannot say whether the job ended")
        return None
    proc = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-O", SQUEUE_FORMAT],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if strict and proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        said = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no answer"
        raise UsageError(f"SLURM did not answer about job {job_id}: {said}")
    state = parse_squeue_job(proc.stdout) if proc.returncode == 0 else None
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
