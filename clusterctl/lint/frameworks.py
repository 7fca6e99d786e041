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
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from clusterctl.framework.judge import NAMES, Judge, image_judge
from clusterctl.lint.registry import Finding, Rule
from clusterctl.spec.images import image_versions
from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload
from clusterctl.spec.presets import same_version

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
VERL_STARTUP = Rule(
    "verl-startup-check",
    "error",
    "verl's own validate_config refuses the composed config",
    "change the overrides as verl's message says",
    "verl/trainer/main_ppo.py main(): validate_config(config, need_reference_policy(config), "
    "need_critic(config)) of the pinned release, run as verl wrote it",
    lambda spec: (),
)
FIDELITY_RULES = (VERL_UNKNOWN, OPENRLHF_UNKNOWN, OPENRLHF_STARTUP, VERL_STARTUP)

# The Hydra config each verl entry point composes.
VERL_CONFIGS = {"verl.trainer.main_ppo": "ppo_trainer"}
# --config-path values that name verl's own config directory (relative to the entry point's
# module, as Hydra resolves them): the check can compose them here.
_VERL_OWN_CONFIG_PATHS = (None, "config", "./config")


def verl_config(wl: VerlWorkload) -> tuple[str | None, str]:
    """(config name, why none) for the verl check: the spec's --config-name in verl's own
    config directory, else the entry point's default; a config directory of the script's
    own (a recipe's) is not here to compose."""
    if wl.config_path not in _VERL_OWN_CONFIG_PATHS:
        return None, f"its config directory {wl.config_path!r} is the script's own, not verl's"
    if wl.config_dir is not None:
        return None, f"its config directory {wl.config_dir!r} is the script's own, not verl's"
    name = wl.config_name or VERL_CONFIGS.get(wl.entrypoint)
    if name is None:
        return None, f"no upstream check is known for entry point {wl.entrypoint}"
    return name, ""


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
def run_openrlhf_startup(judge: Judge, entrypoint: str, argv: tuple[str, ...]) -> dict[str, Any]:
    """OpenRLHF's own parser and start-up checks on ``argv`` (see openrlhf_startup.py)."""
    return judge.run("openrlhf_startup.py", (judge.site, entrypoint, "--", *argv))


def openrlhf_verdict(judge: Judge, wl: OpenRLHFWorkload) -> dict[str, Any]:
    """OpenRLHF's verdict on exactly the argv the job passes (cached per argv)."""
    from clusterctl.render.plan import openrlhf_args

    return run_openrlhf_startup(judge, wl.entrypoint, tuple(openrlhf_args(wl)))


def verl_verdict(judge: Judge, spec: JobSpec, wl: VerlWorkload, config: str) -> dict[str, Any]:
    """verl's verdict on exactly the overrides the job passes (cached per overrides)."""
    return run_verl_startup(judge, wl.entrypoint, config, *verl_judge_inputs(spec, wl, judge))


@cache
def run_verl_startup(
    judge: Judge, entrypoint: str, config: str, overrides: tuple[str, ...], hf_home: str | None
) -> dict[str, Any]:
    """verl's own validate_config on the composed config, and the memory plan's facts (see
    verl_startup.py)."""
    env = {"HF_HOME": hf_home} if hf_home else None
    return judge.run("verl_startup.py", (entrypoint, config, "--", *overrides), env)


def spec_mounts(spec: JobSpec) -> tuple[tuple[str, str], ...]:
    """The spec's mounts, (this machine's path, the container's), for a judge in the image."""
    return tuple((m.source, m.target) for m in spec.container.mounts)


def verl_judge(spec: JobSpec) -> Judge | None:
    """Where verl's own checks run for SPEC: the job's image if a local engine has it, else
    a local Python with the pinned verl, else None."""
    in_image = image_judge("verl", spec.container.image, spec_mounts(spec))
    if in_image is not None:
        return in_image
    python = verl_python(pinned_verl(spec))
    if python is None:
        return None
    return Judge("verl", _verl_version(python) or "", python, site=(verl_site(python) or ("",))[0])


