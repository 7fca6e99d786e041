"""Read framework settings out of a workload, whichever spelling the user chose.

OpenRLHF renamed its flags to dotted names in 2026 (``--actor.num_nodes`` for
``--actor_num_nodes``); verl's Hydra keys may carry ``+``/``++`` prefixes. Rules ask for a
setting by its canonical name and get (value, the key as written) back.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.spec.models import OpenRLHFWorkload, OverrideValue, VerlWorkload

# canonical -> (flat name, dotted name)
OPENRLHF_FLAGS: dict[str, tuple[str, str]] = {
    "actor_nodes": ("actor_num_nodes", "actor.num_nodes"),
    "actor_gpus": ("actor_num_gpus_per_node", "actor.num_gpus_per_node"),
    "ref_nodes": ("ref_num_nodes", "ref.num_nodes"),
    "ref_gpus": ("ref_num_gpus_per_node", "ref.num_gpus_per_node"),
    "critic_nodes": ("critic_num_nodes", "critic.num_nodes"),
    "critic_gpus": ("critic_num_gpus_per_node", "critic.num_gpus_per_node"),
    "reward_nodes": ("reward_num_nodes", "reward.num_nodes"),
    "reward_gpus": ("reward_num_gpus_per_node", "reward.num_gpus_per_node"),
    "vllm_engines": ("vllm_num_engines", "vllm.num_engines"),
    "vllm_tp": ("vllm_tensor_parallel_size", "vllm.tensor_parallel_size"),
    "vllm_mem": ("vllm_gpu_memory_utilization", "vllm.gpu_memory_utilization"),
    "sync_backend": ("vllm_sync_backend", "vllm.sync_backend"),
    "sync_with_ray": ("vllm_sync_with_ray", "vllm.sync_with_ray"),
    "colocate_actor_ref": ("colocate_actor_ref", "train.colocate_actor_ref"),
    "colocate_critic_reward": ("colocate_critic_reward", "train.colocate_critic_reward"),
    "colocate_all": ("colocate_all_models", "train.colocate_all"),
    "init_kl_coef": ("init_kl_coef", "algo.kl.init_coef"),
    "advantage_estimator": ("advantage_estimator", "algo.advantage.estimator"),
    "remote_rm_url": ("remote_rm_url", "reward.remote_url"),
    "agent_func_path": ("agent_func_path", "train.agent_func_path"),
    "async_train": ("async_train", "train.async_enable"),
    "param_dtype": ("param_dtype", "ds.param_dtype"),
    "fp16": ("fp16", "fp16"),
    "prompt_data": (
        "prompt_data",
        "data.prompt_dataset",
    ),  # a bare flag in releases before param_dtype
}
# OpenRLHF's argparse defaults for the settings the GPU budget depends on.
OPENRLHF_DEFAULTS: dict[str, OverrideValue] = {
    "actor_nodes": 1,
    "actor_gpus": 8,
    "ref_nodes": 1,
    "ref_gpus": 8,
    "critic_nodes": 1,
    "critic_gpus": 8,
    "reward_nodes": 1,
    "reward_gpus": 8,
    "vllm_engines": None,
    "vllm_tp": 1,
    "vllm_mem": 0.95,
    "sync_backend": "nccl",
    "init_kl_coef": 0.01,
    "advantage_estimator": "gae",
}


@dataclass(frozen=True)
class Setting:
    value: OverrideValue
    key: str | None  # as written in the spec; None when it is the framework's default

    def path(self, section: str) -> tuple[str | int, ...]:
        return ("workload", section, self.key) if self.key else ("workload", section)


def openrlhf(wl: OpenRLHFWorkload, canonical: str) -> Setting:
    for name in OPENRLHF_FLAGS[canonical]:
        for written in (name, f"--{name}"):
            if written in wl.args:
                return Setting(wl.args[written], written)
    return Setting(OPENRLHF_DEFAULTS.get(canonical), None)


def verl(wl: VerlWorkload, key: str) -> Setting:
    for written in (key, f"+{key}", f"++{key}"):
        if written in wl.overrides:
            return Setting(wl.overrides[written], written)
    return Setting(None, None)


def as_int(value: OverrideValue, default: int = 0) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def as_float(value: OverrideValue) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def truthy(value: OverrideValue) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "yes"))


def role_shape(wl: OpenRLHFWorkload, role: str) -> tuple[int, int]:
    """(nodes, GPUs per node) of an OpenRLHF model role: actor, ref, critic or reward."""
    return (
        as_int(openrlhf(wl, f"{role}_nodes").value, 1),
        as_int(openrlhf(wl, f"{role}_gpus").value, 8),
    )


def vllm_shape(wl: OpenRLHFWorkload) -> tuple[int, int]:
    """(engines, tensor parallel size) of OpenRLHF's vLLM rollout."""
    return (as_int(openrlhf(wl, "vllm_engines").value, 0), as_int(openrlhf(wl, "vllm_tp").value, 1))


