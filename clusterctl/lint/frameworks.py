"""Fidelity to the real frameworks: check workload keys against verl's Hydra config and
OpenRLHF's argument parser, when those packages are installed where clusterctl runs.

Neither framework is imported (both pull in torch, vLLM, DeepSpeed ...): verl's config is
composed from its YAML files with Hydra, and OpenRLHF's flags are read from the parser's
source with ``ast``.
"""

from __future__ import annotations

import ast
import difflib
import importlib.machinery
import importlib.metadata
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from clusterctl.lint.registry import Finding, Rule
from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload

VERL_UNKNOWN = Rule(
    "verl-unknown-key",
    "error",
    "a Hydra override that verl's config does not have",
    "fix the key (see the did-you-mean) or prefix it with + to add a new one",
    "verl/trainer/config/ppo_trainer.yaml, composed with Hydra",
    lambda spec: (),
)
OPENRLHF_UNKNOWN = Rule(
    "openrlhf-unknown-arg",
    "error",
    "an argument OpenRLHF's parser does not define",
    "fix the name (see the did-you-mean); OpenRLHF renamed flags to dotted names in 0.10.2",
    "openrlhf/cli/train_ppo_ray.py argument parser",
    lambda spec: (),
)
FIDELITY_RULES = (VERL_UNKNOWN, OPENRLHF_UNKNOWN)

# The Hydra config each verl entry point composes.
VERL_CONFIGS = {"verl.trainer.main_ppo": "ppo_trainer"}


SearchPath = tuple[str, ...] | None


def package_dir(name: str, path: SearchPath = None) -> Path | None:
    """Where an installed package lives, found without importing (executing) it."""
    spec = importlib.machinery.PathFinder.find_spec(name, list(path) if path else None)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed_version(dist: str, path: SearchPath = None) -> str | None:
    finder = (
        importlib.metadata.distributions(name=dist, path=list(path))
        if path
        else importlib.metadata.distributions(name=dist)
    )
    found = list(finder)
    return found[0].version if found else None


def parser_flags(source: str) -> set[str]:
    """Every option string given to ``add_argument`` in a module's source."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            for arg in node.args:
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and arg.value.startswith("-")
                ):
                    flags.add(arg.value.lstrip("-"))
    return flags


@cache
def openrlhf_flags(entrypoint: str, path: SearchPath = None) -> frozenset[str] | None:
    root = package_dir(entrypoint.split(".")[0], path)
    if root is None:
        return None
    module = root.parent.joinpath(*entrypoint.split(".")).with_suffix(".py")
    if not module.is_file():
        return None
    return frozenset(parser_flags(module.read_text(encoding="utf-8")))


def _did_you_mean(name: str, options: set[str] | frozenset[str]) -> str:
    near = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""


def check_openrlhf(
    wl: OpenRLHFWorkload, pinned: str | None, path: SearchPath = None
) -> Iterator[Finding]:
    """Check the arguments against the installed OpenRLHF, when it is the pinned version."""
    installed = installed_version("openrlhf", path)
    if installed is None or (pinned is not None and installed != pinned):
        return  # another release's parser would judge the wrong generation of flags
    flags = openrlhf_flags(wl.entrypoint, path)
    if flags is None:
        return
    for key in wl.args:
        name = key.lstrip("-")
        if name not in flags:
            other = name.replace(".", "_") if "." in name else None
            hint = (
                f"; this OpenRLHF uses {other!r}" if other in flags else _did_you_mean(name, flags)
            )
            yield Finding(
                OPENRLHF_UNKNOWN,
                ("workload", "args", key),
                f"--{name} is not an argument of {wl.entrypoint}{hint}",
            )


@cache
def verl_config_keys(config_name: str, path: SearchPath = None) -> frozenset[str] | None:
    """All dotted keys of verl's composed Hydra config (None when verl or Hydra is missing)."""
    root = package_dir("verl", path)
    if root is None or package_dir("hydra") is None:
        return None
    config_dir = root / "trainer" / "config"
    if not (config_dir / f"{config_name}.yaml").is_file():
        return None
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name=config_name)
    keys: set[str] = set()

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, DictConfig):
            for key in node:
                path = f"{prefix}.{key!s}" if prefix else str(key)
                keys.add(path)
                walk(node._get_node(key), path)  # no interpolation resolution

    walk(cfg, "")
    return frozenset(keys)


def check_verl(wl: VerlWorkload, path: SearchPath = None) -> Iterator[Finding]:
    config = VERL_CONFIGS.get(wl.entrypoint)
    keys = verl_config_keys(config, path) if config else None
    if keys is None:
        return
    for key in wl.overrides:
        if key.startswith("+"):
            continue  # Hydra: + adds a key that the config does not have
        if key not in keys:
            yield Finding(
                VERL_UNKNOWN,
                ("workload", "overrides", key),
                f"{key} is not in verl's {config} config{_did_you_mean(key, keys)}",
            )


def fidelity_findings(spec: JobSpec, path: SearchPath = None) -> list[Finding]:
    """Findings against the framework packages found on ``path`` (default: sys.path)."""
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        return list(check_verl(wl, path))
    if isinstance(wl, OpenRLHFWorkload):
        return list(check_openrlhf(wl, spec.versions.openrlhf, path))
    return []