def openrlhf_judge(spec: JobSpec, path: SearchPath = None) -> Judge | None:
    """Where OpenRLHF's own checks run for SPEC: the job's image, else the pinned release on
    PATH (default: sys.path and $CLUSTERCTL_FRAMEWORK_PATH) run by this Python, else None."""
    if path is None:
        in_image = image_judge("openrlhf", spec.container.image, spec_mounts(spec))
        if in_image is not None:
            return in_image
    pinned = spec.versions.openrlhf
    site = openrlhf_site(pinned, path)
    if site is None:
        return None
    release = installed_version("openrlhf", (str(site),)) or pinned or ""
    return Judge("openrlhf", release, sys.executable, site=str(site))


def cannot_judge(framework: str, pinned: str | None, spec: JobSpec) -> str:
    """One line: the release cannot be judged anywhere here, and what would judge it."""
    name = NAMES[framework]
    local = (
        "CLUSTERCTL_VERL_PYTHON=a Python with it installed"
        if framework == "verl"
        else f"pip install --no-deps --target DIR openrlhf=={pinned or 'X'}; "
        "CLUSTERCTL_FRAMEWORK_PATH=DIR"
    )
    return (
        f"{name} {pinned or '(version unset)'} cannot be judged here: no local container engine "
        f"has the image {spec.container.image} with {name} in it, and no local Python has "
        f"{name} {pinned or ''} ({local})"
    )


@cache
def _verl_version(python: str) -> str | None:
    if python == sys.executable:
        return installed_version("verl")
    code = "import importlib.metadata as m; print(m.version('verl'))"
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def pinned_verl(spec: JobSpec) -> str | None:
    """The verl release the job runs: versions.verl, else what the image's tag states."""
    return spec.versions.verl or image_versions(spec.container.image).get("verl")


@cache
def verl_site(python: str) -> SearchPath:
    """The directory holding verl in ``python``, found without importing verl."""
    code = "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"
    proc = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    return (str(Path(proc.stdout.strip()).parent),) if proc.returncode == 0 else None


def verl_python(pinned: str | None) -> str | None:
    """A Python where the pinned verl is installed with its dependencies: one of
    $CLUSTERCTL_VERL_PYTHON (several, separated as in PATH), else the one clusterctl runs on."""
    named = os.environ.get("CLUSTERCTL_VERL_PYTHON", "").split(os.pathsep)
    for python in (*named, sys.executable):
        if (
            python
            and (version := _verl_version(python))
            and (pinned is None or same_version(pinned, version))
        ):
            return python
    return None


def on_this_host(spec: JobSpec, container_path: str) -> str | None:
    """Where a container path of the spec's mounts is on this machine, if readable here."""
    for mount in spec.container.mounts:
        target = mount.target.rstrip("/")
        if container_path == target or container_path.startswith(target + "/"):
            host = mount.source.rstrip("/") + container_path[len(target) :]
            return host if os.access(host, os.R_OK) else None
    return container_path if os.access(container_path, os.R_OK) else None


