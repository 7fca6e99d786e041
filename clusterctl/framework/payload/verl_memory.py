"""Facts for clusterctl's GPU memory plan, computed by verl's and transformers' own code.

Runs in a Python where the pinned verl is installed (as verl_startup.py does): each request's
config is composed from verl's own config directory by Hydra, exactly as main_ppo composes
it, so every default (micro batches, offload, gpu_memory_utilization, lengths) is verl's own;
the roles it runs are decided by verl's need_reference_policy / need_critic. Each model's
parameters are counted by transformers' own model classes built on PyTorch's meta device
(no weights, no GPU): AutoModelForCausalLM for the actor and reference, and
AutoModelForTokenClassification with one label for the critic, as verl's
load_valuehead_model builds it (verl/utils/model.py, 0.5-0.9.1).

    python3 verl_memory.py < {"requests": [{"config": NAME, "overrides": [...],
                                             "hf_home": DIR or null}, ...]}

Prints one JSON object, {"results": [...]}, one result per request: {"status": "ok",
...facts} or {"status": "rejected" | "cannot-run", "message": "..."}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

from model_facts import model_facts  # type: ignore[import-not-found]  # noqa: E402  (payload/)
from verl_startup import compose_config, verl_roles  # type: ignore[import-not-found]  # noqa: E402  (payload/)

SECTIONS = ("actor_rollout_ref", "critic", "reward_model", "data", "trainer", "algorithm")


def facts(request: dict[str, object]) -> dict[str, object]:
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        overrides: Any = request["overrides"]
        config: Any = compose_config(str(request["config"]), list(overrides))
        sections: dict[str, Any] = {
            k: OmegaConf.to_container(config[k], resolve=True) for k in SECTIONS if k in config
        }
        need_ref, need_critic = verl_roles(config)
    except (HydraException, OmegaConfBaseException) as exc:
        return {"status": "rejected", "message": f"Hydra: {exc}".splitlines()[0]}
    hf_home = request.get("hf_home")
    cache = os.path.join(str(hf_home), "hub") if hf_home else None
    paths = {"actor": sections["actor_rollout_ref"]["model"]["path"]}
    if need_critic:
        paths["critic"] = sections["critic"]["model"]["path"]
    models = {}
    try:
        for role, path in paths.items():
            models[role] = model_facts(str(path), cache, critic=role == "critic")
    except OSError as exc:
        return {
            "status": "cannot-run",
            "message": f"the {role} model's config.json is not on this machine (a local path "
            f"or the HF cache; nothing is downloaded): {str(exc).split('. ')[0]}",
        }
    import verl

    return {
        "status": "ok",
        "verl": getattr(verl, "__version__", "?"),
        "sections": sections,
        "need_ref": need_ref,
        "need_critic": need_critic,
        "models": models,
    }


if __name__ == "__main__":
    requests = json.load(sys.stdin)["requests"]
    print(json.dumps({"results": [facts(r) for r in requests]}))
