"""The Ray placement groups a workload's framework creates at start-up, shaped as the framework
shapes them, for the self-test to place before training does: a shape the cluster cannot hold
then fails in seconds, named, instead of hanging on ``ray.get(pg.ready())`` (no timeout in
either framework).

Groups of one stage are alive at the same time in the framework, so the self-test places them
together; stages are placed one after another (verl's rollout ranks live inside its trainer
pool, so the two are never held at once).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from clusterctl.lint.workload import openrlhf, role_shape, rollout_shape, truthy, vllm_shape
from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload

Bundle = dict[str, float]

# verl 0.9.1: ResourcePoolManager.max_colocate_count = 3 (verl/single_controller/ray/base.py,
# "actor_critic_ref, rollout, reward model"); RayResourcePool.get_placement_groups makes one
# group per node of [n_gpus_per_node] * nnodes (verl/trainer/main_ppo_v0.py) with bundles
# {"CPU": max_colocate_count, "GPU": 1}, or {"CPU": max_colocate_count} when use_gpu is
# False; RayWorkerGroup(bin_pack=True) asks for STRICT_PACK.
VERL_COLOCATE_CPUS = 3
# OpenRLHF 0.9.10 and 0.11.2: every group is PACK of {"GPU": 1, "CPU": 1} bundles; the vLLM
# engines share one group of engines x TP bundles, sliced per engine by
# openrlhf/trainer/ray/utils.py get_bundle_indices after grouping the bundles by node
# (trainer/ray/vllm_engine.py create_vllm_engines, trainer/ray/launcher.py _initiate_actors,
# cli/train_ppo_ray.py for colocate_all / colocate_actor_ref).
OPENRLHF_BUNDLE: Bundle = {"GPU": 1, "CPU": 1}


@dataclass(frozen=True)
class GroupShape:
    """COPIES identical placement groups, each of SIZE copies of BUNDLE with STRATEGY; TP > 1:
    consecutive runs of TP bundles (grouped by node, as OpenRLHF slices them) are one rollout
    engine each and must sit on one node."""

    stage: str
    name: str
    strategy: str
    bundle: Bundle
    size: int
    copies: int = 1
    tp: int = 0

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def for_cluster(bundle: Bundle, gpus: bool) -> Bundle:
    """On a CPU-only cluster a GPU becomes one CPU, except where the bundle already asks for
    CPUs (verl's pool without GPUs keeps its CPU count alone)."""
    if gpus:
        return dict(bundle)
    cpus = bundle.get("CPU", 0) or 1
    return {"CPU": cpus}


def _verl(spec: JobSpec, gpus: int) -> list[GroupShape]:
    if not gpus:
        return []  # verl's trainer pool has n_gpus_per_node bundles: none on a CPU cluster
    bundle: Bundle = {"CPU": VERL_COLOCATE_CPUS, "GPU": 1}
    return [
        GroupShape(
            "verl trainer pool",
            "one per node",
            "STRICT_PACK",
            bundle,
            gpus,
            copies=spec.slurm.nodes,
        )
    ]


def _openrlhf(wl: OpenRLHFWorkload, gpus: bool, engines: int, tp: int) -> list[GroupShape]:
    bundle = for_cluster(OPENRLHF_BUNDLE, gpus)
    stage = "OpenRLHF start-up"
    actor_nodes, actor_gpus = role_shape(wl, "actor")
    actor = actor_nodes * actor_gpus
    if truthy(openrlhf(wl, "colocate_all").value):
        # the engines share the actor's group (train_ppo_ray.py: shared_pg = pg)
        return [
            GroupShape(stage, "actor + vLLM engines (colocate_all)", "PACK", bundle, actor, tp=tp)
        ]
    shapes = []
    if engines:
        shapes.append(GroupShape(stage, "vLLM engines", "PACK", bundle, engines * tp, tp=tp))
    if actor_gpus > 1:  # launcher.py makes a group only for more than one GPU per node
        shapes.append(GroupShape(stage, "actor", "PACK", bundle, actor))
    return shapes


def placement_shapes(spec: JobSpec) -> list[GroupShape]:
    """The groups the self-test places for SPEC's workload (empty: nothing to rehearse)."""
    wl, st = spec.workload, spec.selftest
    gpus = spec.slurm.gpus_per_node or 0
    rollout = rollout_shape(wl, spec.slurm.nodes, gpus, st.rollout_tp, st.rollout_engines)
    if isinstance(wl, OpenRLHFWorkload) and st.rollout_tp is None and st.rollout_engines is None:
        engines, tp = vllm_shape(wl)
        return _openrlhf(wl, bool(gpus), engines, tp)
    shapes = _verl(spec, gpus) if isinstance(wl, VerlWorkload) else []
    if rollout is not None:
        # one group of TP bundles per engine on one node: what an engine's tensor parallelism
        # needs whatever the framework (verl's rollout ranks sit in its per-node pool)
        engines, tp = rollout
        unit = for_cluster({"GPU": 1}, bool(gpus))
        shapes.append(
            GroupShape("rollout engines", f"TP {tp}", "STRICT_PACK", unit, tp, copies=engines)
        )
    return shapes