def verl_judge_inputs(
    spec: JobSpec, wl: VerlWorkload, judge: Judge
) -> tuple[tuple[str, ...], str | None]:
    """The job's overrides and the HF cache the containers would use (HF_HOME). In the
    image both are the container's paths, its mounts being there; on this machine model
    paths are mapped through the spec's mounts, and the cache when it is readable here."""
    from clusterctl.render.plan import hydra_value, verl_argv

    overrides = []
    hf_home = spec.container.env.get("HF_HOME")
    for item in verl_argv(spec, wl)[3:]:
        if item.startswith("--config-"):
            continue  # the config name travels on its own (verl_config)
        key, _, _value = item.partition("=")
        value = wl.overrides.get(key)
        if judge.image is not None:
            overrides.append(item)
            continue
        if key.endswith(".path") and isinstance(value, str) and value.startswith("/"):
            host = on_this_host(spec, value)
            if host is not None:
                item = f"{key}={hydra_value(host)}"
        overrides.append(item)
    if judge.image is not None:
        return tuple(overrides), hf_home if isinstance(hf_home, str) else None
    host_cache = on_this_host(spec, hf_home) if isinstance(hf_home, str) else None
    return tuple(overrides), host_cache


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
    spec: JobSpec, wl: OpenRLHFWorkload, path: SearchPath = None
) -> Iterator[Finding]:
    """Judge the arguments with the pinned OpenRLHF's own parser and start-up checks."""
    judge = openrlhf_judge(spec, path)
    if judge is None:
        return
    verdict = openrlhf_verdict(judge, wl)
    if verdict["status"] != "rejected":
        return
    message = verdict["message"]
    if "unrecognized arguments" in message:
        flags = openrlhf_flags(wl.entrypoint, (judge.site,)) if judge.image is None else None
        refused = set(re.findall(r"--([\w.-]+)", message.split("unrecognized arguments", 1)[1]))
        for key in wl.args:
            name = key.lstrip("-")
            if (name not in flags) if flags is not None else (name in refused):
                other = name.replace(".", "_") if "." in name else None
                hint = (
                    f"; this OpenRLHF uses {other!r}"
                    if flags and other in flags
                    else _did_you_mean(name, flags or frozenset())
                )
                yield Finding(
                    OPENRLHF_UNKNOWN,
                    ("workload", "args", key),
                    f"--{name} is not an argument of {wl.entrypoint} in {judge}{hint}",
                )
        return
    named = _arg_named_in(message, wl)
    yield Finding(
        OPENRLHF_STARTUP,
        ("workload", "args", named) if named else ("workload", "args"),
        f"{judge} refuses these arguments at start-up: {message}",
    )


def openrlhf_site(pinned: str | None, path: SearchPath = None) -> Path | None:
    """The directory holding the pinned OpenRLHF: on ``path`` (default: sys.path and each
    directory of $CLUSTERCTL_FRAMEWORK_PATH), where its version is ``pinned``."""
    for entry in path or _search_path():
        installed = installed_version("openrlhf", (entry,))
        if installed is not None and (pinned is None or same_version(installed, pinned)):
            root = package_dir("openrlhf", (entry,))
            return root.parent if root is not None else None
    return None


def _search_path() -> tuple[str, ...]:
    extra = os.environ.get("CLUSTERCTL_FRAMEWORK_PATH", "")
    return (*[p for p in extra.split(os.pathsep) if p], *sys.path)


def fidelity_notes(spec: JobSpec, path: SearchPath = None) -> list[str]:
    """Which upstream checks ran for this spec, where and in which release, and which could
    not run here and why."""
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload):
        judge = openrlhf_judge(spec, path)
        if judge is None:
            return [f"{cannot_judge('openrlhf', spec.versions.openrlhf, spec)}: its parser and "
                    "start-up checks did not run"]  # fmt: skip
        verdict = openrlhf_verdict(judge, wl)
        if verdict["status"] == "cannot-run":
            return [f"{judge}: its start-up checks could not run: {verdict['message']}"]
        return [
            f"{judge}: its own parser and start-up checks ran; train() itself (datasets, "
            "models, Ray placement) needs GPUs and did not"
        ]
    if isinstance(wl, VerlWorkload):
        config, why = verl_config(wl)
        if config is None:
            return [f"verl's own checks did not run: {why}"]
        verl = verl_judge(spec)
        if verl is None:
            return [f"{cannot_judge('verl', pinned_verl(spec), spec)}: validate_config did not run"]
        verdict = verl_verdict(verl, spec, wl, config)
        if verdict["status"] == "cannot-run":
            return [f"{verl}: validate_config could not run: {verdict['message']}"]
        return [f"{verl}: its own validate_config ran on the composed {config} config"]
    return []


