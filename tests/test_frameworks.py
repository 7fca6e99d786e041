"""Fidelity to the real frameworks: the examples' verl overrides compose against verl's real
Hydra config, and every OpenRLHF argument exists in the real parser of the pinned version.

The packages are installed (without their heavy dependencies) into a cache directory, one
directory per release, so two OpenRLHF generations can be checked side by side.
"""

from __future__ import annotations

import fcntl
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.errors import SpecError
from clusterctl.lint.frameworks import fidelity_findings, fidelity_notes, parser_flags
from clusterctl.spec import load_spec
from clusterctl.spec.models import VerlWorkload
from tests.conftest import ROOT, run_cli

CACHE = Path.home() / ".cache" / "clusterctl" / "frameworks"


def installed(package: str, version: str) -> tuple[str, ...]:
    """PACKAGE==VERSION (no dependencies) in a directory of its own, installed once; under a
    lock, since test files running at once (scripts/test.sh) may ask for the same one."""
    target = CACHE / f"{package}-{version}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{package}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            _install(package, version, target)
    return (str(target),)


def _install(package: str, version: str, target: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         f"{package}=={version}"],
        check=True, timeout=600,
    )  # fmt: skip
    (target / ".complete").touch()


@pytest.fixture(scope="module")
def verl_091() -> tuple[str, ...]:
    return installed("verl", "0.9.1")


@pytest.mark.parametrize(
    "package, version, example",
    [
        ("openrlhf", "0.11.2", "openrlhf-70b-h800.yaml"),
        ("openrlhf", "0.9.10", "openrlhf-mi300x-single-node.yaml"),
    ],
)
def test_openrlhf_examples_use_real_arguments(package: str, version: str, example: str) -> None:
    spec = load_spec(ROOT / "examples" / example).spec
    assert spec.versions.openrlhf == version
    path = installed(package, version)
    assert fidelity_findings(spec, path) == []
    typo = load_spec(
        ROOT / "examples" / example,
        [
            "workload.args.vllm.num_engins=2"
            if "." in next(iter(spec.workload.args))
            else "workload.args.vllm_num_engins=2"
        ],
    ).spec
    (finding,) = fidelity_findings(typo, path)
    assert finding.rule.id == "openrlhf-unknown-arg"
    assert "did you mean 'vllm" in finding.message and "num_engines" in finding.message


def test_openrlhf_check_skips_another_release() -> None:
    spec = load_spec(ROOT / "examples" / "openrlhf-mi300x-single-node.yaml").spec
    assert fidelity_findings(spec, installed("openrlhf", "0.11.2")) == []  # pinned 0.9.10


def test_flat_spelling_against_dotted_parser_names_the_new_flag() -> None:
    spec = load_spec(
        ROOT / "examples" / "openrlhf-70b-h800.yaml", ["workload.args.vllm_num_engines=4"]
    ).spec
    (finding,) = fidelity_findings(spec, installed("openrlhf", "0.11.2"))
    assert "vllm_num_engines" in finding.message


def test_parser_generations_differ_as_the_flag_rule_assumes() -> None:
    flat = parser_flags(
        Path(installed("openrlhf", "0.9.10")[0], "openrlhf", "cli", "train_ppo_ray.py").read_text()
    )
    dotted = parser_flags(
        Path(installed("openrlhf", "0.11.2")[0], "openrlhf", "cli", "train_ppo_ray.py").read_text()
    )
    assert {"actor_num_nodes", "vllm_num_engines", "colocate_all_models"} <= flat
    assert {"actor.num_nodes", "vllm.num_engines", "train.colocate_all"} <= dotted
    assert "actor_num_nodes" not in dotted


def test_verl_example_overrides_compose_against_real_config(verl_091: tuple[str, ...]) -> None:
    spec = load_spec(ROOT / "examples" / "verl-gsm8k-mi300x.yaml").spec
    assert spec.versions.verl == "0.9.1"
    assert fidelity_findings(spec, verl_091) == []


