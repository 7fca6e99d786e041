"""Submit a rendered bundle: the same files a dry run shows, handed to sbatch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from clusterctl.errors import UsageError
from clusterctl.render.bundle import SCRIPT


def sbatch_command(bundle_dir: Path, wait: bool) -> list[str]:
    return ["sbatch", "--parsable", *(["--wait"] if wait else []), str(bundle_dir / SCRIPT)]


def submit_bundle(bundle_dir: Path, wait: bool) -> int:
    """Run sbatch on the bundle's script; returns sbatch's exit status."""
    if shutil.which("sbatch") is None:
        raise UsageError("sbatch not found: submit from a SLURM login node (or use render)")
    return subprocess.run(sbatch_command(bundle_dir, wait), check=False).returncode
