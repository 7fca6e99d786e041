"""Facts for clusterctl's GPU memory plan of an OpenRLHF job, computed by transformers' and
DeepSpeed's own code.

Runs in a Python with torch, transformers and DeepSpeed (scripts/framework-judges.sh installs
DeepSpeed 0.19.6, OpenRLHF 0.11.2's pin, beside verl 0.9.1). Each role's model is built by
transformers' own classes on PyTorch's meta device (model_facts.py); DeepSpeed's own
estimators give each trained role's model states a GPU:
``estimate_zero3_model_states_mem_needs`` (deepspeed/runtime/zero/stage3.py) for ZeRO-3,
``estimate_zero2_model_states_mem_needs`` (deepspeed/runtime/zero/stage_1_and_2.py) for
ZeRO-1 and -2.

    python3 openrlhf_memory.py < {"requests": [{"models": {ROLE: {"path": P, "critic": B}},
        "hf_home": DIR or null, "trained": [{"role": R, "stage": S, "nodes": N,
        "gpus_per_node": G, "cpu_offload": B}, ...]}, ...]}

Prints one JSON object, {"results": [...]}, one per request: {"status": "ok", "deepspeed":
VERSION, "models": {ROLE: facts}, "states": {ROLE: bytes a GPU}} or {"status": "cannot-run",
"message": "..."}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

from model_facts import build, shape  # type: ignore[import-not-found]  # noqa: E402  (payload/)


def model_states(model: Any, trained: dict[str, Any]) -> int:
    """DeepSpeed's own estimate of one GPU's model states (parameters, gradients, optimizer
    states) for MODEL trained as TRAINED says; its additional_buffer_factor only scales the
    CPU figure."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    # DeepSpeed's model_to_params counts as below but tells shared parameters apart by
    # data_ptr(), which is 0 for every tensor on the meta device; parameters() yields each
    # shared parameter once by identity instead
    total = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    where = {"num_gpus_per_node": trained["gpus_per_node"], "num_nodes": trained["nodes"]}
    if trained["stage"] == 3:
        _, gpu, _ = estimate_zero3_model_states_mem_needs(
            total, largest, **where, cpu_offload=trained["cpu_offload"], cpu_offload_params=False
        )
    else:
        _, gpu = estimate_zero2_model_states_mem_needs(
            total, **where, cpu_offload=trained["cpu_offload"]
        )
    return int(gpu)


def facts(request: dict[str, Any]) -> dict[str, Any]:
    hf_home = request.get("hf_home")
    cache = os.path.join(str(hf_home), "hub") if hf_home else None
    models, built = {}, {}
    for role, model in request["models"].items():
        try:
            built[role] = build(model["path"], cache, critic=model["critic"])
        except OSError as exc:
            return {
                "status": "cannot-run",
                "message": f"the {role} model's config.json is not on this machine (a local "
                f"path or the HF cache; nothing is downloaded): {str(exc).split('. ')[0]}",
            }
        models[role] = shape(built[role])
    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed's accelerator banner
        import deepspeed

        states = {t["role"]: model_states(built[t["role"]], t) for t in request["trained"]}
    return {
        "status": "ok",
        "deepspeed": deepspeed.__version__,
        "models": models,
        "states": states,
    }


if __name__ == "__main__":
    requests = json.load(sys.stdin)["requests"]
    print(json.dumps({"results": [facts(r) for r in requests]}))
