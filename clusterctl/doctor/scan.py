"""Gather log lines from files or a job's log directory, and judge them against signatures."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.doctor.signatures import SIGNATURES, Signature
from clusterctl.errors import UsageError

MAX_BYTES = 8 * 1024 * 1024  # per file: the tail holds the failure
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


def job_log_files(job_id: str, root: Path) -> list[Path]:
    """Every log file of a clusterctl job: its log directory and SLURM's batch output."""
    dirs = sorted(root.glob(f"*-{job_id}"))
    if not dirs:
        raise UsageError(
            f"no log directory for job {job_id} under {root} (expected {root}/<job_name>-{job_id})"
        )
    files = [p for d in dirs for p in sorted(d.rglob("*")) if p.is_file()]
    return [p for p in files if p.suffix in LOG_SUFFIXES or "." not in p.name]


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        start = max(0, size - MAX_BYTES)
        handle.seek(start)
        data = handle.read().decode("utf-8", errors="replace")
    first = 1 if start == 0 else 0
    yield from enumerate(data.splitlines(), start=first)


def scan_lines(lines: Iterable[tuple[str, int, str]]) -> list[Hit]:
    """Judge (file, line number, text) triples; one hit per signature and cause."""
    hits: dict[tuple[str, str], Hit] = {}
    for file, number, text in lines:
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
    return sorted(hits.values(), key=lambda h: (order[h.signature.id], h.file, h.line_no))


def scan_files(paths: Iterable[Path]) -> list[Hit]:
    def lines() -> Iterator[tuple[str, int, str]]:
        for path in paths:
            try:
                for number, text in read_lines(path):
                    yield str(path), number, text
            except OSError as exc:
                raise UsageError(f"cannot read {path}: {exc.strerror}") from None

    return scan_lines(lines())
