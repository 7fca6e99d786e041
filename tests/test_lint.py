"""Every lint rule: a spec that triggers it, and a near-identical one that does not."""

from __future__ import annotations

import pytest

from clusterctl.errors import SpecError
from clusterctl.lint.engine import RULES, lint_or_raise
from clusterctl.lint.registry import run_rules
from clusterctl.lint.workload import openrlhf_gpu_budget
from clusterctl.spec import load_spec
from clusterctl.spec.models import OpenRLHFWorkload
from tests.conftest import ROOT

VERL = ROOT / "examples" / "verl-gsm8k-mi300x.yaml"
ORL = ROOT / "examples" / "openrlhf-70b-h800.yaml"
ORL_AMD = ROOT / "examples" / "openrlhf-mi300x-single-node.yaml"
CPU = ROOT / "examples" / "cpu-dev-cluster.yaml"

# rule id, base example, --set that triggers it, --set for the clean twin
CASES = [
    (
        "openrlhf-gpu-budget",
        ORL,
        ["workload.args.vllm.num_engines=8", "workload.args.train.colocate_all=false"],
        [],
    ),
    ("openrlhf-gpus-idle", ORL_AMD, ["workload.args.vllm_num_engines=1"], []),
    ("openrlhf-colocation", ORL_AMD, ["workload.args.ref_num_gpus_per_node=2"], []),
    (
        "openrlhf-colocation",
        ORL,
        ["workload.args.vllm.num_engines=2"],
        ["workload.args.vllm.num_engines=4"],
    ),
    ("openrlhf-flag-generation", ORL, ["versions.openrlhf=0.9.10"], ["versions.openrlhf=0.10.2"]),
    ("openrlhf-flag-generation", ORL_AMD, ["versions.openrlhf=0.11.2"], []),
    (
        "openrlhf-prompt-data",
        ORL,
        ["workload.args.data.prompt_dataset=null"],
        [],
    ),
    (
        "openrlhf-prompt-data",
        ORL_AMD,
        ["workload.args.prompt_data="],
        ["workload.args.prompt_data=/data/p.jsonl"],
    ),
    (
        "trainer-needs-gpus",
        VERL,
        [
            "hardware.preset=none",
            "slurm.gpus_per_node=0",
            "network.fabric=ethernet",
            "network.hcas=[]",
            "network.gid_index=null",
        ],
        [],
    ),
    (
        "rollout-tp-divides-node",
        VERL,
        ["workload.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size=3"],
        ["workload.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size=4"],
    ),
    (
        "rollout-tp-spans-nodes",
        VERL,
        ["workload.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size=16"],
        ["workload.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size=8"],
    ),
    (
        "rollout-tp-spans-nodes",
        ORL,
        ["workload.args.vllm.tensor_parallel_size=16", "workload.args.vllm.num_engines=1"],
        [],
    ),
    ("verl-cpus-per-gpu", VERL, ["slurm.cpus_per_task=16"], ["slurm.cpus_per_task=24"]),
    (
        "amd-visibility-conflict",
        VERL,
        ["container.env.HIP_VISIBLE_DEVICES=0,1", "container.env.ROCR_VISIBLE_DEVICES=0,1"],
        ["container.env.HIP_VISIBLE_DEVICES=0,1"],
    ),
    (
        "ray-noset-visibility",
        VERL,
        ["container.env.RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1"],
        ["container.env.RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1"],
    ),
    (
        "ray-noset-visibility",
        VERL,
        ["container.env.RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=''"],
        [],
    ),
    (
        "ray-noset-visibility",
        ORL_AMD,
        ["versions.ray=2.44.0", "container.env.RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1"],
        ["versions.ray=2.44.0", "container.env.RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1"],
    ),
    ("ray-2.12-rocm", ORL_AMD, ["versions.ray=2.12.0"], ["versions.ray=2.9.3"]),
    ("verl-min-ray", VERL, ["versions.ray=2.40.0"], ["versions.ray=2.41.0"]),
    ("ray-unauthenticated", VERL, ["versions.ray=2.51.1"], ["versions.ray=2.52.0"]),
    (
        "vllm-weight-sync-bug",
        ORL,
        ["versions.vllm=0.4.3", "workload.args.train.colocate_all=false"],
        ["versions.vllm=0.4.2", "workload.args.train.colocate_all=false"],
    ),
    # the fix: all colocated with nccl, weights go by CUDA IPC and the buggy group is not made
    (
        "vllm-weight-sync-bug",
        ORL,
        ["versions.vllm=0.4.3", "workload.args.train.colocate_all=false"],
        ["versions.vllm=0.4.3"],
    ),
    ("rocm-min-mi300", VERL, ["versions.rocm=6.1.3"], ["versions.rocm=6.2.0"]),
    # MI325X from ROCm 6.3.1, MI355X (gfx950) from ROCm 7.0 (issue 43: presets of 2026)
    (
        "rocm-min-mi300",
        VERL,
        ["hardware.preset=mi325x", "versions.rocm=6.3.0"],
        ["hardware.preset=mi325x", "versions.rocm=6.3.1"],
    ),
    (
        "rocm-min-mi300",
        VERL,
        ["hardware.preset=mi355x", "versions.rocm=6.4.3"],
        ["hardware.preset=mi355x", "versions.rocm=7.0.0"],
    ),
    ("amd-needs-rocm-image", ORL_AMD, ["container.build.dockerfile=cuda"], []),
    (
        "fp16-on-mi300",
        VERL,
        ["workload.overrides.actor_rollout_ref.rollout.dtype=float16"],
        ["workload.overrides.actor_rollout_ref.rollout.dtype=bfloat16"],
    ),
    ("fp16-on-mi300", ORL_AMD, ["workload.args.param_dtype=fp16"], []),
    (
        "torch-compile-rocm62",
        ORL_AMD,
        ["versions.rocm=6.2.0", "container.env.TORCHINDUCTOR_MAX_AUTOTUNE=1"],
        ["versions.rocm=6.2.0", "container.env.TORCHINDUCTOR_MAX_AUTOTUNE=0"],
    ),
    (
        "rocm-weight-sync",
        ORL_AMD,
        ["workload.args.vllm_sync_backend=nccl"],
        [
            "workload.args.vllm_sync_backend=nccl",
            "network.nccl_env.NCCL_P2P_LEVEL=LOC",
            "network.nccl_env.NCCL_SHM_DISABLE=1",
        ],
    ),
    # gloo alone is not the fix: OpenRLHF still builds a PyNccl group (ppo_actor.py)
    (
        "rocm-weight-sync",
        ORL_AMD,
        ["workload.args.vllm_sync_with_ray=false"],
        ["workload.args.vllm_sync_with_ray=true"],
    ),
    # all colocated with nccl: CUDA IPC, no process group to fail
    (
        "rocm-weight-sync",
        ORL,
        ["hardware.preset=mi300x", "workload.args.vllm.sync_backend=gloo"],
        ["hardware.preset=mi300x"],
    ),
    (
        "gpu-memory-utilization",
        VERL,
        ["workload.overrides.actor_rollout_ref.rollout.gpu_memory_utilization=0.97"],
        [],
    ),
    ("gpu-memory-utilization", ORL, ["workload.args.vllm.gpu_memory_utilization=0.95"], []),
    ("nccl-socket-ifname", VERL, ["network.socket_ifname=null"], []),
    ("ib-hca-names", VERL, ["network.hcas=[rdma0, rdma1]"], ["network.hcas=[mlx5_0, bnxt_re1]"]),
    (
        "roce-gid-index",
        VERL,
        ["network.fabric=roce", "network.gid_index=null"],
        ["network.fabric=roce"],
    ),
    (
        "nccl-debug-trace",
        VERL,
        ["network.nccl_env.NCCL_DEBUG=TRACE"],
        ["network.nccl_env.NCCL_DEBUG=INFO"],
    ),
    ("ray-temp-dir-shared", VERL, ["ray.temp_dir=/data/ray"], ["ray.temp_dir=/tmp/ray-job"]),
    (
        "loopback-head",
        CPU,
        [],
        [
            "network.allow_loopback=false",
            "network.socket_ifname=eth0",
            "network.address_source=interface",
        ],
    ),
    (
        "loopback-head",
        CPU,
        ["network.allow_loopback=false"],
        ["network.allow_loopback=false", "slurm.nodes=1"],
    ),
    (
        "image-versions",
        VERL,
        ["container.image=rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev"],
        [
            "container.image=rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev",
            "versions.verl=0.6.0",
        ],
    ),
    ("time-limit-too-short", CPU, ["slurm.time=00:02:00"], ["slurm.time=00:03:00"]),
    (
        "time-limit-too-short",
        CPU,
        ["slurm.time=5", "slurm.signal_grace=250"],
        ["slurm.time=5", "slurm.signal_grace=30"],
    ),
    (
        "literal-secret",
        VERL,
        ["container.env.OPENAI_API_KEY=sk-123"],
        ["container.env.OPENAI_BASE_URL=http://x"],
    ),
    (
        "checkpoint-on-shared-storage",
        VERL,
        ["resume.checkpoint_dir=/ckpt"],  # the container's own file system
        ["resume.checkpoint_dir=/root/.cache/huggingface/ckpt"],
    ),
    ("checkpoint-on-shared-storage", VERL, ["resume.checkpoint_dir=/data/ckpt"], []),  # read-only
    (
        "checkpoint-on-shared-storage",
        CPU,
        ["container.mounts=[{source: /tmp/ck, target: /ck}]", "resume.checkpoint_dir=/ck/run"],
        ["container.mounts=[{source: /shared/ck, target: /ck}]", "resume.checkpoint_dir=/ck/run"],
    ),
    (
        "literal-secret",
        ORL,
        ["workload.args.logger.wandb.key=0123abcd"],
        ["workload.args.logger.wandb.key=true"],  # the fix: WANDB_API_KEY via env_passthrough
    ),
]


