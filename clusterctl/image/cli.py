"""``clusterctl build SPEC`` and ``clusterctl image save | load``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clusterctl.console import load_checked, set_option, user_errors
from clusterctl.errors import UsageError
from clusterctl.image.build import BuildEvent


def _build_args(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--build-arg {pair!r}: expected NAME=VALUE")
        out[key] = value
    return out


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--context",
    type=click.Path(file_okay=False, path_type=Path),
    help="Build context (default: the spec's directory); holds container.build.wheelhouse.",
)
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), help="Bundle directory.")
@click.option("--tag", "tags", multiple=True, help="Another tag for the image (repeatable).")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE")
@click.option("--no-cache", is_flag=True, help="Do not use the engine's build cache.")
@set_option
def build(
    spec: str,
    context: Path | None,
    out_dir: str | None,
    tags: tuple[str, ...],
    build_args: tuple[str, ...],
    no_cache: bool,
    assignments: tuple[str, ...],
) -> None:
    """Build SPEC's image from the Dockerfile render puts in the bundle (Docker engine),
    tagged container.image; print its ID and write the bundle with the image pinned
    (container.image_id) and image.json, so the job refuses nodes holding another image."""
    from rich.console import Console
    from rich.markup import escape

    from clusterctl.image.build import build_image
    from clusterctl.render.bundle import add_file, render_bundle, write_bundle

    console = Console(stderr=True, highlight=False)

    def show(event: BuildEvent) -> None:
        if event.kind == "step":
            console.print(f"[bold]step {event.step}/{event.steps}[/] {escape(event.text)}")
        elif event.kind == "output":
            console.print(f"  {event.text}", style="dim", markup=False)

    with user_errors():
        loaded = load_checked(spec, assignments)
        build_spec = loaded.spec.container.build
        if build_spec is None:
            raise UsageError(f"{spec}: container.build is not set; there is no Dockerfile to build")
        dockerfile_name = f"Dockerfile.{build_spec.dockerfile}"
        dockerfile = render_bundle(loaded.spec).files[dockerfile_name].content
        where = context or Path(spec).parent
        if build_spec.wheelhouse and not (where / build_spec.wheelhouse).is_dir():
            raise UsageError(
                f"container.build.wheelhouse: {where / build_spec.wheelhouse} is not a directory "
                "(the wheelhouse lies in the build context: --context)"
            )
        image = loaded.spec.container.image
        ship = (build_spec.wheelhouse,) if build_spec.wheelhouse else ()
        result = build_image(
            dockerfile, where, [image, *tags], _build_args(build_args), no_cache, show, ship=ship
        )
        pinned = loaded.spec.model_copy(deep=True)
        pinned.container.image_id = result.image_id
        bundle = render_bundle(pinned)
        info = {"image": image, "id": result.image_id, "tags": list(result.tags),
                "dockerfile": dockerfile_name, "context": str(where.absolute())}  # fmt: skip
        add_file(bundle, "image.json", json.dumps(info, indent=2) + "\n")
        target = write_bundle(bundle, out_dir or f"{loaded.spec.slurm.job_name}.bundle")
    click.echo(f"built {image} {result.image_id} ({result.steps} steps)")
    click.echo(f"wrote {target}/ (image.json; job.sbatch pins container.image_id)")
    click.echo(f"pin it in the spec too: container.image_id: {result.image_id}")


@click.group()
def image() -> None:
    """Move images without a registry: save to a tarball on shared storage, load it."""


@image.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Tarball to write (default: container.load_from); .gz compresses.",
)
@set_option
def save(spec: str, output: Path | None, assignments: tuple[str, ...]) -> None:
    """docker save SPEC's container.image into a tarball and its image ID into TARBALL.id;
    a job with container.pull: load then loads it on every node that lacks that image."""
    from clusterctl.image.archive import id_file, save_image

    with user_errors():
        loaded = load_checked(spec, assignments)
        container = loaded.spec.container
        path = output or (Path(container.load_from) if container.load_from else None)
        if path is None:
            raise UsageError("give -o TARBALL, or set container.load_from in the spec")
        saved = save_image(container.image, path)
    click.echo(f"saved {saved.image} {saved.image_id} to {saved.path} ({saved.size} bytes)")
    click.echo(f"wrote {id_file(saved.path)}")


@image.command()
@click.argument("tarball", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--image", "image_ref", help="The image the tarball must hold under its tag.")
def load(tarball: Path, image_ref: str | None) -> None:
    """docker load TARBALL into this machine's engine; its ID is checked against TARBALL.id."""
    from clusterctl.image.archive import load_image

    with user_errors():
        image_id = load_image(tarball, image_ref)
    click.echo(f"loaded {image_ref or tarball.name} {image_id}")
