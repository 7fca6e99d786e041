"""After submit: ``clusterctl status | logs | cancel | down | ls`` for the jobs clusterctl ran."""

from __future__ import annotations

import codecs
import functools
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from clusterctl.console import printable, user_errors
from clusterctl.errors import UsageError
from clusterctl.files import open_regular
from clusterctl.jobs.records import (
    PHASE_LOGS,
    RunRecord,
    check_job_id,
    latest_run,
    parse_run_directory,
    read_timeline,
    run_directories,
    summarize,
)
from clusterctl.jobs.slurm import NODE_NAME, has_ended, job_state, queued, scancel
from clusterctl.remote import remote_options

CANCEL_DEADLINE = 120  # seconds for a cancelled job to leave RUNNING (its cleanup included)

logs_root_option = click.option(
    "--logs-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("clusterctl-logs"),
    show_default=True,
    help="Where job log directories live (logs.dir of the spec).",
)


REMOTE_PARAMS = ("host", "profile", "remote_dir", "remote_clusterctl", "ssh_config",
                 "ssh_transport", "accept_new_host_keys")  # fmt: skip


def on_login_node(func: Callable[..., None]) -> Callable[..., None]:
    """--host / --profile: run the same command on the login node over SSH (clusterctl
    there), its output streamed back and its exit status returned."""

    @functools.wraps(func)
    def wrapper(**params: Any) -> None:
        host, profile_name = params.get("host"), params.get("profile")
        if host is None and profile_name is None:
            func(**{k: v for k, v in params.items() if k not in REMOTE_PARAMS})
            return
        from clusterctl.remote import login_node, run_clusterctl
        from clusterctl.spec.profiles import load_profile

        with user_errors():
            profile = load_profile(profile_name, "", None).profile if profile_name else None
            login = login_node(
                host,
                profile,
                params["remote_dir"],
                params["remote_clusterctl"],
                params["ssh_config"],
                params["accept_new_host_keys"],
                params["ssh_transport"],
            )
            sys.exit(run_clusterctl(login, forwarded_argv(click.get_current_context())))

    wrapper = click.option("--profile", help="Use this profile's login host (over SSH).")(wrapper)
    wrapper = click.option("--host", help="Run it on this login node over SSH.")(wrapper)
    return remote_options(wrapper)


def forwarded_argv(ctx: click.Context) -> list[str]:
    """The command line of CTX's command as the login node must run it (remote options out)."""
    assert ctx.command.name is not None
    argv = [ctx.command.name]
    for param in ctx.command.params:
        name = param.name
        value = ctx.params.get(name or "")
        if name in REMOTE_PARAMS or value is None or value is False:
            continue
        if isinstance(param, click.Argument):
            argv.append(str(value))
        elif isinstance(param, click.Option) and value != param.default:
            flag = max(param.opts, key=len)
            argv += [flag] if param.is_flag else [flag, str(value)]
    return argv


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option(
    "--watch",
    is_flag=True,
    help="Follow the job until it ends (phases, nodes, progress), then the status.",
)
def status(job_id: str, logs_root: Path, as_json: bool, watch: bool) -> None:
    """A job's state (SLURM), its phases with durations, and for a failed job the failed node,
    the cause and doctor's top explanation. Exit status: 0 running or succeeded, 1 failed."""
    with user_errors():
        check_job_id(job_id)
        if watch:
            from clusterctl.submit import follower, until_gone

            until_gone(job_id, follower(job_id, logs_root, click.echo))
        state = job_state(job_id)
        record = latest_run(job_id, logs_root)
        if state is None and record is None:
            raise UsageError(f"SLURM does not know job {job_id} and {logs_root} has no log of it")
    explanation = _doctor_top(job_id, logs_root) if record and record.status else None
    if as_json:
        click.echo(
            json.dumps(
                {
                    "slurm": asdict(state) if state else None,
                    "run": asdict(record) | {"directory": str(record.directory)}
                    if record
                    else None,
                    "explanation": explanation,
                },
                indent=2,
            )
        )
    else:
        _print_status(job_id, state, record, explanation)
    # an unreadable record cannot say the job succeeded
    failed = (record is not None and (bool(record.status) or bool(record.unreadable))) or (
        state is not None and state.state in ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    )
    sys.exit(1 if failed else 0)


