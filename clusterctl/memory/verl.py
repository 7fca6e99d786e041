"""verl's memory on each GPU: FSDP workers with the hybrid engine, where the actor, the rollout
engine, the reference and the critic share every GPU of the job (verl's single global
resource pool) and take turns. Every setting is read from verl's own composed config (the
facts verl_memory.py gathers), every model size from transformers' own model classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from clusterctl.memory.engine import (
    CONTEXT,
    S_CONTEXT,
    S_GRAPHS,
    S_SGLANG,
    graphs_bytes,
    kv_note,
    refusals,
)
from clusterctl.memory.ledger import GpuGroup, GpuPlan, Phase, Term, Verdict, gib, judge
from clusterctl.memory.model import BF16, S_ACTIVATIONS, Batch, Model

DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}

S_STATES = (
    "FSDP full shard over the shard group (fsdp_config.fsdp_size; -1: every GPU of the job); "
    "parameters in fsdp_config.model_dtype (verl 0.5 without the key: fp32 actor and critic, "
    "bf16 reference: verl/workers/fsdp_workers.py)"
)
S_ADAM = "torch.optim.AdamW: exp_avg and exp_avg_sq, each in the parameter's dtype"
S_STEP = (
    "AdamW's step, the foreach implementation PyTorch picks on CUDA (verl's FSDP workers build "
    "optim.AdamW with neither foreach nor fused): _multi_tensor_adam holds exp_avg_sq_sqrt = "
    "torch._foreach_sqrt(exp_avg_sqs), a copy of one moment (torch/optim/adam.py, PyTorch "
    "2.x); a real H200 held 3.3-4.0 bytes a parameter above fp32 states and gradients at this "
    "step (tests/fixtures/memory/h200), and OOMed there on three 7-8B models"
)
S_GATHER = (
    "FSDP gathers whole units in the mixed-precision dtype (bf16): the root unit (embeddings, "
    "lm_head) and a decoder layer with the next one prefetched"
)
S_LOGITS = (
    "logits [tokens, vocab]: 4 bytes (float32), and 2 + 1 more where the entropy is computed "
    "(the actor's log-prob pass; the update with entropy_coeff != 0): verl "
    "docs/perf/perf_tuning.rst (volcengine/verl@b178a3cd)"
)
S_UTIL = (
    "vLLM >= 0.7: gpu_memory_utilization is the share of the GPU's whole memory the engine "
    "takes (verl docs/examples/config.rst; verl passes the value to vLLM unchanged)"
)
# The override each phase's memory turns on most: where a finding points in the spec.
ANCHORS = (
    ("rollout", ("actor_rollout_ref.rollout.gpu_memory_utilization",)),
    ("actor update", ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",)),
    ("actor optimizer step", ("actor_rollout_ref.actor.fsdp_config.optimizer_offload",)),
    ("actor log-prob", ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",)),
    ("reference log-prob", ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",)),
    ("critic update", ("critic.ppo_micro_batch_size_per_gpu",)),
)


def _dtype(fsdp: dict[str, Any], default: str) -> int:
    return DTYPE_BYTES.get(str(fsdp.get("model_dtype") or default), 4)


def _batch(cfg: dict[str, Any], key: str, seq: int, world: int, sp: int, packed: Any) -> Batch:
    """The micro batch KEY of CFG names (ppo_micro_batch_size or log_prob_micro_batch_size,
    with its _per_gpu, use_dynamic_bsz and max_token_len settings). A dynamic batch packs
    sequences up to its token budget; a fixed one holds its sequences, padded to the longest
    unless padding is removed (use_remove_padding). The deprecated global size is divided
    over the data-parallel ranks, as verl's workers do (verl/workers/fsdp_workers.py, 0.5:
    `ppo_micro_batch_size //= device_mesh.size() // ulysses_sequence_parallel_size`)."""
    prefix = "log_prob_" if key.startswith("log_prob") else ""
    if cfg.get(f"{prefix}use_dynamic_bsz"):
        budget = cfg[f"{prefix}max_token_len_per_gpu" if prefix else "ppo_max_token_len_per_gpu"]
        return Batch(int(budget), 0, True)
    per_gpu = cfg.get(f"{key}_per_gpu")
    if per_gpu is None and cfg.get(key):
        per_gpu = int(cfg[key]) // max(1, world // max(1, sp))
    sequences = max(1, int(per_gpu or 1))
    return Batch(sequences * seq // max(1, sp), sequences, bool(packed))


@dataclass(frozen=True)
class _States:
    """A trained or reference model's shard on one GPU."""

    params: int
    grads: int
    optimizer: int
    gathered: int
    param_offload: bool
    optimizer_offload: bool

    def resident(self) -> int:
        """What stays on the GPU while another role works (offloaded parts go to the CPU)."""
        return (0 if self.param_offload else self.params) + (
            0 if self.optimizer_offload else self.optimizer
        )


