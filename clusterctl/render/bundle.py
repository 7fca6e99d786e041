"""A bundle: every file ``render`` writes, built in memory first, then written atomically.

``render_bundle`` is the dry run; ``write_bundle`` and submission use its result unchanged,
so what a user previews is byte for byte what runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from clusterctl import __version__
from clusterctl.errors import UsageError
from clusterctl.render.plan import JobPlan, build_plan
from clusterctl.render.templates import render_template
from clusterctl.spec.models import JobSpec

SCRIPT = "job.sbatch"
RESOLVED_SPEC = "spec.resolved.yaml"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BundleFile:
    content: str
    mode: int = 0o644


@dataclass
class Bundle:
    """The rendered artifacts, by file name."""

    spec: JobSpec
    plan: JobPlan
    spec_hash: str
    files: dict[str, BundleFile] = field(default_factory=dict)

    @property
    def script(self) -> str:
        return self.files[SCRIPT].content


def resolved_spec_yaml(data: dict[str, object]) -> str:
    """The dumped spec as YAML, keys in model order."""
    header = "# The spec with every default filled in, as clusterctl rendered it.\n"
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def ray_wait_source() -> str:
    return resources.files("clusterctl.runtime").joinpath("ray_wait.py").read_text()


def selftest_args(spec: JobSpec) -> list[str]:
    st = spec.selftest
    return [
        "--selftest-deadline",
        str(st.deadline),
        "--selftest-size-mb",
        str(st.size_mb),
        "--selftest-backend",
        st.backend,
        "--min-busbw-gbps",
        f"{st.min_busbw_gbps:g}",
    ]


def render_bundle(spec: JobSpec) -> Bundle:
    """Render every artifact of the spec in memory (nothing is written)."""
    data = spec.model_dump(mode="json")
    resolved = resolved_spec_yaml(data)
    spec_hash = _sha256(json.dumps(data, sort_keys=True))
    plan = build_plan(spec)
    bundle = Bundle(spec=spec, plan=plan, spec_hash=spec_hash)
    script = render_template(
        "job.sbatch.j2",
        spec=spec,
        plan=plan,
        spec_hash=spec_hash,
        version=__version__,
        ray_wait_py=ray_wait_source(),
        selftest_args=selftest_args(spec),
    )
    bundle.files[SCRIPT] = BundleFile(script, 0o755)
    build = spec.container.build
    if build is not None:
        name = f"Dockerfile.{build.dockerfile}"
        bundle.files[name] = BundleFile(
            render_template(f"{name}.j2", spec=spec, build=build, version=__version__)
        )
    bundle.files[RESOLVED_SPEC] = BundleFile(resolved)
    manifest = {
        "clusterctl_version": __version__,
        "spec_sha256": spec_hash,
        "files": {name: _sha256(f.content) for name, f in sorted(bundle.files.items())},
    }
    bundle.files[MANIFEST] = BundleFile(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return bundle


def write_bundle(bundle: Bundle, out_dir: str | Path) -> Path:
    """Write the bundle to ``out_dir`` atomically: all files appear at once or none do.

    An existing bundle directory (one with a manifest) is replaced; any other non-empty
    directory is refused rather than overwritten.
    """
    target = Path(out_dir)
    if target.exists() and (
        not target.is_dir() or (any(target.iterdir()) and not (target / MANIFEST).is_file())
    ):
        raise UsageError(f"{target} exists and is not a clusterctl bundle; choose another -o")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, bundle_file in bundle.files.items():
            path = staging / name
            path.write_text(bundle_file.content, encoding="utf-8")
            path.chmod(bundle_file.mode)
        staging.chmod(0o755)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / "bundle")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
