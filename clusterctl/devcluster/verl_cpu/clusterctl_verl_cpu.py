"""verl 0.5.0 on CPU: the dev verl image's runtime patches, not a product path.

Loaded in every Python of the dev verl image by clusterctl_verl_cpu.pth, and a no-op unless
DEV_VERL_CPU_PATCHES=1 (the example spec sets it in container.env, where a reader sees
it). Each patch is applied when the verl or torch module it concerns is first imported, and
names the verl 0.5.0 code it works around. Any other verl release refuses to import: these
patches were written against 0.5.0 alone (README: "verl's own trainer on the dev cluster").
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import Any

SWITCH = "DEV_VERL_CPU_PATCHES"
FOR_VERL = "0.5.0"


def _refuse_other_verl(verl: ModuleType) -> None:
    found = metadata.version("verl")
    if found != FOR_VERL:
        raise ImportError(
            f"{SWITCH}=1 but verl is {found}: the CPU patches were written for verl {FOR_VERL} "
            "only; unset the switch or use the dev verl image"
        )


def _gloo(device: ModuleType) -> None:
    # verl/utils/device.py get_nccl_backend() raises "No available nccl backend found on
    # device type cpu": collectives run over gloo instead.
    device.get_nccl_backend = lambda: "gloo"  # type: ignore[attr-defined]


def _one_backend_per_device(dist: ModuleType) -> None:
    # verl/workers/fsdp_workers.py (3 places) asks for backend f"cpu:gloo,{device}:{nccl}",
    # on CPU "cpu:gloo,cpu:gloo", which torch refuses ("Duplicate device type cpu").
    original = dist.init_process_group

    def once_each(backend: Any) -> Any:
        if isinstance(backend, str) and "," in backend:
            return ",".join(dict.fromkeys(backend.split(",")))
        return backend  # anything else (the self-test's "gloo") as it came

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (once_each(args[0]), *args[1:])
        elif "backend" in kwargs:
            kwargs["backend"] = once_each(kwargs["backend"])
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group  # type: ignore[attr-defined]


def _cpu_device_stand_ins(cpu: ModuleType) -> None:
    # verl reaches the device through get_torch_device() (verl/utils/device.py), which is
    # torch.cpu here; torch.cpu has no memory statistics and no rng state of its own. torch
    # is still importing when torch.cpu is: its functions are looked up at call time.
    import torch

    stand_ins: dict[str, Callable[..., Any]] = {
        "empty_cache": lambda: None,
        "memory_allocated": lambda *a, **k: 0,
        "memory_reserved": lambda *a, **k: 0,
        "max_memory_allocated": lambda *a, **k: 0,
        "max_memory_reserved": lambda *a, **k: 0,
        "mem_get_info": lambda *a, **k: (0, 0),
        "get_device_name": lambda *a, **k: "cpu",
        "manual_seed": lambda seed: torch.manual_seed(seed),
        "get_rng_state": lambda *a, **k: torch.get_rng_state(),
        "set_rng_state": lambda state, *a, **k: torch.set_rng_state(state),
    }
    for name, value in stand_ins.items():
        if not hasattr(cpu, name):
            setattr(cpu, name, value)


def _sdpa_not_flash_attention(module: ModuleType) -> None:
    # verl/workers/fsdp_workers.py and verl/utils/model.py pass
    # attn_implementation="flash_attention_2" (hard-coded), which needs flash-attn and CUDA.
    def to_sdpa(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def from_pretrained(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("attn_implementation") == "flash_attention_2":
                kwargs["attn_implementation"] = "sdpa"
            return original(*args, **kwargs)

        return from_pretrained

    # AutoConfig, and the model class every Auto* class hands its keywords to (each Auto*
    # class has a copy of its own of from_pretrained, so those are not the place)
    cls = getattr(module, "AutoConfig", None) or module.PreTrainedModel
    cls.from_pretrained = classmethod(to_sdpa(cls.from_pretrained.__func__))


def _offload_without_pinned_memory(fsdp_utils: ModuleType) -> None:
    # verl/workers/fsdp_workers.py builds CPUOffloadPolicy(pin_memory=True) for FSDP2 (the
    # reference model and critic); pinned memory needs an accelerator ("Cannot access
    # accelerator device").
    policy = fsdp_utils.CPUOffloadPolicy
    if policy is not None:

        def unpinned(*args: Any, pin_memory: bool = False, **kwargs: Any) -> Any:
            return policy(*args, pin_memory=False, **kwargs)

        fsdp_utils.CPUOffloadPolicy = unpinned  # type: ignore[attr-defined]


def _one_sequence_per_prompt(hf_rollout: ModuleType) -> None:
    # verl/trainer/ppo/ray_trainer.py repeats each prompt rollout.n times before generation;
    # verl/workers/rollout/hf_rollout.py then samples num_return_sequences=n again, so the
    # batch comes back n times too large. vLLM/SGLang rollouts sample once per prompt there.
    original = hf_rollout.HFRollout.__init__

    @functools.wraps(original)
    def __init__(self: Any, module: Any, config: Any) -> None:
        from omegaconf import open_dict

        config = copy.deepcopy(config)
        with open_dict(config):
            config.n = 1
        original(self, module, config)

    hf_rollout.HFRollout.__init__ = __init__


HOOKS: dict[str, Callable[[ModuleType], None]] = {
    "verl": _refuse_other_verl,
    "verl.utils.device": _gloo,
    "torch.distributed": _one_backend_per_device,
    "torch.cpu": _cpu_device_stand_ins,
    "transformers.models.auto.configuration_auto": _sdpa_not_flash_attention,
    "transformers.modeling_utils": _sdpa_not_flash_attention,
    "verl.utils.fsdp_utils": _offload_without_pinned_memory,
    "verl.workers.rollout.hf_rollout": _one_sequence_per_prompt,
}


def install() -> None:
    if os.environ.get(SWITCH) != "1":
        return
    import wrapt  # Ray's own dependency: in every image that has Ray

    for module, hook in HOOKS.items():
        wrapt.register_post_import_hook(hook, module)


install()