def group_choices(wl: VerlWorkload, path: SearchPath = None) -> tuple[str, ...]:
    """The overrides that choose a config group (`model_engine=megatron`,
    `actor@actor_rollout_ref.actor=megatron_actor`): the keys they bring in exist only when
    the config is composed with them."""
    root = package_dir("verl", path)
    if root is None:
        return ()
    config_dir = root / "trainer" / "config"
    from clusterctl.render.plan import hydra_value

    out = []
    for key, value in wl.overrides.items():
        group = key.lstrip("+~").split("@", 1)[0].replace(".", "/")
        if isinstance(value, str) and (config_dir / group).is_dir():
            out.append(f"{key}={hydra_value(value)}")
    return tuple(out)


@cache
def verl_config_keys(
    config_name: str, path: SearchPath = None, choices: tuple[str, ...] = ()
) -> frozenset[str] | None:
    """All dotted keys of verl's composed Hydra config, with the spec's config-group choices
    (None when verl or Hydra is missing)."""
    root = package_dir("verl", path)
    if root is None or package_dir("hydra") is None:
        return None
    config_dir = root / "trainer" / "config"
    if not (config_dir / f"{config_name}.yaml").is_file():
        return None
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name=config_name, overrides=list(choices))
    keys: set[str] = set()

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, DictConfig):
            for key in node:
                path = f"{prefix}.{key!s}" if prefix else str(key)
                keys.add(path)
                walk(node._get_node(key), path)  # no interpolation resolution

    walk(cfg, "")
    return frozenset(keys)


def check_verl(spec: JobSpec, wl: VerlWorkload, path: SearchPath = None) -> Iterator[Finding]:
    """Unknown keys against verl's composed config (did-you-mean), then verl's own
    validate_config in a Python where the pinned verl is installed."""
    config, _why = verl_config(wl)
    judge = verl_judge(spec)
    if path is None and judge is not None and package_dir("verl") is None:
        # verl lives only in the judge's Python; in the image Hydra refuses unknown keys
        path = (judge.site,) if judge.image is None else None
    choices = group_choices(wl, path)
    keys = (verl_config_keys(config, path, choices) if config else None) or frozenset()
    unknown = False
    chosen = {c.split("=", 1)[0] for c in choices}
    for key in wl.overrides if keys else ():
        if key.startswith("+") or key in chosen:
            continue  # Hydra: + adds a key that the config does not have; a group choice
        if key not in keys:
            unknown = True
            yield Finding(
                VERL_UNKNOWN,
                ("workload", "overrides", key),
                f"{key} is not in verl's {config} config{_did_you_mean(key, keys)}",
            )
    if unknown or config is None or judge is None:
        return
    verdict = verl_verdict(judge, spec, wl, config)
    if verdict["status"] == "rejected":
        message = verdict["message"]
        missing = re.match(r"Hydra: Could not override '([^']+)'", message)
        if missing and missing.group(1) in wl.overrides:  # a key this release does not have
            yield Finding(
                VERL_UNKNOWN,
                ("workload", "overrides", missing.group(1)),
                f"{missing.group(1)} is not in the {config} config of {judge}",
            )
            return
        named = next(
            (k for k in sorted(wl.overrides, key=len, reverse=True) if k.lstrip("+~") in message),
            None,
        )
        yield Finding(
            VERL_STARTUP,
            ("workload", "overrides", named) if named else ("workload", "overrides"),
            f"{judge} refuses this config at start-up: {message}",
        )


def fidelity_findings(spec: JobSpec, path: SearchPath = None) -> list[Finding]:
    """Findings against the framework packages found on ``path`` (default: sys.path)."""
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        return list(check_verl(spec, wl, path))
    if isinstance(wl, OpenRLHFWorkload):
        return list(check_openrlhf(spec, wl, path))
    return []