def _print_status(
    job_id: str, state: object, record: RunRecord | None, explanation: dict[str, str] | None
) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from clusterctl.jobs.slurm import JobState

    # job names, causes and log lines are anyone's text: never read as rich markup
    console = Console(width=120)
    if isinstance(state, JobState):
        where = f" on {state.nodes}" if state.nodes else ""
        console.print(
            f"job {job_id} ({escape(printable(state.name))}): [bold]{escape(state.state)}[/]"
            f"{escape(printable(where))}, {escape(state.elapsed)}"
        )
    else:
        console.print(f"job {job_id}: SLURM no longer knows it; from its logs:")
    if record is None:
        console.print("no log directory yet (the job has not started)")
        return
    if record.unreadable:
        console.print(f"record unreadable: {printable(record.unreadable)}", markup=False)
    table = Table("phase", "started", "took", title=str(record.directory))
    for row in record.rows:
        took = "running" if row.seconds is None else f"{row.seconds:.1f}s"
        table.add_row(Text(printable(row.phase)), f"+{row.started:.1f}s", took)
    console.print(table)
    for warning in record.warnings:
        console.print(f"warning: {printable(warning)}", markup=False, highlight=False)
    if record.progress:
        progress = printable(record.progress[:110])
        console.print(f"progress: {progress}", markup=False, highlight=False)
    if record.link or record.next:
        before = f"continuation {record.link}, after job {record.previous}" if record.link else ""
        after = f"continued as job {record.next}" if record.next else "the chain ends here"
        console.print(f"chain: {', '.join(x for x in (before, after) if x)}")
    if record.status is None:
        return
    if record.status == 0:
        console.print("[green]succeeded[/]")
        return
    console.print(
        f"[bold red]failed[/] (status {record.status}): "
        + escape(printable(f"node {record.failed_node}: {record.cause}"))
    )
    for later in record.consequences:
        console.print(f"  then: {printable(later)}", markup=False)
    if explanation:
        said = printable(f"doctor: {explanation['meaning']}; fix: {explanation['fix']}")
        console.print(said, markup=False)
    else:
        console.print("doctor: no known failure signature in the logs beyond the cause above")


def _doctor_top(job_id: str, root: Path) -> dict[str, str] | None:
    """doctor's first explanation for the job's logs that says more than the FAIL line."""
    from clusterctl.doctor.scan import GENERIC, job_log_files, scan_files

    try:
        hits = scan_files(job_log_files(job_id, root), [])
    except UsageError:
        return None
    # clusterctl's own FAIL line: status prints it already
    specific = [h for h in hits if h.signature.id != GENERIC]
    if not specific:
        return None
    d = specific[0].as_dict()
    return {"id": str(d["id"]), "meaning": str(d["meaning"]), "fix": str(d["fix"])}


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--node", help="That node's container log (copied when the job failed).")
@click.option(
    "--phase",
    type=click.Choice(sorted(PHASE_LOGS)),
    help="The log that phase writes (default: batch, the job's whole log).",
)
def logs(job_id: str, logs_root: Path, follow: bool, node: str | None, phase: str | None) -> None:
    """Print a job's log: the batch log, one phase's log, or one node's container log."""
    with user_errors():
        dirs = run_directories(job_id, logs_root)
        if not dirs:
            raise UsageError(f"no log directory for job {job_id} under {logs_root}")
        if node and phase:
            raise UsageError("give --node or --phase, not both")
        if node:
            if not NODE_NAME.fullmatch(node):
                raise UsageError(f"--node {node!r}: a SLURM node name (letters, digits, _ . -)")
            path = dirs[-1] / "nodes" / node / "container.log"
            # a node's log is a file of this run: never a link out of it (/dev/zero, secrets)
            if not path.is_file() or not path.resolve().is_relative_to(dirs[-1].resolve()):
                raise UsageError(
                    f"no container log of {node} in {dirs[-1]} (nodes' logs are copied when "
                    "the job fails, or always with logs.copy_node_logs: always)"
                )
        else:
            path = dirs[-1] / PHASE_LOGS[phase or "batch"]
            if not path.exists() and not follow:
                raise UsageError(f"{path} does not exist (the job has not reached that phase)")
    _print_file(path, job_id, follow)


LOG_CHUNK = 1 << 20  # a log is copied a MiB at a time, never read whole into memory
SLURM_EVERY = 5.0  # seconds between asks of SLURM whether a followed job has ended


def _print_file(path: Path, job_id: str, follow: bool) -> None:
    # While the job runs, batch.log links to SLURM's output file, and at its end it is
    # replaced by the run's own lines: follow the file SLURM writes, which stays.
    if path.is_symlink():
        path = path.resolve()
    # one decoder for the whole file: a character split across two reads stays whole
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset = 0
    ended_at: float | None = None
    next_ask = 0.0
    while True:
        offset = _copy_new(path, offset, decoder)
        now = time.monotonic()
        if follow and ended_at is None and now >= next_ask:
            next_ask = now + SLURM_EVERY
            if has_ended(job_state(job_id)):
                ended_at = now  # read what the cleanup still writes, then stop
        if not follow or (ended_at is not None and now - ended_at > 2):
            sys.stdout.write(decoder.decode(b"", final=True))
            return
        time.sleep(0.5)


