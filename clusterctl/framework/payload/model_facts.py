"""A model's size and shape, counted by transformers' own model classes on PyTorch's meta
device (no weights, no GPU). Imported by the memory judges beside it (verl_memory.py,
openrlhf_memory.py), which run in a framework's Python with torch and transformers."""

from __future__ import annotations

from typing import Any


def build(path: str, cache_dir: str | None, critic: bool = False) -> Any:
    """The model at PATH on the meta device: AutoModelForCausalLM, or for a critic or reward
    model AutoModelForTokenClassification with one label (a value head of hidden x 1 on the
    base model, as verl's load_valuehead_model and OpenRLHF's get_llm_for_sequence_regression
    build them)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification

    config = AutoConfig.from_pretrained(path, cache_dir=cache_dir)
    with torch.device("meta"):
        if critic:
            config.num_labels = 1
            return AutoModelForTokenClassification.from_config(config)
        return AutoModelForCausalLM.from_config(config)


def model_facts(path: str, cache_dir: str | None, critic: bool = False) -> dict[str, object]:
    """Parameter counts and shape of the model at PATH, built on the meta device."""
    return shape(build(path, cache_dir, critic))


def shape(model: Any) -> dict[str, object]:
    """Parameter counts and shape of MODEL (built by ``build``)."""
    import torch

    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    total = sum(p.numel() for p in model.parameters())
    blocks: Any = max(
        (m for m in model.modules() if isinstance(m, torch.nn.ModuleList)), key=len, default=[]
    )
    layer = max((sum(p.numel() for p in b.parameters()) for b in blocks), default=0)
    linears: dict[str, int] = {}  # LoRA's cost: in + out features of each adapted linear
    for block in blocks:
        for name, module in block.named_modules():
            if isinstance(module, torch.nn.Linear):
                short = name.rsplit(".", 1)[-1]
                linears[short] = linears.get(short, 0) + module.in_features + module.out_features
    heads = text.num_attention_heads
    return {
        "params": total,
        "layer_params": layer,
        "outside_layers": total - sum(p.numel() for p in blocks.parameters()) if blocks else total,
        "layers": len(blocks),
        "hidden": text.hidden_size,
        "heads": heads,
        "kv_heads": getattr(text, "num_key_value_heads", None) or heads,
        "head_dim": getattr(text, "head_dim", None) or text.hidden_size // heads,
        "intermediate": getattr(text, "intermediate_size", None) or 4 * text.hidden_size,
        "vocab": text.vocab_size,
        "linear_features": linears,
    }
