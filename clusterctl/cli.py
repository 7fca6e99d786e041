"""The clusterctl command line.

Heavy libraries (ray, docker, paramiko, rich tables) are imported inside the commands that
need them, so ``clusterctl --help`` and ``clusterctl validate`` stay fast.
"""

from __future__ import annotations

import dataclasses
import posixpath
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import click

from clusterctl import __version__
from clusterctl.console import load_checked, set_option, user_errors, write_new_file
from clusterctl.remote import DEFAULT_REMOTE_DIR, login_node, remote_options
from clusterctl.spec.presets import PresetName

if TYPE_CHECKING:
    from clusterctl.spec.loader import LoadedSpec
    from clusterctl.ssh import Transport

F = TypeVar("F", bound=Callable[..., Any])


def out_option(func: F) -> F:
    return click.option(
        "-o",
        "--out",
        "out_dir",
        type=click.Path(file_okay=False),
        help="Bundle directory (default: ./<job_name>.bundle).",
    )(func)


def allow_option(func: F) -> F:
    return click.option(
        "--allow",
        "allowed",
        multiple=True,
        metavar="RULE",
        help="Let this lint rule fail without blocking (repeatable); adds to lint.allow.",
    )(func)


def _resolve_packages(loaded: LoadedSpec) -> None:
    from clusterctl.errors import SpecError
    from clusterctl.spec.resolve import gather_resolution, judge_resolution

    found = gather_resolution(loaded.spec)
    if not found.ran:
        click.echo(f"note: pip resolution did not run: {found.reason}", err=True)
        return
    problems = [
        loaded.problem(path, message) for path, message in judge_resolution(loaded.spec, found)
    ]
    if problems:
        raise SpecError(problems)
    key = {"torch", "vllm", "ray", "verl", "openrlhf", "flash-attn", "deepspeed"}
    shown = ", ".join(f"{n} {v}" for n, v in found.installed if n.lower() in key)
    click.echo(
        f"note: pip {found.pip_version} resolves the image's {len(found.installed)} packages "
        f"on {found.base} (Python {found.python}): {shown}",
        err=True,
    )
    if found.source_only:
        click.echo(
            f"note: source-only, built in the image (their own metadata stood in): "
            f"{', '.join(found.source_only)}",
            err=True,
        )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="clusterctl")