def _copy_new(path: Path, offset: int, decoder: codecs.IncrementalDecoder) -> int:
    """Write what PATH gained after OFFSET to stdout; the new offset. Only a regular file,
    never through a link (a FIFO or /dev/zero in the log directory is skipped, not read)."""
    try:
        handle = open_regular(path, follow_links=False)
    except OSError:
        return offset
    with handle:
        handle.seek(offset)
        while chunk := handle.read(LOG_CHUNK):
            text = decoder.decode(chunk)
            # to a terminal, a log's control sequences are shown, not obeyed (a pipe gets the
            # bytes as written)
            sys.stdout.write(printable(text, keep="\r") if sys.stdout.isatty() else text)
            offset += len(chunk)
    sys.stdout.flush()
    return offset


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
def cancel(job_id: str, logs_root: Path) -> None:
    """scancel the job and wait until SLURM ended it (its cleanup removes every container)."""
    with user_errors():
        check_job_id(job_id)
        scancel(job_id)
        deadline = time.monotonic() + CANCEL_DEADLINE
        # squeue lists the job until its cleanup ended (CG: completing)
        while queued(job_id):
            if time.monotonic() > deadline:
                raise UsageError(f"job {job_id} is still in the queue after {CANCEL_DEADLINE}s")
            time.sleep(0.5)
        state = job_state(job_id)
    click.echo(f"job {job_id} {state.state if state else 'ended'}")
    dirs = run_directories(job_id, logs_root)
    if dirs:
        click.echo(f"logs: {dirs[-1]}  (clusterctl status {job_id}, clusterctl down {job_id})")


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
@click.option("--nodes", "nodelist", help="The job's nodes (default: from SLURM or its logs).")
def down(job_id: str, logs_root: Path, nodelist: str | None) -> None:
    """Remove every container of a job on its nodes (by the clusterctl.job label), for a job
    that died without its own cleanup. Runs one srun step over those nodes."""
    with user_errors():
        check_job_id(job_id)
        state = job_state(job_id, strict=True)  # never remove a running job's containers
        if state is not None and not has_ended(state):
            raise UsageError(
                f"job {job_id} is {state.state}: cancel it (clusterctl cancel {job_id})"
            )
        nodes = nodelist or _nodes_from_logs(job_id, logs_root)
        if not nodes:
            raise UsageError(f"the nodes of job {job_id} are unknown: give --nodes")
        count = len(
            subprocess.run(
                ["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, check=True
            ).stdout.split()
        )
        from clusterctl.render.templates import render_template

        # the job's own sweep (templates/partials/sweep.sh.j2), run on each of its nodes
        sweep = render_template("partials/sweep.sh.j2") + 'cc_node_remove_job "$1"\n'
        cmd = ["srun", f"--nodelist={nodes}", f"--nodes={count}", f"--ntasks={count}",
               "--ntasks-per-node=1", "--time=5", f"--job-name=clusterctl-down-{job_id}",
               "bash", "-c", sweep, "_", job_id]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise UsageError(f"{shlex.join(cmd[:6])} ...: {proc.stderr.strip() or 'failed'}")
    click.echo(proc.stdout.rstrip())


def _nodes_from_logs(job_id: str, root: Path) -> str:
    """The node list the job wrote into its log directory (node-names.txt)."""
    names: list[str] = []
    for directory in run_directories(job_id, root):
        try:
            words = (directory / "node-names.txt").read_bytes().decode(errors="replace").split()
        except OSError:
            continue
        # a node name, never a list expression or an option (a planted file names no others)
        for name in words:
            if NODE_NAME.fullmatch(name) and name not in names:
                names.append(name)
    return ",".join(names)


@click.command(name="ls")
@on_login_node
@logs_root_option
def list_jobs(logs_root: Path) -> None:
    """The clusterctl jobs that have a log directory here, newest first, with their outcome."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("job", "name", "run", "outcome", "failed node: cause")
    dirs = sorted(
        (d for d in logs_root.glob("*-*") if d.is_dir()),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    for directory in dirs:
        parsed = parse_run_directory(directory.name)
        if parsed is None:
            continue  # not a run directory of job.sbatch's naming
        name, job_id, run = parsed.job_name, parsed.job_id, str(parsed.run)
        record = summarize(directory, read_timeline(directory))
        if record.unreadable:
            outcome = "record unreadable"
        elif record.status is None:
            state = job_state(job_id)
            outcome = state.state if state else "ended without a timeline end"
        else:
            outcome = "succeeded" if record.status == 0 else f"failed ({record.status})"
        cause = printable(f"{record.failed_node}: {record.cause}"[:80]) if record.cause else ""
        table.add_row(job_id, Text(printable(name)), run, Text(outcome), Text(cause))
    Console(width=140).print(table)


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
def wait(job_id: str, logs_root: Path) -> None:
    """Wait until the job has left the queue, showing its phases, nodes, self-test and
    progress meanwhile; exit with its status (0: it succeeded)."""
    from clusterctl.submit import ended_line, follower, report_line, wait_for_job

    with user_errors():
        check_job_id(job_id)
        code = wait_for_job(job_id, follower(job_id, logs_root, click.echo))
    click.echo(ended_line(job_id, code, logs_root))
    click.echo(report_line(job_id, logs_root))
    sys.exit(code)


@click.command()
@on_login_node
@click.argument("job_id")
@logs_root_option
@click.option(
    "-o",
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write it here (default: report.html in the job's log directory).",
)
def report(job_id: str, logs_root: Path, out_file: Path | None) -> None:
    """One self-contained HTML page of what happened: the outcome, time to the workload by
    phase, the phases node by node, the preflight, the self-test and doctor's findings."""
    from clusterctl.jobs.report import job_report

    with user_errors():
        check_job_id(job_id)
        written = job_report(job_id, logs_root, out_file)
    click.echo(f"wrote {written}")