def openrlhf_gpu_budget(wl: OpenRLHFWorkload) -> tuple[int, list[str]]:
    """GPUs an OpenRLHF PPO run places, and how the sum was made (openrlhf/cli/train_ppo_ray.py)."""

    def role(name: str) -> int:
        nodes, gpus = role_shape(wl, name)
        return nodes * gpus

    actor, ref, critic, reward = role("actor"), role("ref"), role("critic"), role("reward")
    engines, tp = vllm_shape(wl)
    vllm = engines * tp
    has_ref = (as_float(openrlhf(wl, "init_kl_coef").value) or 0.0) > 0
    # train_ppo_ray.py drops the critic for every advantage estimator but gae.
    has_critic = str(openrlhf(wl, "advantage_estimator").value) == "gae"
    # an agent function stands in for the reward model: train_ppo_ray.py sets
    # remote_url = "agent" (OpenRLHF @3c3be62 and 0.9.10)
    has_reward = not (openrlhf(wl, "remote_rm_url").value or openrlhf(wl, "agent_func_path").value)
    parts: list[str] = []
    if truthy(openrlhf(wl, "colocate_all").value):
        total = actor
        # async training places vLLM engines on their own GPUs: create_vllm_engines gets
        # the shared group only `if colocate_all and not async_enable` (train_ppo_ray.py)
        if truthy(openrlhf(wl, "async_train").value) and vllm:
            total += vllm
            parts.append(f"colocate_all: actor {actor} (ref shares it), vLLM {engines}x{tp}")
        else:
            parts.append(f"colocate_all: actor {actor} (ref, vLLM share it)")
        if has_critic or has_reward:
            if truthy(openrlhf(wl, "colocate_critic_reward").value):
                extra = critic if has_critic else reward
            else:
                extra = 0  # critic and reward share the actor's placement group
            total += extra
            if extra:
                parts.append(f"critic+reward {extra}")
        return total, parts
    total = actor
    parts.append(f"actor {actor}")
    if has_ref and not truthy(openrlhf(wl, "colocate_actor_ref").value):
        total += ref
        parts.append(f"ref {ref}")
    if truthy(openrlhf(wl, "colocate_critic_reward").value) and has_critic and has_reward:
        total += critic
        parts.append(f"critic+reward {critic}")
    else:
        if has_critic:
            total += critic
            parts.append(f"critic {critic}")
        if has_reward:
            total += reward
            parts.append(f"reward {reward}")
    if vllm:
        total += vllm
        parts.append(f"vLLM {engines}x{tp}")
    return total, parts


SyncPath = str  # "none", "cuda-ipc", "ray-gloo", "ray-nccl" or "pynccl"


def openrlhf_weight_sync(wl: OpenRLHFWorkload) -> SyncPath:
    """How OpenRLHF moves the actor's weights into its vLLM engines.

    Read from trainer/ray/ppo_actor.py of 0.9.10, 0.10.2 and 0.11.2 (the same logic in each;
    flat flag names before 0.10.2): CUDA IPC when the backend is nccl, all models are
    colocated and training is synchronous; otherwise a process group of rank 0 and every
    engine: with sync_with_ray, a Ray collective group on the chosen backend; without it,
    `stateless_init_process_group` -> vLLM's PyNcclCommunicator, i.e. NCCL (RCCL on ROCm)
    whatever sync_backend says.
    """
    if vllm_shape(wl)[0] == 0:
        return "none"
    backend = str(openrlhf(wl, "sync_backend").value)
    if (
        backend == "nccl"
        and truthy(openrlhf(wl, "colocate_all").value)
        and not truthy(openrlhf(wl, "async_train").value)
    ):
        return "cuda-ipc"
    if truthy(openrlhf(wl, "sync_with_ray").value):
        return "ray-gloo" if backend == "gloo" else "ray-nccl"
    return "pynccl"


VERL_ROLLOUT_TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"


def rollout_shape(
    wl: object, nodes: int, gpus_per_node: int, tp: int | None, engines: int | None
) -> tuple[int, int] | None:
    """(engines, TP) of the workload's rollout as its framework will place them; TP and
    ENGINES override it. None when neither the spec nor the workload says."""
    if isinstance(wl, VerlWorkload):
        setting = verl(wl, VERL_ROLLOUT_TP)
        tp = tp or (as_int(setting.value, 1) if setting.key else None)
        if tp and not engines and gpus_per_node:
            engines = max(1, nodes * gpus_per_node // tp)
    elif isinstance(wl, OpenRLHFWorkload):
        wl_engines, wl_tp = vllm_shape(wl)
        tp = tp or wl_tp
        engines = engines or wl_engines or None
    if tp is None:
        return None
    return (engines or 1, tp)
