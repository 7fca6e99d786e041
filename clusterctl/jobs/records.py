"""A job's record on disk: its log directories and the phase timeline job.sbatch writes."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.files import open_regular

JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
# the log file each phase writes (job.sbatch's cc_spawn), for `logs --phase`
PHASE_LOGS = {
    "preflight": "preflight.log",
    "containers": "nodes.log",
    "ray-head": "cluster.log",
    "selftest": "cluster.log",
    "watch": "watch.log",
    "workload": "workload.log",
    "batch": "batch.log",
}


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    started: float  # seconds after the run began
    seconds: float | None  # None: the phase of a live run that has not ended


@dataclass(frozen=True)
class RunRecord:
    directory: Path
    rows: list[PhaseRow]
    status: int | None = None  # None: the run has not ended
    failed_node: str = ""
    cause: str = ""
    consequences: list[str] = field(default_factory=list)
    # a chain of continuations (slurm.continuations): this run's place, the jobs around it
    link: int = 0
    previous: str = ""
    next: str = ""
    # the workload's last line matching watch.progress_pattern (verl: "step:N - ...")
    progress: str = ""
    unreadable: str = ""  # why the run's timeline could not be read (timeline_problem)
    warnings: list[str] = field(default_factory=list)  # the timeline's warning entries
    first_progress: float | None = None  # seconds from the start to the first progress line


def check_job_id(job_id: str) -> str:
    if not JOB_ID.match(job_id):
        raise UsageError(f"{job_id!r}: a SLURM job id is a number (or ARRAYID_TASK)")
    return job_id


# A run's log directory, as job.sbatch names it: NAME-JOBID, a requeued run NAME-JOBID-runN
# (the job's name may itself hold dashes, digits and "-run").
RUN_DIRECTORY = re.compile(r"^(?P<name>.+)-(?P<job>[0-9]+(?:_[0-9]+)?)(?:-run(?P<run>[0-9]+))?$")


@dataclass(frozen=True)
class RunName:
    job_name: str
    job_id: str
    run: int


def parse_run_directory(name: str) -> RunName | None:
    """NAME-JOBID[-runN] read from the right, where job.sbatch put the job id and run."""
    found = RUN_DIRECTORY.match(name)
    if not found:
        return None
    return RunName(found["name"], found["job"], int(found["run"] or 0))


def run_directories(job_id: str, root: Path) -> list[Path]:
    """The log directories of every run of JOB_ID under ROOT, first run first."""
    check_job_id(job_id)
    runs = [
        (parsed.run, path)
        for path in root.glob(f"*-{job_id}*")
        if path.is_dir() and (parsed := parse_run_directory(path.name)) and parsed.job_id == job_id
    ]
    return [path for _run, path in sorted(runs)]


def read_timeline(directory: Path) -> list[dict[str, Any]]:
    """The run's timeline: timeline.json once it ended, else the lines written so far.
    What cannot be read or parsed (a half-written line, a file someone else planted) is
    left out: a record never stops a command."""
    try:
        whole = json.loads(read_record(directory / "timeline.json"))
    except (OSError, ValueError):
        whole = None
    if isinstance(whole, list):
        return [e for e in whole if isinstance(e, dict)]
    try:
        lines = read_record(directory / "timeline.jsonl").splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


RECORD_BYTES = 16 << 20  # a run's timeline is kilobytes


def read_record(path: Path, limit: int = RECORD_BYTES) -> str:
    """A file job.sbatch wrote: a failure cause may quote a tool's bytes that are not UTF-8,
    which read as U+FFFD rather than stopping `status`. Only a regular file of at most LIMIT
    bytes, never through a link: a FIFO, /dev/zero or an endless file planted in the log
    directory is an OSError, not a hang."""
    with open_regular(path, follow_links=False) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{path.name} is larger than {limit >> 20} MiB")
    return data.decode("utf-8", errors="replace")


def timeline_problem(directory: Path) -> str:
    """Why the run's record cannot be read ("" when it can, or when there is none yet)."""
    problems = []
    for name in ("timeline.json", "timeline.jsonl"):
        path = directory / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            text = read_record(path)
        except OSError as exc:
            problems.append(str(exc.strerror or exc) if exc.strerror else str(exc))
            continue
        if name == "timeline.json":
            try:
                whole = json.loads(text)
            except ValueError:
                problems.append("timeline.json is not JSON")
                continue
            if not isinstance(whole, list):
                problems.append("timeline.json is not a list of entries")
                continue
        return ""  # one of them reads
    return "; ".join(problems)


def _seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def summarize(directory: Path, timeline: list[dict[str, Any]]) -> RunRecord:
    """Phase rows with durations, and the run's outcome, from its timeline entries."""
    stamped = [e for e in timeline if _seconds(e.get("t"))]
    warnings = [str(e["warning"]) for e in stamped if "warning" in e and "phase" not in e]
    entries = [e for e in stamped if "phase" in e]
    progress = read_progress(directory)
    if not entries:
        return RunRecord(directory, [], progress=progress, unreadable=timeline_problem(directory))
    start = float(entries[0]["t"])
    first = next(
        (float(e["t"]) - start for e in stamped if e.get("event") == "first-progress"), None
    )
    end = next((e for e in entries if e.get("phase") == "end"), None)
    phases = [e for e in entries if e.get("phase") != "end"]
    marks = [float(e["t"]) for e in phases] + ([float(end["t"])] if end else [])
    rows = [
        PhaseRow(
            str(e["phase"]),
            marks[i] - start,
            marks[i + 1] - marks[i] if i + 1 < len(marks) else None,
        )
        for i, e in enumerate(phases)
    ]
    if end is None:
        return RunRecord(
            directory, rows, progress=progress, warnings=warnings, first_progress=first
        )
    return RunRecord(
        directory,
        rows,
        status=_whole(end.get("status"), 1),  # an end without a number: not a success
        failed_node=str(end.get("failed_node", "")),
        cause=str(end.get("cause", "")),
        consequences=[str(c) for c in _list(end.get("consequences"))],
        link=_whole(end.get("link"), 0),
        previous=str(end.get("previous", "")),
        next=str(end.get("next", "")),
        progress=progress,
        warnings=warnings,
        first_progress=first,
    )


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read_progress(directory: Path) -> str:
    """The last progress line job.sbatch recorded, without Ray's colour codes."""
    try:
        text = read_record(directory / "progress", 1 << 20)
    except OSError:
        return ""
    return ANSI.sub("", text).strip()


def latest_run(job_id: str, root: Path) -> RunRecord | None:
    """The record of the job's newest run under ROOT (a requeued job's last)."""
    dirs = run_directories(job_id, root)
    return summarize(dirs[-1], read_timeline(dirs[-1])) if dirs else None
