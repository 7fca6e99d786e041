"""How `clusterctl verify` reaches nodes: srun inside an allocation, SSH from anywhere else,
or this machine itself. Every transport runs the same gather script on every node at once
and returns each node's raw output with the local times around it (for the clock offset).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from clusterctl.errors import Unreachable, UsageError
from clusterctl.jobs.slurm import job_state
from clusterctl.ssh import SshOptions, connect, require_paramiko, ssh_error

GATHER_DEADLINE = 120  # seconds for one node's gather (each tool inside is bounded by 20 s)


@dataclass(frozen=True)
class Gathered:
    """One node's answer: its gather output, or why there is none."""

    target: str
    output: str
    sent: float
    received: float
    error: str = ""
    node: str | None = None  # the name to report the node under (SSH: the host alias)


def gather_local(script: str) -> list[Gathered]:
    """Run the gather script on this machine."""
    sent = time.time()
    proc = subprocess.run(
        ["bash", "-s"],
        input=script,
        capture_output=True,
        text=True,
        timeout=GATHER_DEADLINE,
        check=False,
    )
    return [
        Gathered(
            "localhost",
            proc.stdout,
            sent,
            time.time(),
            "" if "@@cc-gather" in proc.stdout else proc.stderr.strip(),
        )
    ]


_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


def gather_srun(
    script: str, nodelist: str | None = None, nodes: int | None = None
) -> list[Gathered]:
    """Run the gather script on every node of the current allocation with one srun step
    (one task per node, the script on every task's standard input)."""
    if shutil.which("srun") is None:
        raise UsageError("srun is not on PATH: run verify inside an allocation or give --hosts")
    cmd = [
        "srun",
        "--overlap",
        "--ntasks-per-node=1",
        "--input=all",
        "--label",
        f"--time={max(1, GATHER_DEADLINE // 60 + 1)}",
    ]
    if nodelist:
        cmd.append(f"--nodelist={nodelist}")
    if nodes:
        cmd += [f"--nodes={nodes}", f"--ntasks={nodes}"]
    sent = time.time()
    try:
        proc = subprocess.run(
            [*cmd, "bash", "-s"],
            input=script,
            capture_output=True,
            text=True,
            timeout=GATHER_DEADLINE + 30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"srun did not finish within {GATHER_DEADLINE + 30}s") from None
    received = time.time()
    by_task: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = _LABEL.match(line)
        if m:
            by_task.setdefault(m.group(1), []).append(m.group(2))
    if not by_task:
        raise UsageError(f"srun ran no gather: {proc.stderr.strip() or 'no output'}")
    out = []
    for task, lines in sorted(by_task.items(), key=lambda kv: int(kv[0])):
        text = "\n".join(lines)
        out.append(
            Gathered(
                f"task {task}",
                text,
                sent,
                received,
                "" if "@@cc-section end" in text else "gather ended early",
            )
        )
    return out


def job_nodes(job_id: str) -> list[str]:
    """The node names of a SLURM job, one per line as SLURM expands them."""
    state = job_state(job_id)
    if state is None or not state.nodes:
        raise UsageError(f"job {job_id} has no nodes (is it running?)")
    return hostnames(state.nodes)


def hostnames(nodelist: str) -> list[str]:
    """A SLURM node list (node[1-3]) expanded as SLURM expands it."""
    return _run(["scontrol", "show", "hostnames", nodelist]).split()


def live_jobs() -> frozenset[str] | None:
    """Job ids SLURM still runs or holds (their containers are not leftovers); None when
    squeue is not available here."""
    if shutil.which("squeue") is None:
        return None
    try:
        # %A: the job id each container's label holds (%i writes an array task as 123_4)
        return frozenset(_run(["squeue", "-h", "-o", "%A"]).split())
    except UsageError:
        return None


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{cmd[0]} failed: {exc}") from None
    if proc.returncode != 0:
        raise UsageError(f"{' '.join(cmd)}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


def gather_ssh(script: str, hosts: list[str], options: SshOptions) -> list[Gathered]:
    """Run the gather script on every host over SSH, all at once; a host that cannot be
    reached (or whose host key is unknown) answers with an error, not an exception."""
    if options.transport == "paramiko":
        require_paramiko("verify over SSH")
    with ThreadPoolExecutor(max_workers=min(64, max(1, len(hosts)))) as pool:
        return list(pool.map(lambda h: _gather_one_ssh(script, h, options), hosts))


def _gather_one_ssh(script: str, alias: str, options: SshOptions) -> Gathered:
    sent = time.time()
    try:
        with connect(alias, options) as remote:
            sent = time.time()
            _, output, errors = remote.run("bash -s", script.encode(), GATHER_DEADLINE)
            received = time.time()
    except Unreachable as exc:
        return Gathered(alias, "", sent, time.time(), exc.reason, alias)
    except UsageError as exc:
        return Gathered(alias, "", sent, time.time(), str(exc), alias)
    except Exception as exc:
        return Gathered(alias, "", sent, time.time(), ssh_error(exc), alias)
    return Gathered(
        alias,
        output,
        sent,
        received,
        "" if "@@cc-section end" in output else (errors.strip() or "gather ended early"),
        alias,
    )
