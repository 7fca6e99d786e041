"""A job while it runs, from its own records (issue 44): the phase and how long it has taken,
the nodes through the preflight and joined to Ray as N/M, the self-test's parts as they
finish, the workload's first progress line, then its step rate. Nothing asks slurmctld more
than `wait` already does: everything here is read from the job's log directory.

On a terminal it is one live panel (rich's); in a pipe or a CI log, one plain line per change.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table
from rich.text import Text

from clusterctl.console import printable
from clusterctl.files import open_regular
from clusterctl.jobs.records import read_progress, read_timeline, run_directories

ALIVE = re.compile(r"^clusterctl: ray: (\d+)/(\d+) nodes alive", re.M)
SELFTEST = re.compile(r"^clusterctl: selftest: (.+)$", re.M)
STEP = re.compile(r"\bstep[:= ]\s*(\d+)")
# a plain line about the workload's progress at most this often (a step a second would flood
# a CI log)
PROGRESS_EVERY = 30.0


@dataclass
class JobView:
    """What the job's records say now."""

    directory: Path | None = None
    phase: str = ""
    phase_since: float = 0.0  # epoch seconds
    phases: list[tuple[str, float]] = field(default_factory=list)  # every phase so far
    started: float = 0.0
    gathered: int = 0  # nodes whose preflight gather is in
    alive: tuple[int, int] | None = None  # Ray's nodes alive / expected
    selftest: list[str] = field(default_factory=list)
    progress: str = ""
    first_progress: str = ""
    rate: float | None = None  # workload steps a second, since the first step seen
    ended: bool = False


class _Tail:
    """New text of a log file since the last read (a file someone else may have replaced:
    only a regular file, never through a link)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def read(self) -> str:
        try:
            with open_regular(self.path, follow_links=False) as handle:
                handle.seek(self.offset)
                data = handle.read(1 << 20)
        except OSError:
            return ""
        cut = data.rfind(b"\n") + 1  # whole lines only; the rest comes next time
        self.offset += cut
        return data[:cut].decode("utf-8", errors="replace")


class JobWatch:
    """Reads a job's newest run directory under ROOT, once per call of `look`."""

    def __init__(self, job_id: str, root: Path) -> None:
        self.job_id, self.root = job_id, root
        self.view = JobView()
        self._cluster: _Tail | None = None
        self._first_step: tuple[float, int] | None = None

    def look(self, now: float | None = None) -> JobView:
        now = time.time() if now is None else now
        runs = run_directories(self.job_id, self.root) if self.root.is_dir() else []
        if not runs:
            return self.view
        directory = runs[-1]
        if directory != self.view.directory:  # a requeued run starts its own record
            self.view, self._cluster, self._first_step = JobView(directory), None, None
        view = self.view
        phases = [e for e in read_timeline(directory) if "phase" in e and "t" in e]
        if phases:
            view.started = float(phases[0]["t"])
            view.phases = [(str(e["phase"]), float(e["t"])) for e in phases]
            view.phase, view.phase_since = view.phases[-1]
            view.ended = view.phase == "end"
        gathers = directory / "preflight"
        view.gathered = len(list(gathers.glob("*.gather"))) if gathers.is_dir() else 0
        if self._cluster is None:
            self._cluster = _Tail(directory / "cluster.log")
        text = self._cluster.read()
        for alive in ALIVE.finditer(text):
            view.alive = (int(alive.group(1)), int(alive.group(2)))
        view.selftest += [printable(s.group(1)) for s in SELFTEST.finditer(text)]
        progress = printable(read_progress(directory))
        if progress and progress != view.progress:
            view.progress = progress
            view.first_progress = view.first_progress or progress
            step = STEP.search(progress)
            if step:
                number = int(step.group(1))
                if self._first_step is None:
                    self._first_step = (now, number)
                elif now > self._first_step[0] and number > self._first_step[1]:
                    view.rate = (number - self._first_step[1]) / (now - self._first_step[0])
        return view


def changes(before: JobView, after: JobView, now: float, last_progress: float) -> list[str]:
    """The plain lines for what changed between two looks."""
    out = [
        f"phase: {name} (+{at - after.started:.1f}s)"
        for name, at in after.phases[len(before.phases) :]
        if name != "end"
    ]
    if after.gathered != before.gathered and after.phase == "preflight":
        out.append(f"preflight: {after.gathered} node(s) gathered")
    if after.alive and after.alive != before.alive:
        out.append(f"ray: {after.alive[0]}/{after.alive[1]} nodes alive")
    out += [f"selftest: {line}" for line in after.selftest[len(before.selftest) :]]
    if after.first_progress and not before.first_progress:
        out.append(f"workload: first progress: {after.first_progress[:160]}")
    elif after.progress != before.progress and now - last_progress >= PROGRESS_EVERY:
        rate = f" ({after.rate:.2f} steps/s)" if after.rate else ""
        out.append(f"workload: {after.progress[:160]}{rate}")
    return out


def panel(view: JobView, job_id: str, now: float) -> Table:
    """The live panel: one row per thing a user watches."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    if not view.phase:
        table.add_row(f"job {job_id}", "waiting for SLURM to start it")
        return table
    table.add_row(f"job {job_id}", f"{now - view.started:.0f}s since it started")
    table.add_row("phase", Text(f"{view.phase} for {now - view.phase_since:.0f}s"))
    table.add_row("preflight", f"{view.gathered} node(s) gathered")
    if view.alive:
        table.add_row("ray", f"{view.alive[0]}/{view.alive[1]} nodes alive")
    for line in view.selftest[-6:]:
        table.add_row("selftest", Text(line[:110]))
    if view.progress:
        rate = f"  ({view.rate:.2f} steps/s)" if view.rate else ""
        table.add_row("workload", Text(view.progress[:110] + rate))
    return table


def follow(
    job_id: str,
    root: Path,
    running: Callable[[], bool],
    say: Callable[[str], None],
    live: bool,
    every: float = 1.0,
) -> None:
    """Show the job until RUNNING() says it has left the queue: a live panel when LIVE, else
    a line per change through SAY."""
    watch = JobWatch(job_id, root)
    if live:
        from rich.console import Console
        from rich.live import Live

        with Live(panel(watch.view, job_id, time.time()), console=Console(), transient=True) as ui:
            for _ in _ticks(running, every):
                ui.update(panel(watch.look(), job_id, time.time()))
        return
    before, last_progress = JobView(), 0.0
    for _ in _ticks(running, every):
        now = time.time()
        after = _copy(watch.look(now))
        lines = changes(before, after, now, last_progress)
        for line in lines:
            say(line)
        if any(line.startswith("workload:") for line in lines):
            last_progress = now
        before = after


def _copy(view: JobView) -> JobView:
    return JobView(
        **{**view.__dict__, "selftest": list(view.selftest), "phases": list(view.phases)}
    )


def _ticks(running: Callable[[], bool], every: float) -> Iterator[None]:
    """Once now, then every EVERY seconds while RUNNING(), and once more after it ends (the
    job's last records)."""
    while True:
        yield
        if not running():
            yield
            return
        time.sleep(every)