def rule_ids(example: object, sets: list[str]) -> set[str]:
    """The registered rules that fire. The frameworks' own checks (FIDELITY_RULES, a verl
    import alone takes ~6 s) are not cases here: tests/test_frameworks.py judges them."""
    loaded = load_spec(example, sets)  # type: ignore[arg-type]
    return {f.rule.id for f in run_rules(loaded.spec)}


@pytest.mark.parametrize(
    "rule_id, example, trigger, clean", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_triggers_and_its_twin_does_not(
    rule_id: str, example: object, trigger: list[str], clean: list[str]
) -> None:
    assert rule_id in rule_ids(example, trigger)
    assert rule_id not in rule_ids(example, clean)


def test_every_registered_rule_has_a_case() -> None:
    assert {c[0] for c in CASES} == set(RULES)
    assert len(RULES) >= 20


def test_examples_pass_their_own_lint() -> None:
    for example in (VERL, ORL, ORL_AMD, CPU):
        lint_or_raise(load_spec(example))


def test_error_findings_name_field_line_and_fix() -> None:
    loaded = load_spec(VERL, ["versions.ray=2.12.0"])
    with pytest.raises(SpecError) as info:
        lint_or_raise(loaded)
    (problem,) = [p for p in info.value.problems if "[ray-2.12-rocm]" in p.message]
    lines = VERL.read_text().splitlines()
    versions = lines.index("versions:")
    ray_line = next(i for i, line in enumerate(lines) if i > versions and line.startswith("  ray:"))
    assert problem.path == "versions.ray"
    assert problem.line == ray_line + 1
    assert "fix: use Ray >= 2.45" in problem.message


def test_spec_level_allow_list() -> None:
    loaded = load_spec(VERL, ["versions.ray=2.40.0", "lint.allow=[verl-min-ray]"])
    outcome = lint_or_raise(loaded)
    assert any("[verl-min-ray]" in p.message for p in outcome.allowed)
    assert not any("[verl-min-ray]" in w.message for w in outcome.warnings)


@pytest.mark.parametrize(
    "sets, expected",
    [
        # the 2 x 8 example: every model colocated on 16 GPUs
        ([], 16),
        # no colocation: actor 16 + ref 16 + critic 16 + reward 16 + vLLM 4x4
        (["workload.args.train.colocate_all=false"], 80),
        # GRPO-style: no critic; remote reward drops the reward model; KL 0 drops ref
        (
            [
                "workload.args.train.colocate_all=false",
                "workload.args.algo.advantage.estimator=group_norm",
                "workload.args.reward.remote_url=http://rm",
                "workload.args.algo.kl.init_coef=0",
            ],
            32,
        ),
        # async training: vLLM engines get their own GPUs beside the colocated actor (16 + 4x4)
        (["workload.args.train.async_enable=true"], 32),
        # an agent function stands in for the reward model (no reward 16)
        (
            [
                "workload.args.train.colocate_all=false",
                "workload.args.train.agent_func_path=/agent.py",
            ],
            64,
        ),
        # actor+ref and critic+reward colocated in pairs
        (
            [
                "workload.args.train.colocate_all=false",
                "workload.args.train.colocate_actor_ref=true",
                "workload.args.train.colocate_critic_reward=true",
            ],
            48,
        ),
    ],
)
def test_openrlhf_gpu_budget_arithmetic(sets: list[str], expected: int) -> None:
    wl = load_spec(ORL, sets).spec.workload
    assert isinstance(wl, OpenRLHFWorkload)
    assert openrlhf_gpu_budget(wl)[0] == expected


@pytest.mark.parametrize(
    "image, expected",
    [
        (
            "rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev",
            {"verl": "0.6.0", "rocm": "7.0", "vllm": "0.11.0"},
        ),
        (
            "rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4",
            {"rocm": "6.2", "python": "3.9", "vllm": "0.6.4"},
        ),
        ("docker.io/rocm/verl:verl-0.7.1.amd0_rocm7.0.2_vllm0.20.2", {"verl": "0.7.1"}),
        ("nvcr.io/nvidia/pytorch:26.03-py3", {}),
        ("verl-rocm:0.9.1", {}),
        ("registry:5000/rocm/verl", {}),
        # verl's own tags (verl docker/README.md @b178a3c): vLLM 0.12 / 0.24 without the dot;
        # the "verl0.5" of an app-/base- image names its line, not an installed verl
        ("verlai/verl:vllm012.dev3", {"vllm": "0.12"}),
        ("verlai/verl:vllm024.latest", {"vllm": "0.24"}),
        (
            "verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2",
            {"vllm": "0.10.0"},
        ),
    ],
)
def test_image_tags_state_versions(image: str, expected: dict[str, str]) -> None:
    from clusterctl.spec.images import image_versions

    stated = image_versions(image)
    assert {k: stated[k] for k in expected} == expected
    if not expected:
        assert stated == {}


def test_version_rules_read_the_image_when_the_spec_is_silent() -> None:
    """A starter spec names an image and declares no ROCm: the image's ROCm still counts."""
    sets = ["container.image=rocm/vllm:rocm6.1_mi300_ubuntu22.04_py3.10_vllm_0.6.0"]
    assert "rocm-min-mi300" in rule_ids(VERL, sets)
    assert "rocm-min-mi300" not in rule_ids(VERL, [*sets, "versions.rocm=6.2.0"]) - {
        "image-versions"
    }


@pytest.mark.parametrize(
    "text, seconds",
    [("30", 1800), ("5:30", 330), ("12:00:00", 43200), ("2-00:00:00", 172800), ("1-2", 93600),
     ("1-2:30", 95400), ("UNLIMITED", None)],
)  # fmt: skip
def test_slurm_time_in_seconds(text: str, seconds: int | None) -> None:
    from clusterctl.lint.rules import slurm_seconds

    assert slurm_seconds(text) == seconds


# issue 29 item 4: versions are read as pip reads them (packaging), not split on dots
@pytest.mark.parametrize(
    ("ray", "refused"),
    [("v2.45.0", False), ("2.41.0rc1", True), ("2.41.0", False), ("2.40.0.post1", True)],
)
def test_verl_min_ray_reads_versions_as_pip_does(ray: str, refused: bool) -> None:
    assert ("verl-min-ray" in rule_ids(VERL, [f"versions.ray={ray}"])) is refused


def test_a_two_part_version_is_the_same_release_as_its_three_part_spelling() -> None:
    from clusterctl.spec.images import same_release
    from clusterctl.spec.presets import same_version

    assert same_version("0.6", "0.6.0") and not same_version("0.6", "0.6.1")
    assert same_release("7.0.2", "7.0") and same_release("0.11.0.dev", "0.11.0")
    assert not same_release("0.10.2", "0.11")


# issue 20 item 10: secrets by shape in any field, not only in named values
@pytest.mark.parametrize(
    "assignment",
    [
        "workload.command=git clone https://oauth2:ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/x/y",
        "slurm.extra=[--comment=https://me:hunter22@pypi.example/simple]",
    ],
)
def test_a_secret_by_shape_is_refused_wherever_it_is(assignment: str) -> None:
    assert "literal-secret" in rule_ids(CPU, [assignment])


def test_a_url_with_a_reference_or_no_password_is_no_secret() -> None:
    clean = [
        "slurm.extra=[--comment=https://pypi.example/simple]",
        "workload.command=pip install git+https://${GH_USER}:$GH_TOKEN@github.com/x/y",
    ]
    for assignment in clean:
        assert "literal-secret" not in rule_ids(CPU, [assignment])


def test_a_built_images_base_tag_states_the_rocm_it_keeps() -> None:
    """issue 21 item 6: the build's base image tag is read like the image's own tag, for what a
    build keeps (ROCm, CUDA, Python; its pip set may replace the base's vLLM)."""
    old_base = ["container.build.base_image=rocm/vllm:rocm6.1_mi300_ubuntu22.04_py3.10_vllm_0.6.0"]
    assert "rocm-min-mi300" in rule_ids(VERL, old_base)
    declared = [*old_base, "versions.rocm=6.4.1"]
    assert "image-versions" in rule_ids(VERL, declared)
