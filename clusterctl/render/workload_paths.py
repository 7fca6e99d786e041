"""What the workload reads and writes on the nodes' disks, named by the setting that holds it
(issue 46 item 4): every node checks them in its own container, before Ray starts, so a model
directory missing on one node fails there, naming the setting, the path and the node, instead
of in the trainer minutes later (transformers reads a local path that is not there as a Hub
name: "Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/verl/model'").

Only absolute paths are checked: a Hub name, a relative path (the workload's own working
directory) or a URL (hdfs://, s3://) is the framework's to resolve."""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload


@dataclass(frozen=True)
class WorkloadPath:
    setting: str  # as the spec names it: workload.overrides["data.train_files"]
    path: str
    writes: bool  # a directory the workload writes into (made by it when absent)


# verl's own keys (verl/trainer/config/ppo_trainer.yaml, 0.5-0.9.1): the models, their
# tokenizers, the data files, the reward function's file; its checkpoints directory
VERL_READS = re.compile(
    r"(?:^|\.)model\.path$|(?:^|\.)(?:tokenizer_path|input_tokenizer)$"
    r"|^data\.(?:train_files|val_files|tokenizer)$|^custom_reward_function\.path$"
)
VERL_WRITES = re.compile(r"^trainer\.default_local_dir$")
# OpenRLHF's flags (openrlhf/cli/train_ppo_ray.py: 0.9.x underscores, 0.10.2+ dotted names)
OPENRLHF_READS = re.compile(
    r"^(?:pretrain|reward_pretrain|critic_pretrain|prompt_data|pretrain_data|eval_dataset"
    r"|(?:actor|critic|reward|ref)\.model_name_or_path|data\.(?:prompt_dataset|eval_dataset))$"
)
OPENRLHF_WRITES = re.compile(r"^(?:save_path|ckpt_path|ckpt\.path|ckpt\.save_path)$")


def workload_paths(spec: JobSpec) -> list[WorkloadPath]:
    """Every absolute path the workload's settings name, in the spec's order."""
    wl = spec.workload
    out: list[WorkloadPath] = []
    if isinstance(wl, VerlWorkload):
        for key, value in wl.overrides.items():
            bare = key.lstrip("+~")
            writes = bool(VERL_WRITES.search(bare))
            if writes or VERL_READS.search(bare):
                out += _named(f'workload.overrides["{key}"]', value, writes)
    elif isinstance(wl, OpenRLHFWorkload):
        for key, value in wl.args.items():
            bare = key.lstrip("-")
            writes = bool(OPENRLHF_WRITES.search(bare))
            if writes or OPENRLHF_READS.search(bare):
                # OpenRLHF splits data flags at commas (blending_datasets)
                items = value.split(",") if isinstance(value, str) else value
                out += _named(f'workload.args["{key}"]', items, writes)
    checkpoints = spec.resume.checkpoint_dir  # absolute (AbsPath)
    if checkpoints and not any(p.path == checkpoints for p in out):
        out.append(WorkloadPath("resume.checkpoint_dir", checkpoints, True))
    return out


def _named(setting: str, value: object, writes: bool) -> list[WorkloadPath]:
    items = value if isinstance(value, list) else [value]
    return [
        WorkloadPath(setting, item, writes)
        for item in items
        if isinstance(item, str) and item.startswith("/") and "@" not in item
    ]
