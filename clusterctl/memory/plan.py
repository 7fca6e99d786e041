"""A spec's memory plan: verl's own composed config and the model's own classes (run in the
pinned verl's Python, see lint/verl_memory.py), laid on the preset's GPUs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from packaging.version import Version

from clusterctl.memory.ledger import GIB
from clusterctl.memory.verl import GpuPlan, plan_verl
from clusterctl.spec.models import JobSpec, VerlWorkload
from clusterctl.spec.presets import PRESETS

MODELLED_STRATEGIES = ("fsdp", "fsdp2")
MODELLED_ROLLOUTS = ("vllm", "sglang")


@dataclass(frozen=True)
class NoPlan:
    """Why this spec has no memory plan (said, never taken for a pass)."""

    reason: str


@cache
def verl_facts(python: str, requests: str) -> tuple[dict[str, Any], ...]:
    """lint/verl_memory.py's facts for REQUESTS (a JSON list), one per request, in one run."""
    from clusterctl.lint.frameworks import run_judge

    stdin = json.dumps({"requests": json.loads(requests)})
    out = run_judge(python, "verl_memory.py", (), stdin=stdin, timeout=600)
    if "results" in out:
        return tuple(out["results"])
    return tuple(out for _ in json.loads(requests))  # the run itself failed: every request


def plan_from_facts(spec: JobSpec, facts: dict[str, Any]) -> GpuPlan | NoPlan:
    """The per-GPU plan of verl FACTS on the spec's preset."""
    memory = PRESETS[spec.hardware.preset].gpu_memory
    if memory is None:
        return NoPlan(f"preset {spec.hardware.preset} states no GPU memory figure")
    if facts["status"] != "ok":
        return NoPlan(f"verl's facts could not be gathered: {facts['message']}")
    arr = facts["sections"]["actor_rollout_ref"]
    strategy = arr["actor"].get("strategy", "fsdp")
    if strategy not in MODELLED_STRATEGIES:
        return NoPlan(f"actor strategy {strategy} is not modelled (only {MODELLED_STRATEGIES})")
    rollout = arr["rollout"].get("name")
    if rollout not in MODELLED_ROLLOUTS:
        return NoPlan(f"rollout engine {rollout} is not modelled (only {MODELLED_ROLLOUTS})")
    vllm = Version(str(spec.versions.vllm)) if spec.versions.vllm else None
    return plan_verl(facts, int(memory.gib * GIB), vllm)


def plan(spec: JobSpec) -> GpuPlan | NoPlan:
    """The spec's per-GPU memory plan, or why there is none."""
    from clusterctl.lint.frameworks import pinned_verl, verl_config, verl_python, verl_verdict

    wl = spec.workload
    if not isinstance(wl, VerlWorkload):
        return NoPlan("only verl jobs are planned yet (OpenRLHF: not yet)")
    if spec.hardware.preset == "none":
        return NoPlan("preset none: no GPU memory to plan")
    config, why = verl_config(wl)
    if config is None:
        return NoPlan(why)
    python = verl_python(pinned_verl(spec))
    if python is None:
        return NoPlan(
            f"verl {pinned_verl(spec) or ''} is not installed here with its dependencies "
            "(CLUSTERCTL_VERL_PYTHON)"
        )
    # the same run as verl's own start-up check (verl_startup.py): verl is imported once
    facts = verl_verdict(python, spec, wl, config).get("memory") or {
        "status": "cannot-run",
        "message": "the start-up check gave no memory facts",
    }
    return plan_from_facts(spec, facts)