def test_verl_keys_are_judged_with_the_specs_group_choices(verl_091: tuple[str, ...]) -> None:
    """model_engine=megatron brings in the megatron actor's keys (verl 0.9.1 ppo_trainer.yaml:
    `actor@actor_rollout_ref.actor: ${model_engine}_actor`); composed without the choice they
    read as unknown."""
    from clusterctl.lint.frameworks import check_verl

    megatron_key = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
    spec = load_spec(
        ROOT / "examples" / "verl-gsm8k-mi300x.yaml",
        [f"workload.overrides.{megatron_key}=2"],
    ).spec
    wl = spec.workload
    assert isinstance(wl, VerlWorkload)
    unknown = {
        f.path[-1] for f in check_verl(spec, wl, verl_091) if f.rule.id == "verl-unknown-key"
    }
    assert unknown == {megatron_key}
    wl.overrides["model_engine"] = "megatron"
    unknown = {
        f.path[-1] for f in check_verl(spec, wl, verl_091) if f.rule.id == "verl-unknown-key"
    }
    assert unknown == set()


def test_verl_check_says_when_a_recipe_config_is_not_here(verl_091: tuple[str, ...]) -> None:
    spec = load_spec(
        ROOT / "examples" / "verl-gsm8k-mi300x.yaml",
        ["workload.config_path=/home/user/verl/recipe/dapo/config"],
    ).spec
    (note,) = fidelity_notes(spec, verl_091)
    assert "did not run" in note and "recipe/dapo/config" in note


def test_verl_unknown_key_gets_did_you_mean(verl_091: tuple[str, ...]) -> None:
    spec = load_spec(
        ROOT / "examples" / "verl-gsm8k-mi300x.yaml",
        [
            "workload.overrides.actor_rollout_ref.rollout.gpu_memory_utilisation=0.8",
            "workload.overrides.+trainer.extra_thing=1",
        ],
    ).spec
    (finding,) = fidelity_findings(spec, verl_091)
    assert finding.rule.id == "verl-unknown-key"
    assert "did you mean 'actor_rollout_ref.rollout.gpu_memory_utilization'" in finding.message


# ---- OpenRLHF's own start-up checks are the judge --------------------------------------------

ORL_DOTTED = ROOT / "examples" / "openrlhf-70b-h800.yaml"
ORL_FLAT = ROOT / "examples" / "openrlhf-mi300x-single-node.yaml"


@pytest.mark.parametrize(
    "example, version, sets, upstream_says",
    [
        # a mutually exclusive pair: async training with vLLM sleep mode
        (
            ORL_DOTTED,
            "0.11.2",
            ["workload.args.train.async_enable=true"],
            "Async RLHF is not supported with --vllm.enable_sleep.",
        ),
        # an estimator that needs several samples per prompt
        (
            ORL_DOTTED,
            "0.11.2",
            ["workload.args.algo.advantage.estimator=rloo"],
            "rloo requires n_samples_per_prompt > 1",
        ),
        (
            ORL_FLAT,
            "0.9.10",
            ["workload.args.advantage_estimator=rloo"],
            "rloo requires n_samples_per_prompt > 1",
        ),
        # a required value missing: gae's critic is derived from the reward model's path
        (
            ORL_DOTTED,
            "0.11.2",
            ["workload.args.reward.model_name_or_path=null"],
            "AttributeError: 'NoneType' object has no attribute 'split'",
        ),
    ],
)
def test_openrlhf_startup_verdict_is_openrlhfs_own(
    example: Path, version: str, sets: list[str], upstream_says: str
) -> None:
    spec = load_spec(example, sets).spec
    (finding,) = fidelity_findings(spec, installed("openrlhf", version))
    assert finding.rule.id == "openrlhf-startup-check"
    assert finding.message.endswith(upstream_says)


def test_openrlhf_wrong_dataset_key_is_an_unknown_argument() -> None:
    spec = load_spec(ORL_DOTTED, ["workload.args.data.prompt_key=prompt"]).spec
    (finding,) = fidelity_findings(spec, installed("openrlhf", "0.11.2"))
    assert finding.rule.id == "openrlhf-unknown-arg"
    assert finding.path == ("workload", "args", "data.prompt_key")


