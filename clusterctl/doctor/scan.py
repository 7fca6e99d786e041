"""Gather log lines from files or a job's log directory, and judge them against signatures."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from clusterctl.doctor.signatures import ANY_SIGNATURE, SIGNATURES, Signature
from clusterctl.errors import UsageError

# A log can be gigabytes: doctor reads its head (how the job started) and its tail (how it
# ended), counts the lines in between so line numbers stay real, and says what it skipped.
HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 8 * 1024 * 1024
_CHUNK = 16 * 1024 * 1024
LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".json", ".jsonl")


@dataclass
class Hit:
    signature: Signature
    file: str
    line_no: int
    line: str
    fields: dict[str, str]
    count: int = 1
    files: set[str] = field(default_factory=set)

    def text(self, template: str) -> str:
        try:
            return template.format(**self.fields)
        except (KeyError, IndexError):
            return template

    def as_dict(self) -> dict[str, object]:
        sig = self.signature
        return {
            "id": sig.id,
            "file": self.file,
            "line": self.line_no,
            "excerpt": self.line.strip(),
            "count": self.count,
            "meaning": self.text(sig.meaning),
            "cause": self.text(sig.cause),
            "fix": self.text(sig.fix),
            "prevention": sig.prevention,
            "source": sig.source,
        }


JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


def job_log_files(job_id: str, root: Path) -> list[Path]:
    """Every log file of a clusterctl job: its log directory and SLURM's batch output."""
    if not JOB_ID.match(job_id):
        raise UsageError(f"--job {job_id!r}: a SLURM job id is a number (or ARRAYID_TASK)")
    dirs = sorted(root.glob(f"*-{job_id}"))
    if not dirs:
        raise UsageError(
            f"no log directory for job {job_id} under {root} (expected {root}/<job_name>-{job_id})"
        )
    files = [p for d in dirs for p in sorted(d.rglob("*")) if p.is_file()]
    return [p for p in files if p.suffix in LOG_SUFFIXES or "." not in p.name]


