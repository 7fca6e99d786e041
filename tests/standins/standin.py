"""Argument-logging stand-ins for srun, docker, scontrol, sinfo, squeue and ss.

A job.sbatch runs unchanged against these on one simulated node: each call appends its argv as
one JSON line to $STANDIN_LOG, then behaves just enough like the real tool for the job to go
from preflight to cleanup. Tests read the log to see exactly which bytes each value reached
docker with. Usage: standin.py TOOL ARG...
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ["STANDIN_STATE"])


def log(argv: list[str]) -> None:
    with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8", errors="surrogateescape") as f:
        f.write(json.dumps(argv) + "\n")


def srun(args: list[str]) -> int:
    """Run the step's command as the one node's task, forwarding the signals srun forwards."""
    while args and args[0].startswith("-"):
        args = args[1:]
    env = {**os.environ, "SLURMD_NODENAME": "node1"}
    # the task in a process group of its own, ended whole when the task ends, as SLURM's
    # step cgroup ends every process of a step (a background dead man's switch included)
    child = subprocess.Popen(args, env=env, start_new_session=True)
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    while True:
        try:
            status = child.wait()
            break
        except InterruptedError:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    return status


def docker(args: list[str]) -> int:
    command = args[0] if args else ""
    if command == "run":
        name = args[args.index("--name") + 1]
        (STATE / f"running-{name}").touch()
        print("0123456789ab")
    elif command == "exec":
        rest = [a for a in args[1:] if a != "-i"]
        if "python3" in rest and "-c" in rest and "--watch" in rest:
            sys.stdin.read()  # the liveness watch: runs while the head container does
            while any(STATE.glob("running-*")):
                time.sleep(0.05)
        elif "python3" in rest and "-c" in rest and "--phase-token" in rest:
            sys.stdin.read()  # the node names
            print('CLUSTERCTL_RESULT {"status": "ready"}')
    elif command == "wait":
        marker = STATE / f"running-{args[1]}"
        while marker.exists():
            time.sleep(0.05)
    elif command == "rm":
        for name in args[1:]:
            (STATE / f"running-{name}").unlink(missing_ok=True)
    return 0


def scontrol(args: list[str]) -> int:
    if args[:2] == ["show", "hostnames"]:
        print("node1")
    elif args[:2] == ["show", "job"]:
        print("JobId=1 JobName=x\n   StdOut=/dev/null")
    return 0


def squeue(args: list[str]) -> int:
    if any("State" in a for a in args):  # the dead man's switch: this run of the job runs
        print("RUNNING|0|")
    return 0  # otherwise (a leftover's job, live jobs): nothing queued


def sinfo(args: list[str]) -> int:
    print("127.0.0.1")  # -o %o: the node's NodeAddr
    return 0


def main() -> int:
    tool, args = sys.argv[1], sys.argv[2:]
    log([tool, *args])
    handlers = {
        "srun": srun, "docker": docker, "scontrol": scontrol, "sinfo": sinfo, "squeue": squeue,
    }  # fmt: skip
    return handlers[tool](args) if tool in handlers else 0  # ss: nothing to report


if __name__ == "__main__":
    sys.exit(main())
