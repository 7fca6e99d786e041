"""The ``resume:`` section as each framework's own checkpoint and resume options.

One place says where checkpoints go, how often they are saved, and that a run starts from
the newest one; this module writes that as the framework spells it, so the framework's own
checks (verl's validate_config, OpenRLHF's parser) judge the result like any other setting.

- verl (ppo_trainer.yaml, verl 0.4-0.9.1): trainer.default_local_dir, trainer.save_freq,
  trainer.resume_mode (auto: the newest checkpoint in default_local_dir; disable).
- OpenRLHF < 0.10.2 (train_ppo_ray.py 0.9.10): --ckpt_path, --save_steps, --load_checkpoint;
  >= 0.10.2 (0.11.2): --ckpt.path, --ckpt.save_steps, --ckpt.load_enable.
- command: CLUSTERCTL_CHECKPOINT_DIR, CLUSTERCTL_SAVE_EVERY, CLUSTERCTL_RESUME in the
  containers' environment, for the user's own program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import Version

from clusterctl.spec.presets import parse_version

if TYPE_CHECKING:
    from clusterctl.spec.models import JobSpec, OverrideValue

# OpenRLHF 0.10.2 switched from flat (--actor_num_nodes) to dotted (--actor.num_nodes) flags.
OPENRLHF_DOTTED_SINCE = Version("0.10.2")
OPENRLHF_NAMES = {  # setting -> (flat, dotted)
    "dir": ("ckpt_path", "ckpt.path"),
    "every": ("save_steps", "ckpt.save_steps"),
    "resume": ("load_checkpoint", "ckpt.load_enable"),
}
VERL_NAMES = {
    "dir": "trainer.default_local_dir",
    "every": "trainer.save_freq",
    "resume": "trainer.resume_mode",
}


def openrlhf_dotted(spec: JobSpec) -> bool:
    """Does the job's OpenRLHF take dotted flags: by versions.openrlhf, else by how the spec
    writes its other flags, else as current releases do."""
    version = parse_version(spec.versions.openrlhf)
    if version is not None:
        return version >= OPENRLHF_DOTTED_SINCE
    wl = spec.workload
    if wl.framework == "openrlhf":
        names = [k.lstrip("-") for k in wl.args]
        if any("." in n for n in names):
            return True
        if any(n in ("actor_num_nodes", "vllm_num_engines", "pretrain_data") for n in names):
            return False
    return True


def resume_options(spec: JobSpec) -> dict[str, OverrideValue]:
    """The framework's own options for spec.resume: verl overrides or OpenRLHF arguments (by
    their names as the spec would write them), or environment names for a command."""
    r = spec.resume
    if r.checkpoint_dir is None:
        return {}
    framework = spec.workload.framework
    values: dict[str, OverrideValue] = {"dir": r.checkpoint_dir}
    if r.save_every is not None:
        values["every"] = r.save_every
    if framework == "verl":
        values["resume"] = "auto" if r.from_latest else "disable"
        return {VERL_NAMES[k]: v for k, v in values.items()}
    if framework == "openrlhf":
        values["resume"] = r.from_latest
        column = 1 if openrlhf_dotted(spec) else 0
        return {OPENRLHF_NAMES[k][column]: v for k, v in values.items()}
    env = {"dir": "CLUSTERCTL_CHECKPOINT_DIR", "every": "CLUSTERCTL_SAVE_EVERY"}
    out: dict[str, OverrideValue] = {env[k]: str(v) for k, v in values.items() if k in env}
    out["CLUSTERCTL_RESUME"] = "1" if r.from_latest else "0"
    return out