def main() -> None:
    """Start multi-node verl / OpenRLHF jobs reliably on SLURM clusters that run Docker.

    One YAML spec is validated, linted and rendered into an sbatch script that starts one
    container per node, brings up Ray, checks every node joined, and only then trains.
    """


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@set_option
@allow_option
@click.option(
    "--inspect-image",
    is_flag=True,
    help="Read the versions installed in container.image (a local image; Docker) and "
    "compare them with versions:.",
)
@click.option(
    "--resolve-packages",
    is_flag=True,
    help="Ask pip whether the Dockerfile's packages install on the base image's Python and "
    "platform (a dry run against the package index; about a minute).",
)
def validate(
    spec: str,
    assignments: tuple[str, ...],
    allowed: tuple[str, ...],
    inspect_image: bool,
    resolve_packages: bool,
) -> None:
    """Check SPEC: schema, contradictions between sections, lint rules, and the frameworks'
    own start-up checks where the pinned release is available."""
    with user_errors():
        loaded = load_checked(spec, assignments, allowed)
        if inspect_image:
            from clusterctl.errors import SpecError
            from clusterctl.spec.inspect import gather_image_versions, judge_image_versions

            found = gather_image_versions(loaded.spec.container.image)
            problems = [
                loaded.problem(path, message)
                for path, message in judge_image_versions(loaded.spec, found)
            ]
            if problems:
                raise SpecError(problems)
            shown = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
            click.echo(f"note: {loaded.spec.container.image} holds {shown}", err=True)
        if resolve_packages:
            _resolve_packages(loaded)
        from clusterctl.lint.frameworks import fidelity_notes
        from clusterctl.lint.memory import memory_note

        for note in [*fidelity_notes(loaded.spec), memory_note(loaded.spec)]:
            click.echo(f"note: {note}", err=True)
    s = loaded.spec
    click.echo(
        f"{spec}: ok ({s.slurm.nodes} nodes x {s.slurm.gpus_per_node} GPUs, "
        f"{s.hardware.preset}, {s.workload.framework})"
    )


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@out_option
@click.option("--stdout", "to_stdout", is_flag=True, help="Print job.sbatch instead of writing.")
@set_option
@allow_option
def render(
    spec: str,
    out_dir: str | None,
    to_stdout: bool,
    assignments: tuple[str, ...],
    allowed: tuple[str, ...],
) -> None:
    """Render SPEC into a bundle: job.sbatch, Dockerfile (if a build is set), resolved spec."""
    from clusterctl.framework.in_job import setting_lines
    from clusterctl.render import render_bundle, write_bundle

    with user_errors():
        loaded = load_checked(spec, assignments, allowed)
        bundle = render_bundle(loaded.spec, setting_lines(loaded))
        if to_stdout:
            click.echo(bundle.script, nl=False)
            return
        target = write_bundle(bundle, out_dir or f"{loaded.spec.slurm.job_name}.bundle")
    click.echo(f"wrote {target}/: {', '.join(sorted(bundle.files))}")


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@out_option
@click.option(
    "--dry-run", is_flag=True, help="Print the sbatch command and script; submit nothing."
)
@click.option("--wait", is_flag=True, help="Follow the job and return its exit status.")
@click.option(
    "--host",
    help="Submit on this login node over SSH (an ssh config alias; default: the profile's "
    "login_host).",
)
@click.option("--local", is_flag=True, help="Submit here even if the profile names a login host.")
@remote_options
@set_option
@allow_option
def submit(
    spec: str,
    out_dir: str | None,
    dry_run: bool,
    wait: bool,
    host: str | None,
    local: bool,
    remote_dir: str | None,
    remote_clusterctl: str | None,
    ssh_config: Path | None,
    ssh_transport: Transport | None,
    accept_new_host_keys: bool,
    assignments: tuple[str, ...],
    allowed: tuple[str, ...],
) -> None:
    """Render SPEC and submit the bundle's job.sbatch with sbatch: here, or on a login node
    over SSH (the bundle sent as a tar stream into a directory of its own)."""
    from clusterctl.framework.in_job import setting_lines
    from clusterctl.render import render_bundle, write_bundle
    from clusterctl.submit import sbatch_command, submit_bundle

    with user_errors():
        loaded = load_checked(spec, assignments, allowed)
        bundle = render_bundle(loaded.spec, setting_lines(loaded))
        profile = loaded.profile.profile if loaded.profile else None
        login = None
        if not local and (host or (profile and profile.login_host)):
            login = login_node(
                host,
                profile,
                remote_dir,
                remote_clusterctl,
                ssh_config,
                accept_new_host_keys,
                ssh_transport,
            )
        target = Path(out_dir or f"{loaded.spec.slurm.job_name}.bundle")
        if dry_run:
            where = f"# on {login.host}, in {login.remote_dir}: " if login else "# "
            click.echo(where + " ".join(sbatch_command(target)))
            click.echo(bundle.script, nl=False)
            return
        if login is None:
            write_bundle(bundle, target)
            sys.exit(submit_bundle(target, wait, click.echo, Path(loaded.spec.logs.dir)))
        from clusterctl.remote import run_clusterctl, submit_remote

        done = submit_remote(bundle, login)
        job = done.job_id
        again = f" --host {login.host}" + (
            f" --remote-dir {done.remote_dir}" if login.remote_dir != DEFAULT_REMOTE_DIR else ""
        )
        click.echo(f"submitted job {job} on {login.host} ({done.bundle_dir}/job.sbatch)")
        logs_dir = posixpath.join(done.remote_dir, loaded.spec.logs.dir)
        click.echo(f"logs: {logs_dir}/{loaded.spec.slurm.job_name}-{job}")
        click.echo(f"next: clusterctl status {job}{again}; clusterctl logs {job} -f{again}; "
                   f"clusterctl cancel {job}{again}")  # fmt: skip
        if wait:
            at_job = dataclasses.replace(login, remote_dir=done.remote_dir)
            sys.exit(run_clusterctl(at_job, ["wait", job, "--logs-root", loaded.spec.logs.dir]))


@main.command()
def schema() -> None:
    """Print the JSON Schema of the spec (for editors and yaml-language-server)."""
    import json

    from clusterctl.spec.models import spec_json_schema

    click.echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))


@main.command()
@click.option(
    "--preset",
    type=click.Choice(list(get_args(PresetName))),  # every preset the schema accepts
    default="none",
    show_default=True,
)
@click.option(
    "--framework",
    type=click.Choice(["verl", "openrlhf", "command"]),
    default="verl",
    show_default=True,
)
@click.option("--nodes", type=click.IntRange(1, 4096), default=2, show_default=True)
@click.option(
    "-o",
    "--out",
    "out_file",
    type=click.Path(dir_okay=False),
    default="-",
    help="Write the starter spec here (default: stdout).",
)
def init(preset: str, framework: str, nodes: int, out_file: str) -> None:
    """Write a commented starter spec for a preset and framework."""
    from clusterctl.starter import starter_spec

    text = starter_spec(preset, framework, nodes)
    if out_file == "-":
        click.echo(text, nl=False)
        return
    with user_errors():
        write_new_file(Path(out_file), text)
    click.echo(f"wrote {out_file}")


def _register_optional_commands() -> None:
    """Commands that live in their own modules."""
    from clusterctl.devcluster.cli import dev_cluster
    from clusterctl.doctor.cli import doctor
    from clusterctl.image.cli import build, image
    from clusterctl.importer.cli import import_command
    from clusterctl.jobs.cli import cancel, down, list_jobs, logs, report, status, wait
    from clusterctl.lint.cli import rules
    from clusterctl.memory.cli import plan_command
    from clusterctl.verify.cli import verify

    main.add_command(rules)
    main.add_command(build)
    main.add_command(image)
    main.add_command(verify)
    main.add_command(doctor)
    main.add_command(dev_cluster)
    main.add_command(import_command)
    main.add_command(plan_command)
    for command in (status, logs, wait, cancel, down, list_jobs, report):
        main.add_command(command)


_register_optional_commands()
