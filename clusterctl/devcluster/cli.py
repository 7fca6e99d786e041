"""``clusterctl dev-cluster up|down|status``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clusterctl.console import user_errors


def _say(message: str) -> None:
    click.echo(f"dev-cluster: {message}", err=True)


@click.group("dev-cluster")
def dev_cluster() -> None:
    """A real SLURM + Docker + Ray cluster on this host (root), for trying clusterctl."""


@dev_cluster.command()
@click.option("--nodes", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option(
    "--install/--no-install",
    default=True,
    show_default=True,
    help="apt-get install missing packages (slurm-wlm, munge, docker.io, debootstrap).",
)
@click.option(
    "--image/--no-image",
    default=True,
    show_default=True,
    help="Build the CPU image clusterctl/dev:latest if it is missing.",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(0, 64),
    default=0,
    show_default=True,
    help="Offer K GPUs per node as SLURM gres with no device behind them, so GPU presets' "
    "jobs ask SLURM for GPUs for real; their specs declare the GPUs to Ray with "
    "hardware.logical_gpus (README: the GPU-shaped dev cluster).",
)
def up(nodes: int, install: bool, image: bool, gpus_per_node: int) -> None:
    """Start munge, dockerd, slurmctld and N slurmd; build the image. Idempotent."""
    from clusterctl.devcluster import cluster

    with user_errors():
        cluster.up(nodes, _say, install=install, image=image, gpus_per_node=gpus_per_node)


@dev_cluster.command()
@click.option(
    "--purge",
    is_flag=True,
    help="Also remove the dev cluster's state, images and caches (wheels, judges, pip).",
)
def down(purge: bool) -> None:
    """Cancel jobs, stop SLURM and the tests' Docker engines, remove clusterctl containers;
    say what stays on disk."""
    from clusterctl.devcluster import cluster

    with user_errors():
        cluster.down(_say, purge)


@dev_cluster.command()
def status() -> None:
    """What runs: munge, dockerd, slurmctld, nodes, image. Exit 1 unless all are up."""
    from clusterctl.devcluster import cluster

    st = cluster.status()
    rows = [
        ("munge", st.munge),
        ("docker (host networking)", st.docker and not st.docker_bridges),
        ("slurmctld", st.slurmctld),
        (f"image {cluster.DEV_IMAGE}", st.image),
    ]
    for name, good in rows:
        click.echo(f"{'ok  ' if good else 'DOWN'} {name}")
    for node, state in sorted(st.nodes.items()):
        gres = f" ({st.gres[node]})" if node in st.gres else ""
        click.echo(
            f"{'ok  ' if state.rstrip('*~#') in ('idle', 'mix', 'alloc') else 'DOWN'} "
            f"{node}: {state}{gres}"
        )
    click.echo(f"SLURM_CONF={cluster.SLURM_CONF}")
    healthy = all(good for _, good in rows) and bool(st.nodes)
    sys.exit(0 if healthy else 1)


@dev_cluster.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def assets(directory: Path) -> None:
    """Make what verl trains on here, with no model hub: a tokenizer, a tiny random Qwen2, a
    parquet data set and a reward function, under DIRECTORY (absolute: it is mounted into a
    container). Builds the dev verl image (verl 0.5.0 on CPU) first if it is not current."""
    from clusterctl.devcluster import verl_image

    with user_errors():
        verl_image.make_assets(directory, _say)
