"""OpenRLHF's memory on each GPU: DeepSpeed workers for the actor, critic, reference and reward
models and vLLM engines for the rollout, each role on its own GPUs unless colocated
(--colocate_actor_ref, --colocate_critic_reward, --colocate_all_models; from 0.10.2 spelled
--train.colocate_*). Every setting is read from the arguments OpenRLHF's own parser and
start-up fix-ups produce (framework/payload/openrlhf_startup.py); every model size from
transformers' own classes; the trained roles' model states from DeepSpeed's own estimators
(framework/payload/openrlhf_memory.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from clusterctl.memory.engine import CONTEXT, S_CONTEXT, S_GRAPHS, graphs_bytes, kv_note, refusals
from clusterctl.memory.ledger import GpuGroup, GpuPlan, Phase, Term, judge
from clusterctl.memory.model import BF16, S_ACTIVATIONS, Batch, Model

# setting: (its name from OpenRLHF 0.10.2, dotted; its name before). Each is read from the
# parsed arguments, so a default is OpenRLHF's own.
NAMES = {
    "actor_nodes": ("actor.num_nodes", "actor_num_nodes"),
    "actor_gpus": ("actor.num_gpus_per_node", "actor_num_gpus_per_node"),
    "ref_nodes": ("ref.num_nodes", "ref_num_nodes"),
    "ref_gpus": ("ref.num_gpus_per_node", "ref_num_gpus_per_node"),
    "critic_nodes": ("critic.num_nodes", "critic_num_nodes"),
    "critic_gpus": ("critic.num_gpus_per_node", "critic_num_gpus_per_node"),
    "reward_nodes": ("reward.num_nodes", "reward_num_nodes"),
    "reward_gpus": ("reward.num_gpus_per_node", "reward_num_gpus_per_node"),
    "colocate_all": ("train.colocate_all", "colocate_all_models"),
    "colocate_actor_ref": ("train.colocate_actor_ref", "colocate_actor_ref"),
    "colocate_critic_reward": ("train.colocate_critic_reward", "colocate_critic_reward"),
    "engines": ("vllm.num_engines", "vllm_num_engines"),
    "tp": ("vllm.tensor_parallel_size", "vllm_tensor_parallel_size"),
    "utilization": ("vllm.gpu_memory_utilization", "vllm_gpu_memory_utilization"),
    "enforce_eager": ("vllm.enforce_eager", "enforce_eager"),
    "vllm_sleep": ("vllm.enable_sleep", "vllm_enable_sleep"),
    "ds_sleep": ("ds.enable_sleep", "deepspeed_enable_sleep"),
    "zero_stage": ("ds.zero_stage", "zero_stage"),
    "adam_offload": ("ds.adam_offload", "adam_offload"),
    "checkpointing": ("actor.gradient_checkpointing_enable", "gradient_checkpointing"),
    "packing": ("ds.packing_samples", "packing_samples"),
    "dynamic": ("train.dynamic_batch_enable", "use_dynamic_batch"),
    "train_tokens": ("train.max_tokens_per_gpu", "train_max_tokens_per_gpu"),
    "rollout_tokens": ("rollout.max_tokens_per_gpu", "rollout_max_tokens_per_gpu"),
    "train_micro": ("train.micro_batch_size", "micro_train_batch_size"),
    "rollout_micro": ("rollout.micro_batch_size", "micro_rollout_batch_size"),
    "ring": ("ds.ring_attn_size", "ring_attn_size"),
    "ds_tp": ("ds.tensor_parallel_size", "ds_tensor_parallel_size"),
    "actor_model": ("actor.model_name_or_path", "pretrain"),
    "critic_model": ("critic.model_name_or_path", "critic_pretrain"),
    "reward_model": ("reward.model_name_or_path", "reward_pretrain"),
    "remote_reward": ("reward.remote_url", "remote_rm_url"),
    "kl": ("algo.kl.init_coef", "init_kl_coef"),
    "ref_offload": ("ref.offload", "ref_reward_offload"),
    "reward_offload": ("reward.offload", "ref_reward_offload"),
    "max_len": ("data.max_len", "max_len"),
}

# a role's settings by their prefix in NAMES (the reference's flags say "ref")
PREFIX = {"reference": "ref"}

# vLLM's own default when OpenRLHF passes none (before 0.6 it had no flag for it):
# vllm/engine/arg_utils.py EngineArgs.gpu_memory_utilization = 0.90 (vLLM 0.4-0.27)
VLLM_DEFAULT_UTILIZATION = 0.9

S_STATES = (
    "DeepSpeed's own estimate of the model states a GPU (deepspeed/runtime/zero: "
    "estimate_zero3_model_states_mem_needs, estimate_zero2_model_states_mem_needs; ZeRO-1 "
    "as ZeRO-2), the optimizer on the CPU with --adam_offload"
)
S_INFERENCE = (
    "a frozen model under DeepSpeed inference: bf16 parameters, sharded over its GPUs with "
    "ZeRO-3 and on the CPU with its offload flag, whole otherwise (OpenRLHF's "
    "get_ds_eval_config: stage 3 if --zero_stage 3 else 0, offload_param; "
    "openrlhf/utils/deepspeed, 0.5-0.11.2); ZeRO-3 gathers a decoder layer and the next"
)
S_LOGITS = (
    "logits [tokens, vocab]: the model's bf16 output and its float32 copy (OpenRLHF "
    "models/actor.py casts them: 0.11.2 `output['logits'].to(torch.float32)`), 6 bytes a "
    "token and vocabulary entry; training adds their float32 gradient, 4 more"
)
S_UTIL = (
    "vLLM >= 0.7: gpu_memory_utilization is the share of the GPU's whole memory the engine "
    "takes; OpenRLHF passes --vllm_gpu_memory_utilization to vLLM unchanged "
    "(openrlhf/trainer/ray/vllm_engine.py, create_vllm_engines), vLLM's default 0.9 without it"
)
S_ASLEEP = (
    "a vLLM engine put to sleep (--vllm_enable_sleep, level 1) frees its weights and KV cache "
    "(vLLM docs, sleep mode); awake, it holds its whole share"
)


@dataclass(frozen=True)
class Settings:
    """OpenRLHF's parsed arguments, read by the names of either release line."""

    args: dict[str, Any]

    def __call__(self, key: str, default: Any = None) -> Any:
        for name in NAMES[key]:
            if name in self.args and self.args[name] is not None:
                return self.args[name]
        return default

    def flag(self, key: str) -> str:
        """The setting's name as this release spells it (dotted from 0.10.2)."""
        dotted, flat = NAMES[key]
        return f"--{dotted if dotted in self.args else flat}"

    def gpus(self, role: str) -> int:
        prefix = PREFIX.get(role, role)
        return int(self(f"{prefix}_nodes", 1)) * int(self(f"{prefix}_gpus", 8))

    def max_len(self) -> int:
        """The longest sequence: --max_len, else --prompt_max_len + --generate_max_len
        (train_ppo_ray.py 0.6: `args.max_len if args.max_len else ...`)."""
        if self("max_len"):
            return int(self("max_len"))
        return int(self.args.get("prompt_max_len", 1024)) + int(
            self.args.get("generate_max_len", 1024)
        )

    def batch(self, micro: str, tokens: str) -> Batch:
        """A GPU's micro batch: a token budget with dynamic batches, else MICRO sequences of
        the longest length, packed with --packing_samples; ring attention splits each."""
        ring = max(1, int(self("ring", 1)))
        if self("dynamic"):
            return Batch(int(self(tokens) or self("train_tokens")) // ring, 0, True)
        sequences = max(1, int(self(micro, 1)))
        return Batch(sequences * self.max_len() // ring, sequences, bool(self("packing")))

    def roles(self) -> dict[str, bool]:
        """Which DeepSpeed roles the job builds (train_ppo_ray.py: a reference with a KL
        coefficient above 0, a critic where the fix-ups left a critic model, a reward model
        unless a remote one is named)."""
        return {
            "actor": True,
            "reference": float(self("kl", 0.01)) > 0,
            "critic": bool(self("critic_model")),
            "reward": not self("remote_reward") and bool(self("reward_model")),
        }


def model_request(s: Settings) -> dict[str, dict[str, Any]]:
    """The models the judge builds: role -> its path and whether it has a value head. Several
    reward models (a comma-separated list): the first stands for each."""
    roles = s.roles()
    out = {"actor": {"path": str(s("actor_model")), "critic": False}}
    if roles["critic"]:
        out["critic"] = {"path": str(s("critic_model")), "critic": True}
    if roles["reward"]:
        out["reward"] = {"path": str(s("reward_model")).split(",")[0], "critic": True}
    return out


def trained_request(s: Settings) -> list[dict[str, Any]]:
    """The trained roles DeepSpeed's estimators size, on their own GPUs."""
    roles = s.roles()
    return [
        {
            "role": role,
            "stage": int(s("zero_stage", 2)),
            "nodes": int(s(f"{role}_nodes", 1)),
            "gpus_per_node": int(s(f"{role}_gpus", 8)),
            "cpu_offload": bool(s("adam_offload")),
        }
        for role in ("actor", "critic")
        if roles[role]
    ]


def plan_openrlhf(
    args: dict[str, Any],
    facts: dict[str, Any],
    capacity: int,
    vllm: Version | None,
    nodes: int,
    gpus_per_node: int,
) -> GpuPlan:
    """The per-GPU plan of OpenRLHF's parsed ARGS and the judge's FACTS on GPUs of CAPACITY."""
    s = Settings(args)
    roles = s.roles()
    models = {r: Model.from_facts(f) for r, f in facts["models"].items()}
    models["reference"] = models["actor"]
    stage = int(s("zero_stage", 2))
    context = Term("CUDA/HIP context", CONTEXT, S_CONTEXT)
    train, rollout_batch = (
        s.batch("train_micro", "train_tokens"),
        s.batch("rollout_micro", "rollout_tokens"),
    )
    checkpointing = bool(s("checkpointing"))

    def states(role: str) -> int:
        """What ROLE keeps on each of its GPUs between its phases."""
        if role in ("actor", "critic"):
            return int(facts["states"][role])
        m = models[role]
        offload = bool(s(f"{PREFIX.get(role, role)}_offload"))
        if stage == 3:
            return 0 if offload else m.params * BF16 // s.gpus(role)
        return m.params * BF16

    def gathered(role: str) -> list[Term]:
        m = models[role]
        if stage == 3 and role not in ("actor", "critic"):  # the estimate holds the actor's
            return [Term(f"{role} gathered ZeRO-3 layers", 2 * BF16 * m.layer_params, S_INFERENCE)]
        return []

    def logits(role: str, tokens: int, training: bool) -> list[Term]:
        if role not in ("actor", "reference"):
            return []  # a value head: one number a token
        per_token = models[role].vocab * (10 if training else 6)
        return [Term(f"logits, {tokens} tokens", tokens * per_token, S_LOGITS, per_token)]

    def forward(role: str, b: Batch, others: list[Term]) -> Phase:
        act = models[role].activation_bytes_per_token()
        what = {"actor": "actor log-prob", "reference": "reference log-prob"}.get(role)
        return Phase(
            what or f"{role} forward",
            role,
            (
                context,
                Term(
                    f"{role} states" if role in ("actor", "critic") else f"{role} parameters",
                    states(role),
                    S_STATES if role in ("actor", "critic") else S_INFERENCE,
                ),
                *gathered(role),
                Term(
                    f"activations, {b.tokens} tokens (forward only)",
                    b.tokens * act,
                    S_ACTIVATIONS,
                    act,
                ),
                *logits(role, b.tokens, False),
                *others,
            ),
            b.tokens,
            b.sequences,
            b.packed,
        )

    def update(role: str, others: list[Term]) -> Phase:
        per_token = models[role].training_bytes_per_token(checkpointing)
        return Phase(
            f"{role} update",
            role,
            (
                context,
                Term(f"{role} model states (ZeRO-{stage})", states(role), S_STATES),
                Term(
                    f"activations, {train.tokens} tokens"
                    + (", gradient checkpointing" if checkpointing else ""),
                    train.tokens * per_token,
                    S_ACTIVATIONS,
                    per_token,
                ),
                *logits(role, train.tokens, True),
                *others,
            ),
            train.tokens,
            train.sequences,
            train.packed,
        )

    # the rollout engines
    engines, tp = int(s("engines", 0) or 0), max(1, int(s("tp", 1)))
    util = float(s("utilization", VLLM_DEFAULT_UTILIZATION))
    budget = int(util * capacity)
    graphs = graphs_bytes(bool(s("enforce_eager")), vllm)
    actor = models["actor"]
    weights, kv_token, max_len = (
        actor.params * BF16 // tp,
        actor.kv_bytes_per_token(tp),
        s.max_len(),
    )
    awake = [Term(f"rollout engine: gpu_memory_utilization {util:g}", budget, S_UTIL)]
    if graphs:
        awake.append(Term("rollout CUDA graphs", graphs, S_GRAPHS))

    colocated = bool(s("colocate_all"))
    pairs = [["actor"] + (["reference"] if s("colocate_actor_ref") and roles["reference"] else [])]
    pairs += [["reference"]] if roles["reference"] and len(pairs[0]) == 1 else []
    critic_side = [r for r in ("critic", "reward") if roles[r]]
    if s("colocate_critic_reward") and len(critic_side) == 2:
        pairs.append(critic_side)
    else:
        pairs += [[r] for r in critic_side]
    if colocated:
        pairs = [[r for r in ("actor", "reference", "critic", "reward") if roles[r]]]

    def left(role: str, group: list[str]) -> list[Term]:
        """What the group's other roles keep on the GPU while ROLE works."""
        out = []
        for other in group:
            if other == role:
                continue
            # --deepspeed_enable_sleep: the actor's and critic's states go to the CPU between
            # their own phases (OpenRLHF offload_deepspeed_states, trainer/ray/ppo_actor.py)
            sleeps = bool(s("ds_sleep")) and other in ("actor", "critic")
            held = 0 if sleeps else states(other)
            if held:
                out.append(Term(f"{other} states left on the GPU", held, S_STATES))
        if colocated and engines and role != "rollout":
            if not s("vllm_sleep"):
                out += awake
            elif graphs:
                out.append(Term("rollout engine asleep (CUDA graphs)", graphs, S_ASLEEP))
        return out

    groups = []
    for group in pairs:
        phases = []
        for role in group:
            if role != "critic":  # the critic's value pass is not modelled (notes)
                phases.append(forward(role, rollout_batch, left(role, group)))
        for role in ("critic", "actor"):
            if role in group:
                phases.append(update(role, left(role, group)))
        gpus = s.gpus(group[0])
        if colocated and engines:
            rollout = Phase("rollout", "rollout", (context, *awake, *left("rollout", group)))
            phases.insert(0, rollout)
            groups.append(GpuGroup(("rollout", *group), gpus, tuple(phases)))
        else:
            groups.append(GpuGroup(tuple(group), gpus, tuple(phases)))
    if engines and not colocated:
        rollout = Phase("rollout", "rollout", (context, *awake))
        groups.insert(0, GpuGroup(("rollout",), engines * tp, (rollout,)))

    verdict = judge(tuple(p for g in groups for p in g.phases), capacity)
    refused = (
        refusals(weights, budget, kv_token, max_len, f"TP {tp}, gpu_memory_utilization {util:g}")
        if engines
        else []
    )
    notes = [
        *([kv_note(weights, budget, kv_token, max_len)] if engines else []),
        f"{sum(g.gpus for g in groups)} GPUs for the roles (the job has "
        f"{nodes * gpus_per_node}); Ray places each group",
        "not modelled: NCCL/RCCL buffers, allocator fragmentation, the critic's value pass "
        "while experiences are made, DeepSpeed's communication buckets",
    ]
    if int(s("ds_tp", 1)) > 1:
        notes.append("DeepSpeed AutoTP (ds_tensor_parallel_size > 1) is not modelled")
    return GpuPlan(
        groups=tuple(groups),
        verdict=verdict,
        refusals=tuple(refused),
        fixes=tuple(_fixes(s, verdict.phase, verdict.level, util, capacity)),
        notes=tuple(notes),
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        anchors=_anchors(s),
    )


def _anchors(s: Settings) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each phase's settings, as this release spells them, cheapest fix first."""
    awake = ("vllm_sleep", "utilization") if s("colocate_all") else ()
    trained = (*awake, "adam_offload", "ds_sleep", "train_micro", "checkpointing", "zero_stage")
    frozen = (*awake, "rollout_micro")
    keys = {
        "rollout": ("utilization", "tp", "ds_sleep"),
        "actor update": trained,
        "critic update": trained,
        "actor log-prob": frozen,
        "reference log-prob": (*frozen, "ref_offload"),
        "reward forward": (*frozen, "reward_offload"),
    }
    return tuple(
        (phase, tuple(s.flag(k).removeprefix("--") for k in names)) for phase, names in keys.items()
    )


def _fixes(s: Settings, phase: Phase, level: str, util: float, capacity: int) -> list[str]:
    """The cheapest changes first: offload, sleep, a smaller micro batch, checkpointing,
    ZeRO-3, a smaller rollout share."""
    if level == "ok":
        return []
    out = []
    if phase.role in ("actor", "critic"):
        if not s("adam_offload"):
            out.append(f"{s.flag('adam_offload')} (the optimizer states to the CPU)")
        if s("colocate_all") and not s("ds_sleep"):
            out.append(f"{s.flag('ds_sleep')} (the other models' states to the CPU)")
        out.append(f"a smaller {s.flag('train_micro')}")
        if not s("checkpointing"):
            out.append(s.flag("checkpointing"))
        if int(s("zero_stage", 2)) < 3:
            out.append(f"{s.flag('zero_stage')} 3")
    elif phase.role == "rollout":
        over = phase.bytes - int(0.9 * capacity)
        if s("colocate_all") and not s("ds_sleep"):
            out.append(f"{s.flag('ds_sleep')} (the trained models' states to the CPU)")
        if util - over / capacity > 0:
            out.append(f"{s.flag('utilization')} {util - over / capacity:.2f} or lower")
        out.append(f"a larger {s.flag('tp')}")
    else:
        out.append(f"a smaller {s.flag('rollout_micro')}")
        if phase.role in ("reference", "reward"):
            key = "ref_offload" if phase.role == "reference" else "reward_offload"
            if not s(key):
                out.append(f"{s.flag(key)} (with ZeRO-3: its parameters on the CPU)")
    if s("colocate_all") and not s("vllm_sleep") and phase.role != "rollout":
        out.insert(0, f"{s.flag('vllm_sleep')} (the rollout engine frees its share)")
    return out


def why_not(s: Settings) -> str | None:
    """Why these arguments have no plan, if they have none."""
    if int(s("zero_stage", 2)) == 0:
        return "ZeRO stage 0 is not modelled (DeepSpeed's estimators size stages 1-3)"
    if not s("actor_model"):
        return "no actor model is named"
    return None
