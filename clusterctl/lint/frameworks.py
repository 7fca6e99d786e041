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
import json
import os
import re
import subprocess
import sys
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
OPENRLHF_STARTUP = Rule(
    "openrlhf-startup-check",
    "error",
    "OpenRLHF's own start-up checks refuse the arguments",
    "change the arguments as OpenRLHF's message says",
    "openrlhf/cli/train_ppo_ray.py of the pinned release: its parser and the checks before "
    "train(args), run as OpenRLHF wrote them",
    lambda spec: (),
)
FIDELITY_RULES = (VERL_UNKNOWN, OPENRLHF_UNKNOWN, OPENRLHF_STARTUP)

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


@cache
def run_openrlhf_startup(site: str, entrypoint: str, argv: tuple[str, ...]) -> dict[str, str]:
    """OpenRLHF's own parser and start-up checks on ``argv`` (see openrlhf_startup.py)."""
    judge = Path(__file__).with_name("openrlhf_startup.py")
    try:
        proc = subprocess.run(
            [sys.executable, "-I", str(judge), site, entrypoint, "--", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"status": "cannot-run", "message": f"the check itself failed: {exc}"}


def _arg_named_in(message: str, wl: OpenRLHFWorkload) -> str | None:
    """The spec's argument that OpenRLHF's message names, if any (longest name first)."""
    for key in sorted(wl.args, key=len, reverse=True):
        name = key.lstrip("-")
        if f"--{name}" in message or name in message or name.replace(".", "_") in message:
            return key
    for key, value in wl.args.items():  # else the argument whose value it names
        if (
            isinstance(value, str)
            and len(value) >= 3
            and re.search(rf"\b{re.escape(value)}\b", message)
        ):
            return key
    return None


def check_openrlhf(
    wl: OpenRLHFWorkload, pinned: str | None, path: SearchPath = None
) -> Iterator[Finding]:
    """Judge the arguments with the pinned OpenRLHF's own parser and start-up checks."""
    site = openrlhf_site(pinned, path)
    if site is None:
        return
    from clusterctl.render.plan import openrlhf_args

    verdict = run_openrlhf_startup(str(site), wl.entrypoint, tuple(openrlhf_args(wl)))
    if verdict["status"] != "rejected":
        return
    message = verdict["message"]
    if "unrecognized arguments" in message:
        flags = openrlhf_flags(wl.entrypoint, (str(site),)) or frozenset()
        for key in wl.args:
            name = key.lstrip("-")
            if name not in flags:
                other = name.replace(".", "_") if "." in name else None
                hint = (
                    f"; this OpenRLHF uses {other!r}"
                    if other in flags
                    else _did_you_mean(name, flags)
                )
                yield Finding(
                    OPENRLHF_UNKNOWN,
                    ("workload", "args", key),
                    f"--{name} is not an argument of {wl.entrypoint}{hint}",
                )
        return
    named = _arg_named_in(message, wl)
    yield Finding(
        OPENRLHF_STARTUP,
        ("workload", "args", named) if named else ("workload", "args"),
        f"OpenRLHF {pinned or ''} refuses these arguments at start-up: {message}",
    )


def openrlhf_site(pinned: str | None, path: SearchPath = None) -> Path | None:
    """The directory holding the pinned OpenRLHF: on ``path`` (default: sys.path and each
    directory of $CLUSTERCTL_FRAMEWORK_PATH), where its version is ``pinned``."""
    for entry in path or _search_path():
        installed = installed_version("openrlhf", (entry,))
        if installed is not None and (pinned is None or installed == pinned):
            root = package_dir("openrlhf", (entry,))
            return root.parent if root is not None else None
    return None


def _search_path() -> tuple[str, ...]:
    extra = os.environ.get("CLUSTERCTL_FRAMEWORK_PATH", "")
    return (*[p for p in extra.split(os.pathsep) if p], *sys.path)


def fidelity_notes(spec: JobSpec, path: SearchPath = None) -> list[str]:
    """Which upstream checks ran for this spec, and which could not run here and why."""
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload):
        pinned = spec.versions.openrlhf
        site = openrlhf_site(pinned, path)
        if site is None:
            return [
                f"OpenRLHF {pinned or '(versions.openrlhf unset)'} is not installed here: its "
                "parser and start-up checks did not run (pip install --no-deps --target DIR "
                f"openrlhf=={pinned or 'X'}; CLUSTERCTL_FRAMEWORK_PATH=DIR)"
            ]
        from clusterctl.render.plan import openrlhf_args

        verdict = run_openrlhf_startup(str(site), wl.entrypoint, tuple(openrlhf_args(wl)))
        if verdict["status"] == "cannot-run":
            return [f"OpenRLHF {pinned}: its start-up checks could not run: {verdict['message']}"]
        return [
            f"OpenRLHF {pinned}: its own parser and start-up checks ran ({site}); "
            "train() itself (datasets, models, Ray placement) needs GPUs and did not"
        ]
    if isinstance(wl, VerlWorkload):
        config = VERL_CONFIGS.get(wl.entrypoint)
        if config is None or verl_config_keys(config, path) is None:
            return ["verl is not installed here: its Hydra config did not judge the overrides"]
        return [
            f"verl: overrides composed against its {config} Hydra config; verl's "
            "validate_config did not run (not yet wired)"
        ]
    return []


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