def test_validate_says_which_upstream_checks_ran(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    env = {"CLUSTERCTL_FRAMEWORK_PATH": installed("openrlhf", "0.11.2")[0]}
    ran = run_cli("validate", str(ORL_DOTTED), env=env)
    assert ran.returncode == 0, ran.stderr
    said = r"OpenRLHF 0\.11\.2 \(in /\S+/python[\d.]*\): its own parser and start-up checks ran"
    assert re.search(said, ran.stderr), ran.stderr
    missing = run_cli("validate", str(ORL_DOTTED), "--set", "versions.openrlhf=0.11.1")
    # one line: neither the image (not here) nor a local release can judge it
    assert (
        "note: OpenRLHF 0.11.1 cannot be judged here: no local container engine has the image "
        f"{load_spec(ORL_DOTTED).spec.container.image} with OpenRLHF in it, and no local Python "
        "has OpenRLHF 0.11.1"
    ) in missing.stderr
    assert "did not run" in missing.stderr


# ---- verl's own validate_config is the judge -------------------------------------------------

VERL_EXAMPLE = ROOT / "examples" / "verl-gsm8k-mi300x.yaml"
ACTOR_MBS = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
ROLLOUT_MBS = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
REF_MBS = "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"
CRITIC_MBS = "critic.ppo_micro_batch_size_per_gpu"


@pytest.fixture(scope="module")
def local_model() -> Path:
    """Qwen2.5-0.5B-Instruct's real config.json (tests/fixtures/memory/README.md says where it
    comes from): verl reads it, nothing is downloaded."""
    return ROOT / "tests" / "fixtures" / "memory" / "models" / "Qwen__Qwen2.5-0.5B-Instruct"


def local_judge(release: str = "0.9.1") -> str:
    """The local judge Python with verl RELEASE (CLUSTERCTL_VERL_PYTHON)."""
    from clusterctl.lint.frameworks import verl_python

    python = verl_python(release)
    assert python is not None
    return python


def _verl(local_model: Path, *sets: str) -> list[str]:
    paths = [
        f"workload.overrides.actor_rollout_ref.model.path={local_model}",
        f"workload.overrides.critic.model.path={local_model}",
    ]
    spec = load_spec(VERL_EXAMPLE, [*paths, *sets]).spec
    return [f"{f.rule.id}: {f.message}" for f in fidelity_findings(spec)]


def test_verl_example_passes_verls_own_validation(verl_python: str, local_model: Path) -> None:
    assert _verl(local_model) == []
    paths = [
        f"workload.overrides.actor_rollout_ref.model.path={local_model}",
        f"workload.overrides.critic.model.path={local_model}",
    ]
    spec = load_spec(VERL_EXAMPLE, paths).spec
    notes = fidelity_notes(spec)
    assert notes == [
        f"verl 0.9.1 (in {local_judge()}): its own validate_config ran on the composed "
        "ppo_trainer config"
    ]


@pytest.mark.parametrize(
    "sets, verl_says",
    [
        (
            [f"workload.overrides.{ACTOR_MBS}=null"],
            "Please set at least one of 'actor.ppo_micro_batch_size' or "
            "'actor.ppo_micro_batch_size_per_gpu'",
        ),
        (
            [f"workload.overrides.{ROLLOUT_MBS}=null"],
            "[actor_rollout_ref.rollout] Please set at least one of "
            "'actor_rollout_ref.rollout.log_prob_micro_batch_size'",
        ),
        (
            [
                f"workload.overrides.{REF_MBS}=null",
                "workload.overrides.actor_rollout_ref.actor.use_kl_loss=true",
            ],
            "[actor_rollout_ref.ref] Please set at least one of "
            "'actor_rollout_ref.ref.log_prob_micro_batch_size'",
        ),
        (
            [f"workload.overrides.{CRITIC_MBS}=null"],
            "[critic] Please set at least one of 'critic.micro_batch_size'",
        ),
        (
            ["workload.overrides.actor_rollout_ref.rollout.log_prob_micro_batch_size=8"],
            "You have set both 'actor_rollout_ref.rollout.log_prob_micro_batch_size' AND",
        ),
    ],
)
def test_verl_broken_variants_fail_with_verls_cause(
    verl_python: str, local_model: Path, sets: list[str], verl_says: str
) -> None:
    (finding,) = _verl(local_model, *sets)
    assert finding.startswith(
        f"verl-startup-check: verl 0.9.1 (in {local_judge()}) refuses this config at start-up"
    )
    assert verl_says in finding


def test_verl_ref_batch_only_needed_with_a_reference_policy(
    verl_python: str, local_model: Path
) -> None:
    # no KL loss, no KL in reward: verl builds no reference policy and asks nothing of it
    assert _verl(local_model, f"workload.overrides.{REF_MBS}=null") == []


def test_verl_wrong_dataset_key_gets_did_you_mean(verl_python: str, local_model: Path) -> None:
    (finding,) = _verl(local_model, "workload.overrides.data.train_file=/data/x.parquet")
    assert finding.startswith("verl-unknown-key") and "did you mean 'data.train_files'" in finding


def test_verl_model_on_the_hub_is_never_downloaded(verl_python: str) -> None:
    spec = load_spec(VERL_EXAMPLE).spec  # model: Qwen/Qwen2-7B-Instruct, a Hub name
    assert fidelity_findings(spec) == []
    (note,) = fidelity_notes(spec)
    assert note.startswith(
        f"verl 0.9.1 (in {local_judge()}): validate_config could not run: the model-dependent"
    )


@pytest.mark.parametrize(
    "version, example, names",
    [
        ("0.11.2", "openrlhf-70b-h800.yaml", ("ckpt.path", "ckpt.save_steps", "ckpt.load_enable")),
        (
            "0.9.10",
            "openrlhf-mi300x-single-node.yaml",
            ("ckpt_path", "save_steps", "load_checkpoint"),
        ),
    ],
)
def test_resume_is_written_in_each_openrlhf_releases_own_names(
    version: str, example: str, names: tuple[str, str, str]
) -> None:
    spec = load_spec(
        ROOT / "examples" / example,
        ["resume.checkpoint_dir=/ckpt/run", "resume.save_every=7"],
    ).spec
    args = spec.workload.args  # type: ignore[union-attr]
    assert (args[names[0]], args[names[1]], args[names[2]]) == ("/ckpt/run", 7, True)
    # the release's own parser and start-up checks take them
    assert fidelity_findings(spec, installed("openrlhf", version)) == []


def test_a_workload_setting_that_contradicts_resume_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(VERL_EXAMPLE, ["workload.overrides.trainer.save_freq=5"])
    [problem] = caught.value.problems
    assert problem.path == 'workload.overrides["trainer.save_freq"]'
    assert problem.message == (
        "5 contradicts resume: (which sets trainer.save_freq to 20); set it in one place"
    )


# verl 0.5.0 (the dev cluster's CPU example) has no validate_config: its checks run in
# RayPPOTrainer.__init__, which the judge builds as main_ppo does
# (framework/payload/verl_startup.py).
CPU_VERL_EXAMPLE = ROOT / "examples" / "verl-grpo-cpu-dev-cluster.yaml"


def test_verl_0_5_0_judges_the_cpu_example_in_its_trainer(verl_python: str) -> None:
    """The local judge (the image is named absent, so a Python with verl 0.5.0 judges; the
    image's own judge is in tests/e2e/test_verl_cpu.py)."""
    local = ("--set", "container.image=clusterctl/not-here:0.5.0")
    ok = run_cli("validate", str(CPU_VERL_EXAMPLE), *local)
    assert ok.returncode == 0, ok.stderr
    judged_by = f"verl 0.5.0 (in {local_judge('0.5.0')})"
    assert f"{judged_by}: its own validate_config ran on the composed ppo_trainer config" in (
        ok.stderr
    )
    # 3 workers, 2 samples per prompt: a batch of 5 prompts is 10 sequences
    bad = run_cli(
        "validate", str(CPU_VERL_EXAMPLE), *local,
        "--set", "workload.overrides.data.train_batch_size=5",
    )  # fmt: skip
    assert bad.returncode == 2
    assert (
        f"[verl-startup-check] {judged_by} refuses this config at start-up: AssertionError: "
        "real_train_batch_size (10) must be divisible by minimal possible batch size (3)"
    ) in bad.stderr