def _trainable(model: Model, lora_rank: int, targets: Any) -> int:
    if lora_rank <= 0:
        return model.params
    names = model.linear_features if targets in (None, "all-linear") else targets
    return lora_rank * sum(model.linear_features.get(n, 0) for n in names)


def plan_verl(facts: dict[str, Any], capacity: int, vllm: Version | None) -> GpuPlan:
    """The per-GPU plan of the composed config in FACTS on GPUs of CAPACITY bytes."""
    sec = facts["sections"]
    arr, data, trainer = sec["actor_rollout_ref"], sec["data"], sec["trainer"]
    actor_cfg, ref_cfg, rollout = arr["actor"], arr["ref"], arr["rollout"]
    nodes, per_node = int(trainer["nnodes"]), int(trainer["n_gpus_per_node"])
    world = nodes * per_node
    actor = Model.from_facts(facts["models"]["actor"])
    seq = int(data["max_prompt_length"]) + int(data["max_response_length"])
    lora = int(arr["model"].get("lora_rank") or 0)

    def states(model: Model, fsdp: dict[str, Any], default: str, trained: int) -> _States:
        shard = int(fsdp.get("fsdp_size") or -1)
        shard = world if shard <= 0 else shard
        size = _dtype(fsdp, default)
        return _States(
            params=model.params * size // shard,
            grads=trained * size // shard,
            optimizer=2 * trained * size // shard,
            gathered=BF16 * (model.outside_layers + 2 * model.layer_params),
            param_offload=bool(fsdp.get("param_offload")),
            optimizer_offload=bool(fsdp.get("optimizer_offload")),
        )

    trained = _trainable(actor, lora, arr["model"].get("target_modules"))
    a = states(actor, actor_cfg.get("fsdp_config") or {}, "fp32", trained)
    roles = ["actor", "rollout"]
    # verl: with LoRA the reference is the actor with its adapters off (ref_in_actor)
    ref_fsdp = ref_cfg.get("fsdp_config") or {}
    r = states(actor, ref_fsdp, "bf16", 0) if facts["need_ref"] and lora <= 0 else None
    if facts["need_ref"]:
        roles.append("reference")
    c, critic = None, None
    critic_cfg = sec.get("critic") or {}
    critic_settings, critic_key = critic_fsdp(critic_cfg)
    if facts["need_critic"]:
        critic = Model.from_facts(facts["models"]["critic"])
        c = states(critic, critic_settings, "fp32", critic.params)
        roles.append("critic")

    # the rollout engine
    tp = int(rollout.get("tensor_model_parallel_size") or 1)
    util = float(rollout["gpu_memory_utilization"])
    budget = int(util * capacity)
    weights = actor.params * BF16 // tp
    kv_token = actor.kv_bytes_per_token(tp)
    engine = str(rollout.get("name") or "vllm")
    graphs = graphs_bytes(bool(rollout.get("enforce_eager")), vllm, engine)
    asleep = graphs if rollout.get("free_cache_engine", True) else budget + graphs
    context = Term("CUDA/HIP context", CONTEXT, S_CONTEXT)

    def resident(*working: _States | None) -> list[Term]:
        held = [("actor", a), ("reference", r), ("critic", c)]
        out = []
        for name, s in held:
            if s is not None and all(s is not w for w in working) and s.resident():
                out.append(Term(f"{name} states left on the GPU", s.resident(), S_STATES))
        return out

    def vllm_asleep() -> list[Term]:
        what = "rollout engine asleep (CUDA graphs)"
        if not rollout.get("free_cache_engine", True):
            what = "rollout engine kept awake (free_cache_engine false)"
        return [Term(what, asleep, S_GRAPHS)] if asleep else []

    remove_padding = arr["model"].get("use_remove_padding")

    def forward(s: _States, model: Model, b: Batch, who: str, logit_bytes: int) -> Phase:
        per_token, act = model.vocab * logit_bytes, model.activation_bytes_per_token()
        return Phase(
            f"{who} log-prob",
            who,
            (
                context,
                *vllm_asleep(),
                Term(f"{who} parameters", s.params, S_STATES),
                Term(f"{who} gathered FSDP units", s.gathered, S_GATHER),
                *(
                    [Term("actor optimizer states", s.optimizer, S_ADAM)]
                    if s is a and not a.optimizer_offload
                    else []
                ),
                Term(
                    f"activations, {b.tokens} tokens (forward only)",
                    b.tokens * act,
                    S_ACTIVATIONS,
                    act,
                ),
                Term(f"logits, {b.tokens} tokens", b.tokens * per_token, S_LOGITS, per_token),
                *resident(s),
            ),
            b.tokens,
            b.sequences,
            b.packed,
        )

    def update(
        s: _States, model: Model, b: Batch, who: str, cfg: dict[str, Any], logit_bytes: int
    ) -> Phase:
        checkpointing = (cfg.get("model") or {}).get("enable_gradient_checkpointing")
        per_token = model.training_bytes_per_token(bool(checkpointing))
        logits = model.vocab * logit_bytes
        return Phase(
            f"{who} update",
            who,
            (
                context,
                *vllm_asleep(),
                Term(f"{who} parameters", s.params, S_STATES),
                Term(f"{who} gradients", s.grads, S_STATES),
                Term(f"{who} optimizer states", s.optimizer, S_ADAM),
                Term(f"{who} gathered FSDP units", s.gathered, S_GATHER),
                Term(
                    f"activations, {b.tokens} tokens"
                    + (", gradient checkpointing" if checkpointing else ""),
                    b.tokens * per_token,
                    S_ACTIVATIONS,
                    per_token,
                ),
                *(
                    [Term(f"logits, {b.tokens} tokens", b.tokens * logits, S_LOGITS, logits)]
                    if logits
                    else []
                ),
                *resident(s),
            ),
            b.tokens,
            b.sequences,
            b.packed,
        )

    def optimizer_step(s: _States, who: str) -> list[Phase]:
        """The optimizer's step after the last micro batch: the activations are gone, the
        gradients and both moments are held, and the step's own temporaries on top; none on
        the GPU when the optimizer is offloaded to the CPU."""
        if s.optimizer_offload or not s.optimizer:
            return []
        terms = (
            context,
            *vllm_asleep(),
            Term(f"{who} parameters", s.params, S_STATES),
            Term(f"{who} gradients", s.grads, S_STATES),
            Term(f"{who} optimizer states", s.optimizer, S_ADAM),
            Term("AdamW step temporaries (foreach)", s.optimizer // 2, S_STEP),
            *resident(s),
        )
        return [Phase(f"{who} optimizer step", who, terms)]

    sp = int(actor_cfg.get("ulysses_sequence_parallel_size") or 1)
    update_batch = _batch(actor_cfg, "ppo_micro_batch_size", seq, world, sp, remove_padding)
    old_batch = _batch(rollout, "log_prob_micro_batch_size", seq, world, sp, remove_padding)
    share = f"gpu_memory_utilization {util:g}"
    room = budget  # what the engine's weights and KV cache may take
    if engine == "sglang":  # its share includes what is already on the GPU
        room = max(0, budget - CONTEXT - sum(t.bytes for t in resident()))
        share = f"mem_fraction_static {util:g} less what the GPU holds already"
        engine_term = Term(f"rollout engine (SGLang): {share}", room, S_SGLANG)
    else:
        engine_term = Term(f"rollout engine: {share}", budget, S_UTIL)
    phases = [
        Phase(
            "rollout",
            "rollout",
            (
                context,
                engine_term,
                *([Term("rollout CUDA graphs", graphs, S_GRAPHS)] if graphs else []),
                *resident(),
            ),
        ),
        # verl computes the entropy with the actor's log-probs (compute_log_prob)
        forward(a, actor, old_batch, "actor", 7),
    ]
    if r is not None:
        ref_batch = _batch(ref_cfg, "log_prob_micro_batch_size", seq, world, sp, remove_padding)
        phases.append(forward(r, actor, ref_batch, "reference", 4))
    if c is not None and critic is not None:
        critic_batch = _batch(
            critic_cfg,
            "ppo_micro_batch_size",
            seq,
            world,
            int(critic_cfg.get("ulysses_sequence_parallel_size") or 1),
            (critic_cfg.get("model") or {}).get("use_remove_padding"),
        )
        phases.append(update(c, critic, critic_batch, "critic", critic_cfg, 0))
        phases += optimizer_step(c, "critic")
    entropy = float(actor_cfg.get("entropy_coeff") or 0) != 0
    phases.append(update(a, actor, update_batch, "actor", arr, 7 if entropy else 4))
    phases += optimizer_step(a, "actor")
    max_len = int(rollout.get("max_model_len") or seq)
    refused = refusals(weights, room, kv_token, max_len, f"TP {tp}, {share}")
    verdict = judge(tuple(phases), capacity)
    notes = [
        kv_note(weights, room, kv_token, max_len),
        "not modelled: NCCL/RCCL buffers, allocator fragmentation, the rollout's own "
        "activation peak inside its budget, gradients kept between updates",
    ]
    return GpuPlan(
        groups=(GpuGroup(tuple(roles), world, tuple(phases)),),
        verdict=verdict,
        refusals=tuple(refused),
        fixes=tuple(_fixes(verdict, a, r, c, util, capacity, arr, critic_key)),
        notes=tuple(notes),
        nodes=nodes,
        gpus_per_node=per_node,
        anchors=ANCHORS,
    )


def critic_fsdp(critic: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The critic's FSDP settings and their key: `critic.fsdp` in verl 0.9,
    `critic.model.fsdp_config` before."""
    if isinstance(critic.get("fsdp"), dict):
        return critic["fsdp"], "critic.fsdp"
    return (critic.get("model") or {}).get("fsdp_config") or {}, "critic.model.fsdp_config"


def _fixes(
    verdict: Verdict,
    a: _States,
    r: _States | None,
    c: _States | None,
    util: float,
    capacity: int,
    arr: dict[str, Any],
    critic_key: str,
) -> list[str]:
    """The cheapest changes first: offload, a smaller micro batch, more TP, a smaller
    rollout budget."""
    if verdict.level == "ok":
        return []
    over = verdict.phase.bytes - int(0.9 * capacity)
    out = []
    for name, s, key in (
        ("actor", a, "actor_rollout_ref.actor.fsdp_config"),
        ("reference", r, "actor_rollout_ref.ref.fsdp_config"),
        ("critic", c, critic_key),
    ):
        if s is None or verdict.phase.role == name:
            continue
        if not s.param_offload and s.params:
            out.append(f"{key}.param_offload=true (frees {gib(s.params)} outside {name} phases)")
        if not s.optimizer_offload and s.optimizer:
            out.append(f"{key}.optimizer_offload=true (frees {gib(s.optimizer)})")
    phase = verdict.phase.name
    if phase == "actor update":
        out.append("a smaller actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        if not arr["model"].get("enable_gradient_checkpointing"):
            out.append("actor_rollout_ref.model.enable_gradient_checkpointing=true")
    elif phase == "actor log-prob":
        out.append("a smaller actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu")
    elif phase == "reference log-prob":
        out.append("a smaller actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu")
    elif phase == "critic update":
        out.append("a smaller critic.ppo_micro_batch_size_per_gpu")
    elif phase == "rollout":
        fits = util - over / capacity
        if fits > 0:
            out.append(f"actor_rollout_ref.rollout.gpu_memory_utilization={fits:.2f} or lower")
        out.append("a larger actor_rollout_ref.rollout.tensor_model_parallel_size")
    return out
