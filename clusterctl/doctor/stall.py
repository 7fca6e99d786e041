"""Explain a stalled job from the evidence its watch captured (stall/NODE.txt: py-spy dumps of
every Ray worker and the workload on every node).

The usual picture of a hang in distributed training: every rank waits in a collective
(all_reduce, broadcast, barrier ...) for one rank that is somewhere else: in its data loader,
in a deadlock, or gone. That rank's node is the one to look at. When every rank waits in the
collective, the missing peer is outside the dumps (a dead process, another node) or the
fabric itself is stuck.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

COLLECTIVES = re.compile(
    r"^(all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|barrier|all_to_all\w*|"
    r"reduce|gather|scatter|send|recv|isend|irecv|wait|monitored_barrier|_store_based_barrier)$"
)
COLLECTIVE_FILES = re.compile(r"distributed|nccl|gloo|collective|pynccl", re.I)
# Ray's own service processes and idle workers: they wait for work, not for a peer
SERVICE = re.compile(r"^ray::(IDLE|DashboardAgent|RuntimeEnvAgent|JobSupervisor)\b")
WAITING_ON_RAY = re.compile(r"^(get|wait|get_objects|_wait_for_\w+)$")
NO_PY_SPY = "@@ py-spy is not in the image"  # what cc_node_evidence writes without it
FRAME = re.compile(r"^\s+(?P<func>\S+) \((?P<file>[^:()]+)(?::(?P<line>\d+))?\)\s*$")
THREAD = re.compile(r'^Thread \S+ \((?P<state>[^)]*)\): "(?P<name>[^"]*)"')


@dataclass
class Stack:
    """One process's dump: its node, pid, command and its main thread's frames, innermost
    first."""

    node: str
    pid: str
    command: str
    frames: list[tuple[str, str]] = field(default_factory=list)  # (function, file:line)

    def kind(self) -> str:
        """collective, ray-wait (a driver blocked in ray.get), service, elsewhere or empty."""
        if SERVICE.match(self.command):
            return "service"
        if not self.frames:
            return "empty"
        for func, where in self.frames:
            if COLLECTIVES.match(func) and COLLECTIVE_FILES.search(where):
                return "collective"
        func, where = self.frames[0]
        if "ray/" in where and (WAITING_ON_RAY.match(func) or "worker.py" in where):
            return "ray-wait"
        return "elsewhere"

    def collective(self) -> str:
        return next(
            (f for f, w in self.frames if COLLECTIVES.match(f) and COLLECTIVE_FILES.search(w)),
            "",
        )

    def top(self) -> str:
        """The innermost frame that is not the standard library's or Ray's own."""
        for func, where in self.frames:
            if not re.search(r"(^|/)(threading|selectors|socket|ray/_private|ray/_raylet)", where):
                return f"{func} ({where})"
        return f"{self.frames[0][0]} ({self.frames[0][1]})" if self.frames else "?"


def parse_evidence(node: str, text: str) -> list[Stack]:
    """The stacks in one node's evidence file (``@@ pid N: CMD`` then py-spy's dump)."""
    stacks: list[Stack] = []
    current: Stack | None = None
    in_main = False
    for line in text.splitlines():
        found = re.match(r"^@@ pid (\d+): (.*)$", line)
        if found:
            current = Stack(node, found.group(1), found.group(2).strip())
            stacks.append(current)
            in_main = False
            continue
        if line.startswith("@@"):
            current = None
            continue
        if current is None:
            continue
        thread = THREAD.match(line)
        if thread:
            # the main thread runs the task (Ray actors) or the program (the workload)
            in_main = thread.group("name") == "MainThread"
            continue
        frame = FRAME.match(line)
        if frame and in_main:
            where = frame.group("file") + (f":{frame.group('line')}" if frame.group("line") else "")
            current.frames.append((frame.group("func"), where))
    return stacks


@dataclass(frozen=True)
class Explanation:
    meaning: str
    cause: str
    fix: str
    suspects: tuple[str, ...]  # nodes


def explain(stacks: list[Stack]) -> Explanation | None:
    """What the stacks say about the stall; None when there are no stacks to judge."""
    if not stacks:
        return None
    ranks = [s for s in stacks if s.kind() in ("collective", "elsewhere")]
    if not ranks:
        return Explanation("no process held a stack", "", "read the dumps in stall/", ())
    waiting = [s for s in ranks if s.kind() == "collective"]
    elsewhere = [s for s in ranks if s.kind() == "elsewhere"]
    if waiting and elsewhere:
        names = sorted({s.collective() for s in waiting})
        odd = ", ".join(f"{s.node} pid {s.pid} ({s.command}) in {s.top()}" for s in elsewhere)
        nodes = tuple(sorted({s.node for s in elsewhere}))
        return Explanation(
            f"{len(waiting)} of {len(ranks)} ranks wait in {'/'.join(names)}; "
            f"{len(elsewhere)} {'is' if len(elsewhere) == 1 else 'are'} elsewhere: {odd}",
            f"the collective waits for the rank(s) elsewhere: {', '.join(nodes)} is the node "
            "to look at (a hang in its data loader or code, a deadlock, a slow disk)",
            f"read the full dump in stall/{nodes[0]}.txt; fix or drain {', '.join(nodes)}",
            nodes,
        )
    if waiting:
        names = sorted({s.collective() for s in waiting})
        nodes = tuple(sorted({s.node for s in waiting}))
        return Explanation(
            f"every rank in the dumps ({len(waiting)}, on {', '.join(nodes)}) waits in "
            f"{'/'.join(names)}",
            "the peer they wait for is not among them (a dead process, a node outside the job) "
            "or the fabric is stuck",
            "check ray-actors-not-alive.txt and dmesg in stall/; run the self-test's collective "
            "(selftest) or verify on these nodes",
            nodes,
        )
    tops = "; ".join(f"{s.node} pid {s.pid}: {s.top()}" for s in elsewhere[:4])
    return Explanation(
        f"no rank waits in a collective; where they are: {tops}",
        "a hang in the workload's own code (a lock, I/O, an endless loop)",
        "read the dumps in stall/",
        tuple(sorted({s.node for s in elsewhere})),
    )


def explain_directory(directory: Path) -> Explanation | None:
    """The explanation of a job's stall/ directory (every NODE.txt in it)."""
    stacks: list[Stack] = []
    without = []
    for path in sorted(directory.glob("*.txt")):
        text = path.read_text(errors="replace")
        if text.startswith("@@ evidence "):
            stacks += parse_evidence(path.stem, text)
            if NO_PY_SPY in text:
                without.append(path.stem)
    if without and not stacks:
        return Explanation(
            f"no stack dumps: {NO_PY_SPY.removeprefix('@@ ')} ({', '.join(without)})",
            "the stall was caught but where each rank waits is unknown",
            "install py-spy in the image (container.build.pip_packages: [py-spy])",
            (),
        )
    return explain(stacks)
