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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from clusterctl import __version__
from clusterctl.errors import UsageError
from clusterctl.framework.in_job import job_judge, payload_tarball
from clusterctl.lint.workload import openrlhf_weight_sync
from clusterctl.render.payload import joined
from clusterctl.render.placement import placement_shapes
from clusterctl.render.plan import JobPlan, build_plan
from clusterctl.render.templates import render_template
from clusterctl.spec.images import base_image, build_requirements
from clusterctl.spec.models import PORT_BLOCK, JobSpec, OpenRLHFWorkload
from clusterctl.spec.presets import PRESETS, busbw_floor
from clusterctl.verify.expect import expect_json

SCRIPT = "job.sbatch"
RESOLVED_SPEC = "spec.resolved.yaml"
MANIFEST = "manifest.json"
GENERATOR = "clusterctl"  # the manifest's marker: only such directories are ever replaced


@dataclass(frozen=True)
class BundleFile:
    content: str
    mode: int = 0o666  # written less the umask


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


def judges_source() -> str:
    """The node checks' judges (clusterctl/verify/judges) as the one source the batch host
    runs: python3 - DIR EXPECT [STARTED ENDED]."""
    return joined("clusterctl.verify.judges", "run", "main(_sys.argv[1:])")


def ray_wait_source() -> str:
    """The Ray waiter (clusterctl/runtime) as the one source the head container runs."""
    return joined("clusterctl.runtime", "ray_wait")


def busbw_threshold(spec: JobSpec, ranks_per_node: int) -> tuple[float, str, str]:
    """The all-reduce threshold, whose it is, and a note when a public floor was not applied."""
    st = spec.selftest
    if st.min_busbw_gbps is not None:
        return st.min_busbw_gbps, "selftest.min_busbw_gbps", ""
    preset = PRESETS[spec.hardware.preset]
    floor, note = busbw_floor(preset, spec.slurm.nodes, ranks_per_node, st.size_mb)
    if floor is None:
        return 0.0, "", note
    return floor.gbps, f"the {preset.name} floor at {floor.size_mb} MB ({floor.source})", ""


def selftest_args(spec: JobSpec) -> list[str]:
    st = spec.selftest
    ranks_per_node = (spec.ray.num_gpus or 1) if st.backend == "nccl" else 1
    threshold, whose, note = busbw_threshold(spec, ranks_per_node)
    args = [
        "--selftest-deadline",
        str(st.deadline),
        "--selftest-size-mb",
        str(st.size_mb),
        "--selftest-backend",
        str(st.backend),
        # nccl: one rank per GPU, as the workload's collectives run; gloo: one per node
        "--ranks-per-node",
        str(ranks_per_node),
        "--min-busbw-gbps",
        f"{threshold:g}",
        "--min-busbw-source",
        whose,
        "--busbw-note",
        note,
        "--weight-sync-mb",
        str(st.weight_sync_mb),
        # the weight-sync group is made as the framework makes it (ray_wait.WEIGHT_SYNC)
        "--weight-sync-path",
        openrlhf_weight_sync(spec.workload)
        if isinstance(spec.workload, OpenRLHFWorkload)
        else "torch",
    ]
    if spec.hardware.logical_gpus:
        args.append("--logical-gpus")  # device calls are named skips, not failures
    shapes = placement_shapes(spec)
    if shapes:
        placement = [shape.as_json() for shape in shapes]
        args += ["--placement", json.dumps(placement, separators=(",", ":"))]
    return args


def _script_context(spec: JobSpec, where: Mapping[str, str]) -> dict[str, object]:
    data = spec.model_dump(mode="json")
    judge = job_judge(spec, where)
    return {
        "judge": judge,
        "framework_payload": payload_tarball() if judge else "",
        "spec": spec,
        "plan": build_plan(spec),
        "spec_hash": _sha256(json.dumps(data, sort_keys=True)),
        "version": __version__,
        "ray_wait_py": ray_wait_source(),
        "selftest_args": selftest_args(spec),
        "port_block": PORT_BLOCK,
        "verify_expect": expect_json(spec),
        "judges_py": judges_source(),
    }


def render_gather_script(spec: JobSpec) -> str:
    """The script `clusterctl verify` runs on every node: the job's own settings and node
    functions (its address rule, its port check), then the gather (prints, changes nothing)."""
    return render_template("verify.sh.j2", **{**_script_context(spec, {}), "ray_wait_py": ""})


def render_bundle(spec: JobSpec, where: Mapping[str, str] | None = None) -> Bundle:
    """Render every artifact of the spec in memory (nothing is written). WHERE: each workload
    setting's FILE:LINE in the spec, which the job names when its framework refuses it."""
    data = spec.model_dump(mode="json")
    resolved = resolved_spec_yaml(data)
    spec_hash = _sha256(json.dumps(data, sort_keys=True))
    plan = build_plan(spec)
    bundle = Bundle(spec=spec, plan=plan, spec_hash=spec_hash)
    script = render_template("job.sbatch.j2", **_script_context(spec, where or {}))
    bundle.files[SCRIPT] = BundleFile(script, 0o777)  # less the umask
    build = spec.container.build
    if build is not None:
        name = f"Dockerfile.{build.dockerfile}"
        bundle.files[name] = BundleFile(
            render_template(
                f"{name}.j2",
                spec=spec,
                build=build,
                base_image=base_image(build),
                version=__version__,
                requirements=build_requirements(spec),
            )
        )
    bundle.files[RESOLVED_SPEC] = BundleFile(resolved)
    return add_file(bundle, MANIFEST, "")


def add_file(bundle: Bundle, name: str, content: str) -> Bundle:
    """Add a file (e.g. the build's image.json) and reseal the manifest over every file."""
    if name != MANIFEST:
        bundle.files[name] = BundleFile(content)
    files = {n: _sha256(f.content) for n, f in sorted(bundle.files.items()) if n != MANIFEST}
    manifest = {
        "generator": GENERATOR,
        "clusterctl_version": __version__,
        "spec_sha256": bundle.spec_hash,
        "files": files,
    }
    bundle.files[MANIFEST] = BundleFile(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return bundle


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def is_clusterctl_bundle(directory: Path) -> bool:
    """True only for a directory clusterctl wrote and nobody changed since: its manifest has
    clusterctl's marker, lists exactly the files present, and every hash matches."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        present = {p.name for p in directory.iterdir()}
        listed = manifest["files"]
        if manifest.get("generator") != GENERATOR or present != {*listed, MANIFEST}:
            return False
        return all(
            (directory / name).is_file()
            and not (directory / name).is_symlink()
            and hashlib.sha256((directory / name).read_bytes()).hexdigest() == digest
            for name, digest in listed.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _refuse_target(target: Path) -> str | None:
    """Why ``target`` may not receive a bundle, or None."""
    if target.is_symlink():
        return f"{target} is a symbolic link; give the real directory"
    if not target.exists():
        return None
    if not target.is_dir():
        return f"{target} exists and is not a directory"
    resolved, here = target.resolve(), Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        return f"{target} holds the current directory; choose another -o"
    if any(target.iterdir()) and not is_clusterctl_bundle(target):
        return (
            f"{target} exists and is not an unchanged clusterctl bundle; choose another -o "
            "(clusterctl replaces only directories it wrote itself)"
        )
    return None


def write_bundle(bundle: Bundle, out_dir: str | Path) -> Path:
    """Write the bundle to ``out_dir`` atomically: all files appear at once or none do.

    Only an empty directory or an unchanged bundle that clusterctl wrote is replaced; files
    get the modes the umask allows. Every failure is a UsageError naming the path.
    """
    target = Path(out_dir)
    try:
        reason = _refuse_target(target)
        if reason:
            raise UsageError(reason)
        _write_atomically(bundle, target.absolute())
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _write_atomically(bundle: Bundle, target: Path) -> None:
    mask = _current_umask()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    old: Path | None = None
    try:
        for name, bundle_file in bundle.files.items():
            path = staging / name
            path.write_text(bundle_file.content, encoding="utf-8")
            path.chmod(bundle_file.mode & ~mask)
        staging.chmod(0o777 & ~mask)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / "bundle")
            try:
                os.replace(staging, target)
            except OSError:
                os.replace(old / "bundle", target)  # put the previous bundle back
                raise
        else:
            os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