def _count_newlines(handle: BinaryIO, start: int, end: int) -> int:
    handle.seek(start)
    count, left = 0, end - start
    while left > 0:
        chunk = handle.read(min(_CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


def _numbered(data: bytes, first: int) -> Iterator[tuple[int, str]]:
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    yield from enumerate(lines, start=first)


def read_lines(
    path: Path, notes: list[str] | None = None, head: int = HEAD_BYTES, tail: int = TAIL_BYTES
) -> Iterator[tuple[int, str]]:
    """(line number, text) of the file's head and tail windows; line numbers are the file's.

    What lies between the windows is counted, not judged, and said in ``notes``.
    """
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        if size <= head + tail:
            yield from _numbered(handle.read(), 1)
            return
        head_data = handle.read(head)
        cut = head_data.rfind(b"\n") + 1  # whole lines only
        head_data = head_data[:cut]
        handle.seek(size - tail)
        tail_data = handle.read(tail)
        skip = tail_data.find(b"\n") + 1  # the tail starts at a line start
        tail_start = size - tail + skip
        middle_lines = _count_newlines(handle, cut, tail_start)
        head_lines = head_data.count(b"\n")
        if notes is not None:
            notes.append(
                f"{path}: read the first {cut} and the last {size - tail_start} bytes; "
                f"lines {head_lines + 1}-{head_lines + middle_lines} "
                f"({tail_start - cut} bytes) were not judged"
            )
        yield from _numbered(head_data, 1)
        handle.seek(tail_start)
        yield from _numbered(tail_data[skip:], head_lines + middle_lines + 1)


# A traceback's last line (a Python exception, bare or behind Ray's "(Actor pid=N) " prefix)
# and NCCL's warnings: what a log says went wrong even when no signature knows the words.
TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
EXCEPTION_LINE = re.compile(
    r"^(?:\S*\(\S+ pid=\d+(?:, ip=[\d.]+)?\)\S*\s+)?"
    r"(?P<exception>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): (?P<message>.+)$"
)
NCCL_WARN = re.compile(r"\bNCCL WARN\b")
UNRECOGNISED = Signature(
    "unrecognised",
    None,  # what no signature matched: the run's first unexplained traceback
    "an error no signature knows: {exception}",
    "{message}",
    "read the traceback at this line{context}; `clusterctl doctor` names the causes in its "
    "README list, and this is not one of them",
    "none known to clusterctl",
    "the log itself (no signature matched)",
)


def scan_lines(lines: Iterable[tuple[str, int, str]]) -> list[Hit]:
    """Judge (file, line number, text) triples; one hit per signature and cause. When no
    signature names a cause, the first traceback nobody matched is reported as unrecognised,
    with the NCCL warnings of its file: never silence."""
    hits: dict[tuple[str, str], Hit] = {}
    tracebacks: set[str] = set()  # files that hold a traceback
    unmatched: list[tuple[str, int, str, re.Match[str]]] = []
    warnings: dict[str, list[str]] = {}
    for file, number, text in lines:
        if TRACEBACK.search(text):
            tracebacks.add(file)
        if NCCL_WARN.search(text):
            warnings.setdefault(file, []).append(text.strip())
        if ANY_SIGNATURE.search(text) is None:
            if last := EXCEPTION_LINE.match(text.strip()):
                unmatched.append((file, number, text, last))
            continue
        for sig in SIGNATURES:
            match = sig.match(text)
            if match is None:
                continue
            fields = {k: v for k, v in match.groupdict().items() if v is not None}
            key = (sig.id, fields.get("node", "") + fields.get("cause", ""))
            if key in hits:
                hits[key].count += 1
                hits[key].files.add(file)
            else:
                hits[key] = Hit(sig, file, number, text, fields, files={file})
    order = {sig.id: i for i, sig in enumerate(SIGNATURES)}
    found = sorted(hits.values(), key=lambda h: (order[h.signature.id], h.file, h.line_no))
    if unmatched and all(h.signature.id == GENERIC for h in found):
        file, number, text, match = unmatched[0]
        context = warnings.get(file, [])[:3]
        fields = {
            "exception": match["exception"],
            "message": match["message"][:300],
            "context": f" (NCCL said: {' | '.join(context)})" if context else "",
        }
        found.append(Hit(UNRECOGNISED, file, number, text, fields, files={file}))
    return found


GENERIC = "clusterctl-fail"  # clusterctl's own FAIL line: it names the node, not the cause


def scan_files(paths: Iterable[Path], notes: list[str] | None = None) -> list[Hit]:
    """Judge every readable regular file; what cannot be read is skipped and said in
    ``notes`` (devices, FIFOs and unreadable files never stop the scan). A stalled job's
    stack dumps (stall/) are explained first."""

    def lines_of(paths: Iterable[Path]) -> Iterator[tuple[str, int, str]]:
        for path in paths:
            try:
                if not path.is_file():
                    reason = "no such file" if not path.exists() else "not a regular file"
                    if notes is not None:
                        notes.append(f"{path}: skipped ({reason})")
                    continue
                for number, text in read_lines(path, notes):
                    yield str(path), number, text
            except OSError as exc:
                if notes is not None:
                    notes.append(f"{path}: skipped ({exc.strerror or exc})")

    listed = list(paths)
    return [*stall_hits(listed), *scan_lines(lines_of(listed))]


STALL = Signature(
    "stall-evidence",
    None,  # judged from the stall/ directory's stack dumps, not from one line
    "the workload stalled: {meaning}",
    "{cause}",
    "{fix}",
    "watch.stall_seconds captures this evidence (ray status, py-spy dumps, logs)",
    "NeMo-RL and verl maintainers ask for py-spy dumps and ray status of hung jobs",
)


def stall_hits(paths: Iterable[Path]) -> list[Hit]:
    """What the stack dumps in each stall/ directory among PATHS say."""
    from clusterctl.doctor.stall import explain_directory

    hits = []
    for directory in sorted({p.parent for p in paths if p.parent.name == "stall"}):
        found = explain_directory(directory)
        if found is not None:
            fields = {"meaning": found.meaning, "cause": found.cause, "fix": found.fix}
            hits.append(
                Hit(STALL, str(directory), 0, found.meaning, fields, files={str(directory)})
            )
    return hits
