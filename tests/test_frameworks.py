"""Fidelity to the real frameworks: the examples' verl overrides compose against verl's real
Hydra config, and every OpenRLHF argument exists in the real parser of the pinned version.

The packages are installed (without their heavy dependencies) into a cache directory, one
directory per release, so two OpenRLHF generations can be checked side by side.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.lint.frameworks import fidelity_findings, parser_flags
from clusterctl.spec import load_spec
from tests.conftest import ROOT

CACHE = Path.home() / ".cache" / "clusterctl" / "frameworks"


def installed(package: str, version: str) -> tuple[str, ...]:
    target = CACHE / f"{package}-{version}"
    if not (target / ".complete").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(target),
                f"{package}=={version}",
            ],
            check=True,
            timeout=600,
        )
        (target / ".complete").touch()
    return (str(target),)


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
    assert "OpenRLHF 0.11.2: its own parser and start-up checks ran" in ran.stderr
    missing = run_cli("validate", str(ORL_DOTTED), "--set", "versions.openrlhf=0.11.1")
    assert "OpenRLHF 0.11.1 is not installed here" in missing.stderr
    assert "did not run" in missing.stderr
