"""Shared fixtures. Tests marked `cluster` use the real dev cluster (SLURM, munge, dockerd)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# sbatch, squeue and scancel in the tests talk to the dev cluster even where
# /etc/slurm/slurm.conf belongs to something else.
_DEV_CONF = Path(os.environ.get("CLUSTERCTL_DEV_DIR", "/var/tmp/clusterctl-dev")) / "slurm.conf"
if _DEV_CONF.exists():
    os.environ.setdefault("SLURM_CONF", str(_DEV_CONF))


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the installed `clusterctl` command as a user would."""
    return subprocess.run(
        ["clusterctl", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=timeout,
        check=False,
    )


def assert_shell_clean(script: Path) -> None:
    """bash parses the script and shellcheck (style level) finds nothing in it."""
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    check = subprocess.run(
        ["shellcheck", "--severity=style", str(script)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout


# How scripts/test.sh brings the dev cluster up: 4 nodes, each offering 8 GPUs as SLURM gres
# (no device behind them; the GPU presets' jobs declare them to Ray with logical GPUs)
DEV_CLUSTER_UP = ("--nodes", "4", "--gpus-per-node", "8")


@pytest.fixture(scope="session")
def dev_cluster() -> None:
    """The real local cluster must be up (`clusterctl dev-cluster up` DEV_CLUSTER_UP)."""
    status = subprocess.run(
        ["clusterctl", "dev-cluster", "status"], capture_output=True, text=True, check=False
    )
    if status.returncode != 0 or "(gpu:8)" not in status.stdout:
        pytest.fail(
            "the dev cluster is not up; run `clusterctl dev-cluster up "
            f"{' '.join(DEV_CLUSTER_UP)}` first:\n{status.stdout}{status.stderr}"
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the package-index resolution (tests/test_resolve.py) now, in the background at
    nice 19, when its tests are selected: it overlaps the end-to-end tests' waiting."""
    for item in session.items:
        module = getattr(item, "module", None)
        if item.get_closest_marker("index") and hasattr(module, "start_in_background"):
            out = Path(tempfile.mkdtemp(prefix="clusterctl-resolve-")) / "resolved.json"
            module.start_in_background(out)
            return


@pytest.fixture(scope="module")
def verl_python(monkeypatch_module: pytest.MonkeyPatch) -> str:
    """A Python with verl 0.9.1 and its dependencies (scripts/framework-judges.sh: the first
    of the Pythons it names)."""
    pythons = (
        os.environ.get("CLUSTERCTL_VERL_PYTHON")
        or subprocess.run(
            ["bash", str(ROOT / "scripts" / "framework-judges.sh")],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    monkeypatch_module.setenv("CLUSTERCTL_VERL_PYTHON", pythons)
    return pythons.split(os.pathsep)[0]


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch
