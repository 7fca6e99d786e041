"""The job judges itself first (issue 46 item 2): the framework's own start-up check, run by
job.sbatch in the job's own image on the first node, before any of the job's containers or
Ray start. What the script needs for it: the payload (its files as one tarball), the command
the image runs, and the settings a refusal can name, each with its line in the spec."""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from clusterctl.framework.judge import IN_IMAGE, PAYLOAD
from clusterctl.spec.loader import LoadedSpec
from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload


@dataclass(frozen=True)
class JobJudge:
    framework: str  # as users name it: verl, OpenRLHF
    argv: list[str]  # the image runs this (its first word the entrypoint)
    # (the name a framework's message may use, the setting with its line in the spec)
    settings: list[tuple[str, str]]
    docker_args: list[str]  # the job container's view: its mounts (read-only), workdir, env


def job_judge(spec: JobSpec, where: Mapping[str, str]) -> JobJudge | None:
    """The start-up check of the spec's framework, or None (a command workload, an entry
    point that is not the framework's own, or a verl config of the script's own, which only
    the job's files can compose)."""
    from clusterctl.lint.frameworks import verl_config
    from clusterctl.render.plan import openrlhf_args, verl_argv

    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        config, _why = verl_config(wl)
        if config is None:
            return None
        overrides = [a for a in verl_argv(spec, wl)[3:] if not a.startswith("--config-")]
        argv = ["python3", f"{IN_IMAGE}/verl_startup.py", wl.entrypoint, config, "--", *overrides]
        keys = [(k.lstrip("+~"), f'workload.overrides["{k}"]') for k in wl.overrides]
        return JobJudge("verl", argv, _with_lines(keys, where), _docker_args(spec))
    if isinstance(wl, OpenRLHFWorkload) and wl.entrypoint.startswith("openrlhf."):
        # "-": the release's parser is read from its files where the image's Python has it
        argv = ["python3", f"{IN_IMAGE}/openrlhf_startup.py", "-", wl.entrypoint, "--"]
        argv += openrlhf_args(wl)
        keys = [(k.lstrip("-"), f'workload.args["{k}"]') for k in wl.args]
        return JobJudge("OpenRLHF", argv, _with_lines(keys, where), _docker_args(spec))
    return None


def setting_lines(loaded: LoadedSpec) -> dict[str, str]:
    """setting -> "FILE:LINE" for each workload override or argument: what a refusal names."""
    out: dict[str, str] = {}
    wl = loaded.spec.workload
    for field in ("overrides", "args"):
        for key in getattr(wl, field, {}):
            file, line = loaded.where(("workload", field, key))
            if line is not None:
                out[f'workload.{field}["{key}"]'] = f"{file}:{line}"
    return out


def _docker_args(spec: JobSpec) -> list[str]:
    """What the job's containers see of the node, read-only; no network, no GPUs (the check
    reads configs on the CPU)."""
    from clusterctl.render.plan import container_env

    args: list[str] = []
    for mount in spec.container.mounts:
        args += ["--volume", f"{mount.source}:{mount.target}:ro"]
    if spec.container.workdir:
        args += ["--workdir", spec.container.workdir]
    for name, value in container_env(spec).items():
        args += ["--env", f"{name}={value}"]
    return args


def _with_lines(keys: list[tuple[str, str]], where: Mapping[str, str]) -> list[tuple[str, str]]:
    """Longest name first: a message naming `data.train_batch_size` names that setting, not
    `data.train_batch`."""
    named = [(k, f"{s} ({where[s]})" if s in where else s) for k, s in keys]
    return sorted(named, key=lambda item: len(item[0]), reverse=True)


@cache
def payload_tarball() -> str:
    """The payload's files as one gzip'd tar, base64: the same bytes for the same files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(PAYLOAD.glob("*.py")):
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    # gzip writes the time into its header: zero it, so a render is the same bytes each time
    raw = bytearray(buffer.getvalue())
    raw[4:8] = b"\0\0\0\0"
    return base64.b64encode(bytes(raw)).decode()
