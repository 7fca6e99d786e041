"""A spec's memory plan: verl's own composed config and the model's own classes (run in the
pinned verl's Python, see framework/payload/verl_memory.py), laid on the preset's GPUs."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from packaging.version import Version

from clusterctl.framework.judge import Judge
from clusterctl.memory.ledger import GIB, GpuPlan
from clusterctl.memory.openrlhf import (
    Settings,
    model_request,
    plan_openrlhf,
    trained_request,
    why_not,
)
from clusterctl.memory.verl import plan_verl
from clusterctl.spec.models import CommandWorkload, JobSpec, OpenRLHFWorkload, VerlWorkload
from clusterctl.spec.presets import PRESETS

MODELLED_STRATEGIES = ("fsdp", "fsdp2")
MODELLED_ROLLOUTS = ("vllm", "sglang")


@dataclass(frozen=True)
class NoPlan:
    """Why this spec has no memory plan (said, never taken for a pass)."""

    reason: str


@cache
def judge_facts(judge: Judge, script: str, requests: str) -> tuple[dict[str, Any], ...]:
    """A memory judge's facts (framework/payload/verl_memory.py, openrlhf_memory.py) for
    REQUESTS (a JSON list), one per request, in one run."""
    stdin = json.dumps({"requests": json.loads(requests)})
    out = judge.run(script, (), stdin=stdin, timeout=600)
    if "results" in out:
        return tuple(out["results"])
    return tuple(out for _ in json.loads(requests))  # the run itself failed: every request


def verl_facts(judge: Judge, requests: str) -> tuple[dict[str, Any], ...]:
    return judge_facts(judge, "verl_memory.py", requests)


def openrlhf_facts(judge: Judge, request: str) -> dict[str, Any]:
    (facts,) = judge_facts(judge, "openrlhf_memory.py", f"[{request}]")
    return dict(facts)


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
    wl = spec.workload
    if isinstance(wl, CommandWorkload):
        return NoPlan("a command workload: its roles and memory are its own")
    if spec.hardware.preset == "none":
        return NoPlan("preset none: no GPU memory to plan")
    if isinstance(wl, OpenRLHFWorkload):
        return plan_openrlhf_spec(spec, wl)
    return plan_verl_spec(spec, wl)


def plan_verl_spec(spec: JobSpec, wl: VerlWorkload) -> GpuPlan | NoPlan:
    from clusterctl.lint.frameworks import (
        cannot_judge,
        pinned_verl,
        verl_config,
        verl_judge,
        verl_verdict,
    )

    config, why = verl_config(wl)
    if config is None:
        return NoPlan(why)
    judge = verl_judge(spec)
    if judge is None:
        return NoPlan(cannot_judge("verl", pinned_verl(spec), spec))
    # the same run as verl's own start-up check (verl_startup.py): verl is imported once
    facts = verl_verdict(judge, spec, wl, config).get("memory") or {
        "status": "cannot-run",
        "message": "the start-up check gave no memory facts",
    }
    return judged_by(plan_from_facts(spec, facts), judge)


def judged_by(result: GpuPlan | NoPlan, judge: Judge) -> GpuPlan | NoPlan:
    """RESULT, its notes naming where the framework's own code gathered its facts."""
    if isinstance(result, NoPlan):
        return result
    return replace(result, notes=(f"facts gathered by {judge}", *result.notes))


def estimator_judge(judge: Judge) -> Judge | None:
    """Where DeepSpeed's own estimators run beside torch and transformers: the job's image
    (OpenRLHF's image has them), else a Python of $CLUSTERCTL_VERL_PYTHON where DeepSpeed is
    installed (scripts/framework-judges.sh puts it beside verl 0.9.1)."""
    import os

    from clusterctl.lint.frameworks import installed_version, verl_site

    if judge.image is not None:
        return judge
    for python in os.environ.get("CLUSTERCTL_VERL_PYTHON", "").split(os.pathsep):
        if python and installed_version("deepspeed", verl_site(python)):
            return Judge("openrlhf", judge.release, python, site=judge.site)
    return None


def plan_openrlhf_spec(spec: JobSpec, wl: OpenRLHFWorkload) -> GpuPlan | NoPlan:
    from clusterctl.lint.frameworks import (
        cannot_judge,
        on_this_host,
        openrlhf_judge,
        openrlhf_verdict,
    )

    memory = PRESETS[spec.hardware.preset].gpu_memory
    if memory is None:
        return NoPlan(f"preset {spec.hardware.preset} states no GPU memory figure")
    judge = openrlhf_judge(spec)
    if judge is None:
        return NoPlan(cannot_judge("openrlhf", spec.versions.openrlhf, spec))
    verdict = openrlhf_verdict(judge, wl)
    if verdict["status"] != "ok" or "args" not in verdict:
        return NoPlan(f"{judge}: its own start-up check did not pass: {verdict['message']}")
    settings = Settings(verdict["args"])
    why = why_not(settings)
    if why is not None:
        return NoPlan(why)
    estimator = estimator_judge(judge)
    if estimator is None:
        return NoPlan(
            "no Python with torch, transformers and DeepSpeed here for DeepSpeed's own "
            "estimators (CLUSTERCTL_VERL_PYTHON; bash scripts/framework-judges.sh)"
        )
    models = model_request(settings)
    hf_home = spec.container.env.get("HF_HOME")
    if estimator.image is not None:  # the container's own paths, its mounts being there
        cache = hf_home if isinstance(hf_home, str) else None
    else:
        cache = on_this_host(spec, hf_home) if isinstance(hf_home, str) else None
        for role, model in models.items():
            here = on_this_host(spec, model["path"]) if model["path"].startswith("/") else None
            if here is None and cache is None:  # no config.json to read: need not run
                return NoPlan(
                    f"the {role} model's config.json is not on this machine ({model['path']}: "
                    "neither a readable path through the spec's mounts nor an HF_HOME cache)"
                )
            model["path"] = here or model["path"]
    request = {"models": models, "hf_home": cache, "trained": trained_request(settings)}
    facts = openrlhf_facts(estimator, json.dumps(request, sort_keys=True))
    if facts.get("status") != "ok":
        return NoPlan(f"the models could not be sized: {facts.get('message')}")
    vllm = Version(str(spec.versions.vllm)) if spec.versions.vllm else None
    found = plan_openrlhf(
        verdict["args"],
        facts,
        int(memory.gib * GIB),
        vllm,
        spec.slurm.nodes,
        spec.slurm.gpus_per_node or 0,
    )
    return judged_by(found, estimator)
