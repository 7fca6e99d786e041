"""Turn a launch script into a clusterctl spec: every value with the script line it came from,
every line that could not be mapped listed with its reason.

The trainer's arguments are read by the frameworks' own parsers: Hydra's command-line parser
and override grammar for verl (so ``lr=1e-6`` is the float Hydra makes of it), and for
OpenRLHF the argv as argparse sees it (``--flag`` alone is true, values as written).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.importer.bounded import bounded
from clusterctl.importer.shell import Command, Script, ScriptError, read_script
from clusterctl.spec.consistency import PROTECTED_SBATCH, protected_option
from clusterctl.spec.secrets import (
    KEY_FLAGS,
    TOKEN_VALUE,
    literal_secrets,
    looks_like_token,
    secret_name,
)

SpecPath = tuple[str | int, ...]

_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_TRAINER_MODULE = re.compile(r"^(verl|openrlhf|recipe)\.")
# Variables clusterctl sets itself in every container (templates/partials/node.sh.j2): Ray
# assigns GPUs, so a script's own visibility masks and Ray switches are not carried over.
_OWNED_ENV = {
    "CUDA_VISIBLE_DEVICES": "Ray assigns GPUs to workers; clusterctl leaves it unset",
    "HIP_VISIBLE_DEVICES": "Ray assigns GPUs to workers; clusterctl leaves it unset",
    "ROCR_VISIBLE_DEVICES": "Ray assigns GPUs to workers; clusterctl leaves it unset",
    "RAY_ADDRESS": "clusterctl starts Ray and gives the trainer the head's address",
}
_NETWORK_PREFIXES = ("NCCL_", "RCCL_", "UCX_", "GLOO_", "TORCH_NCCL_")
# sbatch option -> slurm field (sbatch(1), slurm 22.05); short forms beside.
_SBATCH_FIELDS = {
    "partition": "partition",
    "p": "partition",
    "account": "account",
    "A": "account",
    "qos": "qos",
    "q": "qos",
    "time": "time",
    "t": "time",
    "job-name": "job_name",
    "J": "job_name",
    "nodes": "nodes",
    "N": "nodes",
    "gpus-per-node": "gpus_per_node",
    "cpus-per-task": "cpus_per_task",
    "c": "cpus_per_task",
    "mem": "mem",
    "nodelist": "nodelist",
    "w": "nodelist",
    "exclude": "exclude",
    "x": "exclude",
    "constraint": "constraint",
    "C": "constraint",
    "output": "output",
    "o": "output",
    "error": "error",
    "e": "error",
}
_INT_FIELDS = {"nodes", "gpus_per_node", "cpus_per_task"}


class ImportError_(ValueError):
    """The script holds no trainer call this importer can turn into a spec."""


class NoTrainer(ImportError_):
    """No command of the script runs a trainer."""


@dataclass
class Imported:
    """A spec as nested dicts, the script line of each value, and what was not mapped."""

    spec: dict[str, Any] = field(default_factory=dict)
    lines: dict[SpecPath, int] = field(default_factory=dict)
    comments: dict[SpecPath, str] = field(default_factory=dict)
    unmapped: list[tuple[int, str]] = field(default_factory=list)
    assumed: list[tuple[int, str]] = field(default_factory=list)  # what the dry run took
    read_by: str = "parsed, not run (the static reader)"
    trainer_args: list[str] = field(default_factory=list)  # the trainer's, as the script ran it
    allocated_at: int = 0  # Script.allocated_at

    def put(self, path: SpecPath, value: Any, line: int | None, comment: str = "") -> None:
        node: Any = self.spec
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
        if line is not None:
            self.lines[path] = line
        if comment:
            self.comments[path] = comment

    def get(self, path: SpecPath) -> Any:
        node: Any = self.spec
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def skip(self, line: int, why: str) -> None:
        self.unmapped.append((line, why))


@dataclass
class TrainerCall:
    command: Command
    launcher: list[str]  # the words before python (srun ..., ray job submit ... --, uv run)
    python_args: list[str]  # between python and the module (-u, -X ...)
    module: str
    args: list[str]


def find_trainer(script: Script) -> TrainerCall | None:
    """The trainer among everything the script ran: a verl / OpenRLHF entry point run with
    python -m first, then a module of the script's own (a lab's trainer built on them), a
    foreground call; a command sent to the background is a side process, never the trainer."""
    everything = _python_calls(script)
    for calls in (
        [c for c in everything if not c.command.background],
        # a wrapper that only starts the training in the background (nohup bash train.sh &)
        # runs no trainer in the foreground: the one it started is the job's
        [c for c in everything if c.command.background],
    ):
        framework = [c for c in calls if _TRAINER_MODULE.match(c.module)]
        if framework:
            return framework[0]
        built_on = [c for c in calls if _built_on(c) is not None]
        if built_on:
            return built_on[0]
    return None


def _python_calls(script: Script) -> list[TrainerCall]:
    found = []
    for command in script.commands:
        argv = command.argv
        for i, word in enumerate(argv):
            if not _PYTHON.match(word):
                continue
            j = i + 1
            while j < len(argv) and argv[j].startswith("-") and argv[j] != "-m":
                j += 2 if argv[j] in ("-X", "-W") else 1  # python's own options
            if j + 1 < len(argv) and argv[j] == "-m":
                found.append(
                    TrainerCall(command, argv[:i], argv[i + 1 : j], argv[j + 1], argv[j + 2 :])
                )
            elif j < len(argv) and (as_module := _module_of_file(argv[j])) is not None:
                found.append(
                    TrainerCall(command, argv[:i], argv[i + 1 : j], as_module, argv[j + 1 :])
                )
            break
    return found


def _module_of_file(path: str) -> str | None:
    """`python verl/trainer/main_ppo.py`: the framework module the file is, run by its path."""
    if not path.endswith(".py") or path.startswith("/"):
        return None
    parts = path.removeprefix("./").removesuffix(".py").split("/")
    if all(p.isidentifier() for p in parts) and re.match(r"^(verl|openrlhf|recipe)$", parts[0]):
        return ".".join(parts)
    return None


_VERL_KEYS = re.compile(r"^\+*(actor_rollout_ref|data|trainer|algorithm|critic|reward_model)\.")
_OPENRLHF_FLAGS = {"--pretrain", "--actor_num_nodes", "--vllm_num_engines", "--ref_num_nodes",
                   "--prompt_data", "--colocate_all_models", "--reward_pretrain"}  # fmt: skip


def _built_on(call: TrainerCall) -> str | None:
    """verl or openrlhf when a module's arguments are that framework's own (a lab's trainer
    built on it, e.g. verl-tool's or rllm's main_ppo), else None."""
    if any(_VERL_KEYS.match(a) for a in call.args):
        return "verl"
    if any(a.split("=", 1)[0] in _OPENRLHF_FLAGS for a in call.args):
        return "openrlhf"
    return None


def find_other_launch(script: Script) -> Command | None:
    """A framework run by a launcher of its own (torchrun, deepspeed) or as a script file:
    not a Ray job, so clusterctl can run it only as a command in the head container."""
    for command in script.commands:
        if command.background:
            continue
        text = " ".join(command.argv)
        if (
            command.argv[0] in ("torchrun", "deepspeed", "accelerate")
            or (any(_PYTHON.match(w) for w in command.argv) and re.search(r"\S+\.py\b", text))
        ) and re.search(r"verl|openrlhf|main_ppo|\btrain", text):
            return command
    return None


def import_script(
    source: str | bytes,
    env: Mapping[str, str] | None = None,
    preset: str | None = None,
    image: str | None = None,
    args: list[str] | None = None,
    name: str = "",
    base: Path | None = None,
    path: Path | None = None,
    nodes: int | None = None,
) -> Imported:
    """The spec a launch script says (``args``: the script's own arguments, as it would be
    called; ``name``: its file name, which often names the hardware:
    run_qwen2-70b_grpo_32_h800.sh; ``base``: its directory, where the files it sources are
    read). With ``path`` the script is run as bash runs it, in a sandbox, every external
    command a stand-in answering as a node of the target (``preset``, ``nodes``): bash's
    values, not a reading of them. Without it, or where no sandbox can be made, it is parsed."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    static: Script | None = None
    try:
        static = bounded(read_script, source, dict(env or {}), list(args or []), base)
    except ScriptError:
        if path is None:
            raise
    script, read_by = static, "parsed, not run (the static reader)"
    hardware = _hardware_guess(static, text, name, preset)
    deadline = time.monotonic() + IMPORT_SECONDS
    sandboxed = False
    if path is not None:
        from clusterctl.importer.dryrun import sandbox_problem

        problem = sandbox_problem()
        if problem is None:
            sandboxed = True
            script, read_by = _run_by_bash(path, args, env, static, text, hardware, nodes, deadline)
        else:
            read_by = f"parsed, not run: no sandbox can be made here ({problem})"
    if script is None:  # unreachable: a static error without a path was raised above
        raise ImportError_("the script could not be read")
    out, read_by, used = _converted(script, static, preset, image, name, hardware, text, read_by)
    needed = _nodes_the_trainer_places(out, name, hardware) if nodes is None else None
    if sandboxed and path is not None and needed and time.monotonic() < deadline:
        # the node count is the launcher's (a platform's WORLD_SIZE, nothing in the script)
        # and the trainer's own resource arguments place more GPUs than one node has
        script, read_by = _run_by_bash(path, args, env, static, text, hardware, needed, deadline)
        script.notes = [n for n in script.notes if "give --nodes N" not in n[1]]
        script.notes.append(
            (0, f"the trainer's resource arguments place more GPUs than one node has: "
             f"{needed} node(s) assumed; give --nodes N")
        )  # fmt: skip
        out, read_by, used = _converted(
            script, static, preset, image, name, hardware, text, read_by
        )
        if ("slurm", "nodes") not in out.lines:
            out.put(("slurm", "nodes"), needed, 0, "what the trainer's resource arguments place")
    out.read_by = read_by
    out.assumed = list(used.assumed)
    _drop_secrets(out, name)
    _keep_what_validates(out, name)
    return out


def _loaded(out: Imported, name: str) -> Any:
    """The spec import would write, loaded as validate loads it (a SpecError when it cannot
    be): what the checks below judge it by."""
    from clusterctl.spec.loader import load_spec_text

    return load_spec_text(to_yaml(out, name or "script.sh"), name or "script.sh")


def _drop_secrets(out: Imported, name: str) -> None:
    """No secret the script holds is written into the spec: each literal one validate would
    refuse (spec/secrets.py) is taken out and listed; an environment variable's is passed
    through from the submitting environment instead."""
    from clusterctl.errors import SpecError

    try:
        spec = _loaded(out, name).spec
    except SpecError:
        return
    for path, why in list(literal_secrets(spec)):
        node: Any = out.spec
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        del node[path[-1]]
        where = ".".join(str(p) for p in path)
        line = next((out.lines[path[:n]] for n in (4, 3, 2) if path[:n] in out.lines), 0)
        if path[:2] in (("container", "env"), ("network", "nccl_env")) or "env_vars" in path:
            _pass_through(out, str(path[-1]), line)
            why += "; passed through from the submitting environment"
        out.skip(line, f"{where}: {why}: not written into the spec")


def _keep_what_validates(out: Imported, name: str) -> None:
    """Ray settings taken from the script's `ray start` stay only where the spec with them
    validates: one the rest of the job contradicts is listed with validate's reason, never
    written for validate to refuse import's own output."""
    from clusterctl.errors import SpecError
    from clusterctl.lint import rules as _rules  # noqa: F401  (registers the rules)
    from clusterctl.lint.registry import run_rules

    for _ in range(len(out.spec.get("ray", {})) + 1):
        ray = out.spec.get("ray", {})
        if not ray:
            return
        try:
            loaded = _loaded(out, name)
        except SpecError as exc:
            refused = [(p.path, p.message) for p in exc.problems if p.path.startswith("ray.")]
        else:
            refused = [
                (".".join(map(str, f.path)), f.message)
                for f in run_rules(loaded.spec)
                if f.level == "error" and f.path[:1] == ("ray",)
            ]
        if not refused:
            return
        field, why = refused[0]
        key = field.split(".")[1]
        if key not in ray:
            return
        line = out.lines.pop(("ray", key), 0)
        del ray[key]
        if not ray:
            del out.spec["ray"]
        out.skip(line, f"ray start's {key} {why}: left to clusterctl")


def _run_by_bash(
    path: Path,
    args: Sequence[str] | None,
    env: Mapping[str, str] | None,
    static: Script | None,
    text: str,
    hardware: tuple[str, str],
    nodes: int | None,
    deadline: float,
) -> tuple[Script, str]:
    """The script as bash runs it for an allocation of NODES (else its header's, else what
    a wrapper's sbatch or a bare srun asks for, else 1), and how it was read."""
    from clusterctl.importer.recorded import run_script, script_from_run, target_of

    header_nodes = _directive_nodes(text)
    count = nodes or header_nodes or 1
    target = target_of(hardware[0], count, _directive_gpus(text), _directive_cpus(text))
    run = run_script(path, list(args or []), target, dict(env or {}), deadline)
    submitted = _allocation_request(run, text)
    asked_nodes = None
    if submitted is not None:  # what the wrapper's sbatch or a bare srun asks for
        asked = "\n".join(f"#SBATCH {o}" for o in submitted[1])
        asked_nodes = _directive_nodes(asked)
        if nodes is None and header_nodes is None:
            count = asked_nodes or 1
        again = target_of(hardware[0], count, _directive_gpus(asked), _directive_cpus(asked))
        if again != target and time.monotonic() < deadline:
            target = again
            run = run_script(path, list(args or []), target, dict(env or {}), deadline)
    script = script_from_run(run, static, text, set(env or {}))
    if submitted is not None:
        call, options = submitted
        script.sbatch += [(call.line, option) for option in options]
        script.allocated_at = call.line if call.tool == "srun" else 0
    if script.stopped and find_trainer(script) is None and time.monotonic() < deadline:
        script = _with_required_env(path, args, target, env, static, text, deadline) or script
    if nodes is None and header_nodes is None and not asked_nodes and _reads_node_count(text):
        why = "the node count comes from the launcher's environment at run time"
        script.notes.append((0, f"{why} and 1 node was assumed: give --nodes N"))
    read_by = (
        f"run by bash in a bubblewrap sandbox, every external command a stand-in "
        f"answering as node0 of {count} {hardware[0]} node(s)"
    )
    return script, read_by


def _converted(
    script: Script,
    static: Script | None,
    preset: str | None,
    image: str | None,
    name: str,
    hardware: tuple[str, str],
    text: str,
    read_by: str,
) -> tuple[Imported, str, Script]:
    """The spec the script says; where the dry run ran no trainer (the script stopped
    first, on a directory this machine lacks or a variable only the cluster sets, or the
    trainer is in a branch or a file not there) the static reader answers, and says so."""
    try:
        return _convert(script, preset, image, name, hardware, text), read_by, script
    except NoTrainer as exc:
        if static is None or script is static:
            raise ImportError_(f"{exc}; {script.stopped}" if script.stopped else str(exc)) from None
        why = script.stopped or "no trainer ran under the dry run"
        try:
            out = _convert(static, preset, image, name, hardware, text)
        except ImportError_:
            raise ImportError_(f"{exc}; {why}") from None
        return out, f"parsed by the static reader, because {why}", static


def _nodes_the_trainer_places(out: Imported, name: str, hardware: tuple[str, str]) -> int | None:
    """Nodes an OpenRLHF trainer's own resource arguments need, where the script states no
    node count (no header, no wrapper's or srun's request) and they need more than it has."""
    from clusterctl.errors import SpecError
    from clusterctl.lint.workload import openrlhf_gpu_budget
    from clusterctl.spec.models import OpenRLHFWorkload
    from clusterctl.spec.presets import PRESETS

    launchers = any("node count comes from the launcher" in why for _, why in out.unmapped)
    if ("slurm", "nodes") in out.lines and not launchers:
        return None  # the script states its node count
    try:
        spec = _loaded(out, name).spec
    except SpecError:
        return None
    if not isinstance(spec.workload, OpenRLHFWorkload):
        return None
    total, _ = openrlhf_gpu_budget(spec.workload)
    per_node = spec.slurm.gpus_per_node or PRESETS[hardware[0]].gpus_per_node or 0
    if not per_node or total <= per_node * spec.slurm.nodes:
        return None
    return -(-total // per_node)


# Import runs a script more than once (placeholders filled, the caller's variables, the
# allocation a wrapper's sbatch asks for): no new run starts after this many seconds.
IMPORT_SECONDS = 60

_SELF_DEFAULT_EMPTY = re.compile(r"""^\s*(?:export\s+)?(\w+)=["']?\$\{\1:?-["']{0,2}\}""", re.M)


def _with_required_env(
    path: Path,
    args: Sequence[str] | None,
    target: Any,
    env: Mapping[str, str] | None,
    static: Script | None,
    text: str,
    deadline: float,
) -> Script | None:
    """A script that stops without variables its caller sets (`MODEL_PATH is not set`):
    run once more with each one it reads and nobody set as a placeholder of its name,
    listed; the run that reaches a trainer is the one read."""
    from clusterctl.importer.dryrun import assumed_environment
    from clusterctl.importer.recorded import run_script, script_from_run, unset_variables

    given = dict(env or {})
    # read and never set, or set from itself with nothing to fall back on (X=${X:-})
    callers = unset_variables(text) | set(_SELF_DEFAULT_EMPTY.findall(text))
    needed = sorted(callers - set(given) - set(assumed_environment(target)))
    if not needed:
        return None
    filled = {name: f"__{name}__" for name in needed}
    run = run_script(path, list(args or []), target, {**given, **filled}, deadline)
    script = script_from_run(run, static, text, set(given))
    if find_trainer(script) is None:
        return None
    script.assumed += [
        (0, f"${name} is the caller's (the script stops without it): taken as {value}; "
         f"give --env {name}=...")
        for name, value in filled.items()
    ]  # fmt: skip
    return script


def _convert(
    script: Script,
    preset: str | None,
    image: str | None,
    name: str,
    hardware: tuple[str, str],
    text: str,
) -> Imported:
    call = find_trainer(script)
    if call is None and (other := find_other_launch(script)) is not None:
        return _command_workload(script, other, preset, image, hardware, text)
    if call is None:
        seen = sorted({c.argv[0] for c in script.commands})
        raise NoTrainer(
            "no verl or OpenRLHF trainer run with python -m was found "
            f"(commands seen: {', '.join(seen) or 'none'})"
        )
    out = Imported(allocated_at=script.allocated_at)
    if _TRAINER_MODULE.match(call.module):
        framework = "verl" if call.module.startswith(("verl.", "recipe.")) else "openrlhf"
    else:
        framework = _built_on(call) or "verl"
        out.skip(
            call.command.line,
            f"{call.module}: not verl's or OpenRLHF's own module; its arguments are "
            f"{framework}'s, so it is judged as {framework} with this entry point",
        )
    out.trainer_args = list(call.args)
    _slurm(script, out)
    _ray_start(script, out)
    _pbs(text, out)
    if framework == "verl":
        _verl(call, out)
    else:
        _openrlhf(call, out)
    _launcher(call, out)
    _environment(script, call, out)
    return _finish(script, call.command, out, preset, image, f"{framework}:latest", hardware)


# srun's options that make an allocation of its own when no batch script made one (srun(1))
_SRUN_ALLOCATION = re.compile(
    r"^(?:--(?:nodes|gres|gpus-per-node|time|partition|account|qos|cpus-per-task|mem|"
    r"exclusive|constraint|nodelist|exclude|reservation)\b|-[NtpAqcCwx])"
)


def _allocation_request(run: Any, text: str) -> tuple[Any, list[str]] | None:
    """What the job's allocation is asked for outside the script's own header: a batch
    script a wrapper submitted (below), else, in a script with no #SBATCH/#PBS header (run
    on a login node), the allocation options of the srun that launches the work."""
    submitted = _submission(run)
    if submitted is not None or _SBATCH_LINE.search(text) or "#PBS" in text:
        return submitted
    for call in run.calls:
        if call.tool == "srun" and call.inner > 0 and not call.background:
            options = _joined(call.argv[1 : call.inner])
            return call, [o for o in options if _SRUN_ALLOCATION.match(o)]
    return None


def _joined(words: list[str]) -> list[str]:
    """Options with their values as one word each (`--nodes 2` -> `--nodes=2`, `-N 2` ->
    `-N2`), as a header line reads them."""
    given: list[str] = []
    for word in words:
        last = given[-1] if given else ""
        if (
            last.startswith("-")
            and "=" not in last
            and not word.startswith("-")
            and (last.startswith("--") or len(last) == 2)
        ):
            given[-1] = f"{last}={word}" if last.startswith("--") else f"{last}{word}"
        else:
            given.append(word)
    return given


def _submission(run: Any) -> tuple[Any, list[str]] | None:
    """The batch script a wrapper submitted with sbatch and the dry run ran as its job: the
    sbatch call and the options it asked for: the script's #SBATCH header, then the
    command line's, which win."""
    for call in run.calls:
        if call.tool != "sbatch" or call.inner < 0:
            continue
        batch = Path(call.cwd) / call.argv[call.inner]
        try:
            header = batch.read_text(errors="replace") if batch.is_file() else ""
        except OSError:
            header = ""
        options = [
            word
            for found in _SBATCH_LINE.finditer(header)
            for word in _directive_words(found.group(1)) or []  # quotes that never close: left out
        ]
        given = _joined(call.argv[1 : call.inner])
        return call, [*options, *given]
    return None


_SBATCH_LINE = re.compile(r"^#SBATCH\s+(.*)$", re.M)


def _directive_words(text: str) -> list[str] | None:
    """A #SBATCH / #PBS line's words after its prefix, a trailing # comment dropped; None
    when its quotes do not close."""
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return None


_NODE_DIRECTIVE = re.compile(
    r"^#SBATCH\s+(?:--nodes[= ]|-N\s*)(\d+)\b|^#PBS\s+-l\s+(?:select|nodes)=(\d+)", re.M
)


def _directive_nodes(text: str) -> int | None:
    """The node count the script's own #SBATCH / #PBS header asks for."""
    found = list(_NODE_DIRECTIVE.finditer(text))  # the last one wins, as with sbatch
    if found:
        return int(found[-1].group(1) or found[-1].group(2))
    return None


_GPU_DIRECTIVE = re.compile(
    r"^#SBATCH\s+(?:--gres[= ]gpu(?::[\w-]+)?:|--gpus-per-node[= ](?:[\w-]+:)?)(\d+)\b", re.M
)


def _directive_gpus(text: str) -> int | None:
    """The GPUs per node the script's own #SBATCH header asks for."""
    found = [int(m.group(1)) for m in _GPU_DIRECTIVE.finditer(text)]
    return found[-1] if found and found[-1] > 0 else None


def _directive_cpus(text: str) -> int | None:
    found = [
        int(m) for m in re.findall(r"^#SBATCH\s+(?:--cpus-per-task[= ]|-c\s*)(\d+)\b", text, re.M)
    ]
    return found[-1] if found and found[-1] > 0 else None


def _reads_node_count(text: str) -> bool:
    from clusterctl.importer.recorded import NODE_COUNT_VARIABLES

    return any(re.search(rf"\$\{{?{v}\b", text) for v in NODE_COUNT_VARIABLES)


def _command_workload(
    script: Script,
    command: Command,
    preset: str | None,
    image: str | None,
    hardware: tuple[str, str],
    text: str,
) -> Imported:
    """torchrun / deepspeed / a python script: the argv as it is, run on one node."""
    out = Imported(allocated_at=script.allocated_at)
    _slurm(script, out)
    _pbs(text, out)
    out.put(("workload", "framework"), "command", command.line)
    out.put(("workload", "command"), list(command.argv), command.line)
    out.skip(
        command.line,
        f"{command.argv[0]} is not a Ray job: clusterctl runs it as a command in the head "
        "container once Ray is up; a multi-node torchrun/deepspeed rendezvous is not set up",
    )
    return _finish(script, command, out, preset, image, "trainer:latest", hardware)


def _finish(
    script: Script,
    trainer: Command,
    out: Imported,
    preset: str | None,
    image: str | None,
    placeholder: str,
    hardware: tuple[str, str],
) -> Imported:
    """What both kinds of trainer call share: the hardware, the image (the script's, else
    --image, else PLACEHOLDER, marked), and every line that was not mapped, sorted."""
    out.put(("hardware", "preset"), hardware[0], None, hardware[1])
    if out.get(("container", "image")) is None:
        how = "given with --image" if image else "not in the script: the image your nodes hold"
        out.put(("container", "image"), image or placeholder, None, how)
    for note_line, note in script.notes:
        out.skip(note_line, note)
    for command in script.commands:
        if command is not trainer:
            out.skip(command.line, f"{command.argv[0]}: {_why_not_run(command)}")
    if trainer.background:
        out.skip(trainer.line, "the trainer is sent to the background; clusterctl waits for it")
    for item in trainer.unresolved:
        out.skip(trainer.line, f"{item} is not resolved: its text is kept in the spec")
    out.unmapped.sort()
    return out


# `ray start` options the spec has a field for (ray start --help, Ray 2.x). Its fixed ports
# are not kept: clusterctl gives each job its own block (ray.port_range), so two jobs on
# one host never meet; --head, --address, --node-ip-address, --block it sets itself.
_RAY_START_FIELDS = {
    "num-cpus": "num_cpus",
    "num-gpus": "num_gpus",
    "temp-dir": "temp_dir",
    "min-worker-port": "min_worker_port",
    "max-worker-port": "max_worker_port",
}


def _ray_start(script: Script, out: Imported) -> None:
    """The first `ray start`'s options (the head's, else a worker's) into ray:, as bash
    evaluated them, where the allocation can give them; what it cannot is listed."""
    found: dict[str, tuple[str, int]] = {}
    for command in script.commands:
        argv = command.argv
        at = next((i for i in range(len(argv) - 1) if argv[i : i + 2] == ["ray", "start"]), None)
        if at is None:
            continue
        words = argv[at + 2 :]
        for i, word in enumerate(words):
            name, eq, value = word.removeprefix("--").partition("=")
            if not word.startswith("--") or name not in _RAY_START_FIELDS:
                continue
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
            found.setdefault(_RAY_START_FIELDS[name], (value, command.line))
    asked = {
        "num_cpus": out.get(("slurm", "cpus_per_task")),
        "num_gpus": out.get(("slurm", "gpus_per_node")),
    }
    for key in ("num_cpus", "num_gpus"):
        if key not in found:
            continue
        value, line = found[key]
        if not value.isdigit():
            out.skip(line, f"ray start --{key.replace('_', '-')} {value!r}: not a number")
        elif asked[key] is not None and int(value) > int(asked[key]):
            why = f"more than the job asks SLURM for ({asked[key]})"
            out.skip(
                line, f"ray start --{key.replace('_', '-')} {value}: {why}; left to clusterctl"
            )
        else:
            out.put(("ray", key), int(value), line)
    if "temp_dir" in found:
        value, line = found["temp_dir"]
        if value.startswith("/"):
            out.put(("ray", "temp_dir"), value, line)
        else:
            out.skip(line, f"ray start --temp-dir {value!r}: not an absolute path")
    low, high = found.get("min_worker_port"), found.get("max_worker_port")
    if low and high and low[0].isdigit() and high[0].isdigit() and int(low[0]) <= int(high[0]):
        out.put(("ray", "min_worker_port"), int(low[0]), low[1])
        out.put(("ray", "max_worker_port"), int(high[0]), high[1])
    elif low or high:
        line = (low or high or ("", 0))[1]
        out.skip(line, "ray start --min/max-worker-port: not a range of two port numbers")


def _why_not_run(command: Command) -> str:
    name = command.argv[0]
    if command.background:
        return (
            "sent to the background (&): a side process (a server, a watcher), not the "
            "trainer; run it as a sidecar (sidecars:) or in the image"
        )
    if name == "ray":
        return "clusterctl starts and stops Ray itself on every node"
    if name in ("set", "echo", "cd", "mkdir", "sleep", "wait", "trap", "exit", "pwd"):
        return "shell bookkeeping of the script"
    if name in ("pip", "pip3", "uv"):
        return "installs belong in the image (container.build.pip_packages)"
    return "not the trainer: run it in the image or before submitting"


def _sbatch_options(script: Script) -> list[tuple[int, str]]:
    """#SBATCH words as options: `-p gpu` and `--time 1:00:00` joined into one."""
    options: list[tuple[int, str]] = []
    for line, word in script.sbatch:
        if options and not word.startswith("-") and options[-1][0] == line:
            previous = options[-1][1]
            if "=" not in previous and (previous.startswith("--") or len(previous) == 2):
                joiner = "=" if previous.startswith("--") else ""
                options[-1] = (line, f"{previous}{joiner}{word}")
                continue
        options.append((line, word))
    return options


def _slurm(script: Script, out: Imported) -> None:
    for line, option in _sbatch_options(script):
        name, value = _option(option)
        if name is None:
            out.skip(line, f"#SBATCH {option}: not an option")
            continue
        target = _SBATCH_FIELDS.get(name)
        if name == "exclusive":
            out.put(("slurm", "exclusive"), True, line)
        elif name == "ntasks-per-node" or name in ("ntasks", "n"):
            out.skip(line, f"#SBATCH {option}: clusterctl runs one task (one container) per node")
        elif name == "gres" and value and value.startswith("gpu:"):
            count = value.rsplit(":", 1)[-1]
            if count.isdigit():
                out.put(("slurm", "gpus_per_node"), int(count), line)
                out.put(("slurm", "gpu_request"), "gres", line)
                if value.count(":") == 2:
                    out.put(("slurm", "gres_type"), value.split(":")[1], line)
        elif name in ("parsable", "wait", "W", "test-only"):
            out.skip(line, f"sbatch {option}: how sbatch answers the wrapper, not the job's")
        elif name in ("requeue", "no-requeue"):
            out.put(("slurm", "requeue"), name == "requeue", line)
        elif name in ("array", "a"):
            out.skip(
                line,
                f"#SBATCH {option}: a job array runs the script once per index; clusterctl "
                "submits one job per spec (import once per index, or loop over clusterctl submit)",
            )
        elif target is None and protected_option(option, PROTECTED_SBATCH, abbreviations=True):
            out.skip(line, f"#SBATCH {option}: clusterctl sets it itself (the slurm section)")
        elif target and value is not None:
            if not re.match(r"^[A-Za-z0-9_.,:+=@%/\[\]-]+$", value):
                out.skip(line, f"#SBATCH {option}: {value!r} is not a value sbatch accepts")
            elif target in _INT_FIELDS:
                if value.isdigit():
                    out.put(("slurm", target), int(value), line)
                else:
                    out.skip(line, f"#SBATCH {option}: not a number")
            else:
                out.put(("slurm", target), value, line)
        else:
            extra = out.get(("slurm", "extra")) or []
            out.put(("slurm", "extra"), [*extra, option], line)


_PBS_HEADER = re.compile(r"^#PBS\s+(.*)$", re.M)


def _pbs(text: str, out: Imported) -> None:
    """#PBS directives (PBS Pro / Torque qsub(1B)) as the slurm section's equivalents."""
    for match in _PBS_HEADER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        words = _directive_words(match.group(1))
        if words is None:
            out.skip(line, "#PBS line not read")
            continue
        pairs = list(zip(words[0::2], words[1::2], strict=False))
        for flag, value in pairs:
            if flag == "-l":
                for item in value.split(","):
                    _pbs_resource(item, line, out)
            elif flag == "-q":
                out.put(("slurm", "partition"), value, line, "from #PBS -q")
            elif flag == "-N" and re.match(r"^[A-Za-z0-9_.-]+$", value):
                out.put(("slurm", "job_name"), value, line, "from #PBS -N")
            elif flag in ("-A", "-P"):
                out.put(("slurm", "account"), value, line, f"from #PBS {flag}")
            else:
                out.skip(line, f"#PBS {flag} {value}: no slurm equivalent is set from it")


def _pbs_resource(item: str, line: int, out: Imported) -> None:
    key, _, value = item.partition("=")
    if key in ("select", "nodes"):
        chunks = value.split(":")
        if chunks[0].isdigit():
            out.put(("slurm", "nodes"), int(chunks[0]), line, f"from #PBS -l {key}")
        for chunk in chunks[1:]:
            name, _, count = chunk.partition("=")
            if name in ("ngpus", "gpus") and count.isdigit():
                out.put(("slurm", "gpus_per_node"), int(count), line, f"from #PBS {name}")
            elif name in ("ncpus", "ppn") and count.isdigit():
                out.put(("slurm", "cpus_per_task"), int(count), line, f"from #PBS {name}")
    elif key == "walltime" and re.match(r"^\d+:\d\d:\d\d$", value):
        out.put(("slurm", "time"), value, line, "from #PBS -l walltime")
    else:
        out.skip(line, f"#PBS -l {item}: no slurm equivalent is set from it")


def _option(option: str) -> tuple[str | None, str | None]:
    if option.startswith("--"):
        name, sep, value = option[2:].partition("=")
        return name, value if sep else None
    if option.startswith("-") and len(option) >= 2:
        return option[1], option[2:] or None
    return None, None


def _verl(call: TrainerCall, out: Imported) -> None:
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    line = call.command.line
    out.put(("workload", "framework"), "verl", line)
    out.put(("workload", "entrypoint"), call.module, line)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # argparse prints its usage before it exits
            parsed = get_args_parser().parse_args(call.args)
    except SystemExit:
        why = said.getvalue().strip().splitlines()[-1:] or [""]
        raise ImportError_(
            f"line {line}: Hydra's command line parser refuses the arguments: "
            f"{why[0].split(': error: ', 1)[-1][:200]}"
        ) from None
    if parsed.config_path:
        out.put(("workload", "config_path"), parsed.config_path, line)
    if parsed.config_dir:
        out.put(("workload", "config_dir"), parsed.config_dir, line)
    if parsed.config_name:
        out.put(("workload", "config_name"), parsed.config_name.removesuffix(".yaml"), line)
    if parsed.multirun:
        out.skip(line, "--multirun: clusterctl runs one trainer per job")
    parser = OverridesParser.create()
    seen: dict[str, str] = {}
    for text in parsed.overrides:
        try:
            override = parser.parse_override(text)
        except HydraException as exc:
            key, sep, raw = text.partition("=")
            unresolved = [u for u in call.command.unresolved if u in raw]
            if not (sep and unresolved):
                reason = str(exc).splitlines()[0]
                if not text.strip():
                    reason = "a word of white space alone: a backslash followed by a space ends "
                    reason += "the line continuation there, so bash passes it and runs the "
                    reason += "next lines as a command of their own"
                raise ImportError_(f"line {line}: Hydra refuses {text!r}: {reason}") from None
            out.skip(line, f"{key}: {unresolved[0]} is not resolved; kept as a string")
            overrides_map = out.get(("workload", "overrides")) or {}
            overrides_map[key] = raw
            out.put(("workload", "overrides"), overrides_map, line)
            continue
        prefix = {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++", OverrideType.DEL: "~"}
        key = prefix.get(override.type, "") + override.key_or_group
        if override.package is not None:
            key += f"@{override.package}"
        if override.is_sweep_override():
            out.skip(line, f"{override.input_line}: a sweep; one trainer runs per job")
            continue
        value = override.value()
        if key in seen:
            out.skip(line, f"{seen[key]} is given again later; Hydra keeps the last value")
        seen[key] = override.input_line or text
        bare = key.lstrip("+")
        if bare in ("trainer.nnodes", "trainer.n_gpus_per_node") and isinstance(value, str):
            out.skip(line, f"{bare}={value}: clusterctl sets it from the slurm section")
        elif bare == "trainer.nnodes" and isinstance(value, int):
            out.put(("slurm", "nodes"), value, line, "trainer.nnodes")
        elif bare == "trainer.n_gpus_per_node" and isinstance(value, int):
            out.put(("slurm", "gpus_per_node"), value, line, "trainer.n_gpus_per_node")
        else:
            overrides_map = out.get(("workload", "overrides")) or {}
            overrides_map[key] = value
            out.put(("workload", "overrides"), overrides_map, line)


def _openrlhf_value(text: str) -> Any:
    """A value as written: numbers only where they read back to the same text."""
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        if str(number) == text:
            return number
    return text


def _openrlhf(call: TrainerCall, out: Imported) -> None:
    line = call.command.line
    out.put(("workload", "framework"), "openrlhf", line)
    out.put(("workload", "entrypoint"), call.module, line)
    args: dict[str, Any] = {}
    name: str | None = None
    for word in call.args:
        if word.startswith("--") and len(word) > 2:
            name, sep, value = word[2:].partition("=")
            if name in args:
                out.skip(line, f"--{name} is given again later; argparse keeps the last value")
            args[name] = _openrlhf_value(value) if sep else True
            if sep:
                name = None
        elif name is None:
            out.skip(line, f"{word!r}: a value with no option before it")
        else:
            current = args[name]
            item = _openrlhf_value(word)
            args[name] = item if current is True else [*_as_list(current), item]
    for key, value in list(args.items()):
        # OpenRLHF's --use_wandb / --logger.wandb.key take the API key itself
        if key in ("use_wandb", "logger.wandb.key") and isinstance(value, str) and value != "True":
            args[key] = "True"
            _pass_through(out, "WANDB_API_KEY", line)
            out.skip(
                line,
                f"--{key}: the key itself is never written into the spec; export "
                "WANDB_API_KEY before submitting (OpenRLHF logs in with it)",
            )
    out.put(("workload", "args"), args, line)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _launcher(call: TrainerCall, out: Imported) -> None:
    """The words in front of python, launcher by launcher (srun, apptainer, docker run,
    ray job submit, uv run), each mapped to what the spec says of it."""
    line = call.command.line
    words = call.launcher
    if call.python_args:
        out.skip(line, f"python {' '.join(call.python_args)}: clusterctl runs python3 -m")
    while words:
        if words[:3] == ["ray", "job", "submit"]:
            submit = words[3:]
            _job_submit_options(
                submit[: submit.index("--")] if "--" in submit else submit, line, out
            )
            words = submit[submit.index("--") + 1 :] if "--" in submit else []
        elif words[:2] in (["docker", "run"], ["podman", "run"]):
            words = _docker_run(words[2:], line, out)
        elif words[:2] == ["uv", "run"]:
            # the driver and Ray's workers run under uv: Ray's runtime_env py_executable (Ray
            # docs, "Using uv for package management"), so the trainer goes through ray job
            # submit
            runtime_env = dict(out.get(("workload", "runtime_env")) or {})
            runtime_env["py_executable"] = " ".join(words)
            out.put(("workload", "runtime_env"), runtime_env, line, "from the uv run launcher")
            return
        elif words[0] == "srun":
            words = _srun(words[1:], line, out)
        elif words[0] in ("apptainer", "singularity") and words[1:2] in (["exec"], ["run"]):
            words = _apptainer(words[2:], line, out)
        else:
            out.skip(
                line, f"{' '.join(words)}: clusterctl launches the trainer in the head container"
            )
            return


# srun(1), Slurm 23.02: options that take a value when written apart from it
_SRUN_VALUED = {"-A", "-b", "-c", "-d", "-D", "-e", "-i", "-J", "-L", "-m", "-M", "-n", "-N",
                "-o", "-p", "-q", "-S", "-t", "-T", "-w", "-x", "-G", "-W", "--account",
                "--nodes", "--ntasks", "--ntasks-per-node", "--nodelist", "--exclude",
                "--partition", "--time", "--job-name", "--output", "--error", "--input",
                "--cpus-per-task", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gres",
                "--mem", "--mem-per-cpu", "--mem-per-gpu", "--container-image",
                "--container-mounts", "--container-workdir", "--container-name",
                "--container-env", "--mpi", "--export", "--chdir", "--distribution",
                "--cpu-bind", "--gpu-bind", "--constraint", "--qos", "--reservation",
                "--het-group", "--kill-on-bad-exit"}  # fmt: skip


def _options(words: list[str], valued: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(name, value) of each leading option and the words after them."""
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        name, sep, value = words[i].partition("=")
        if not sep and name in valued and i + 1 < len(words):
            value, i = words[i + 1], i + 1
        elif not sep and len(name) > 2 and name[:2] in valued and not name.startswith("--"):
            name, value = name[:2], name[2:]  # -N1, -wnode0
        found.append((name, value))
        i += 1
    if i < len(words) and words[i] == "--":
        i += 1
    return found, words[i:]


def _srun(words: list[str], line: int, out: Imported) -> list[str]:
    """srun in front of the trainer: pyxis' container options go to container:, the rest is
    clusterctl's (one container per node, the trainer on the head)."""
    options, rest = _options(words, _SRUN_VALUED)
    for name, value in options:
        if name == "--container-image" and _image_file(value):
            out.skip(
                line,
                f"srun --container-image {value}: an enroot image file; container.image takes "
                "a Docker image reference, so give the one it was imported from with --image",
            )
        elif name == "--container-image":
            # pyxis takes docker://, enroot's REGISTRY#IMAGE and plain references
            reference = value.removeprefix("docker://").replace("#", "/", 1)
            out.put(("container", "image"), reference, line, "from srun --container-image (pyxis)")
        elif name == "--container-mounts":
            _mounts(value.split(","), line, out)
        elif name == "--container-workdir":
            out.put(("container", "workdir"), value, line)
        elif name == "--container-env":
            for key in filter(None, value.split(",")):
                _pass_through(out, key, line)
        elif _SRUN_ALLOCATION.match(name) and out.allocated_at == line:
            continue  # read as the job's allocation (a script with no header of its own)
        else:
            out.skip(line, f"srun {name}: clusterctl places the trainer on the head node itself")
    return rest


# apptainer exec/run --help (Apptainer 1.x): options that take a value
_APPTAINER_VALUED = {"-B", "--bind", "--env", "--env-file", "--pwd", "-H", "--home",
                     "--overlay", "-o", "--mount", "-W", "--workdir", "--app",
                     "--security", "--network-args", "--fusemount", "-S", "--scratch"}  # fmt: skip


def _apptainer(words: list[str], line: int, out: Imported) -> list[str]:
    """apptainer/singularity exec|run IMAGE in front of the trainer: the image and binds."""
    options, rest = _options(words, _APPTAINER_VALUED)
    for name, value in options:
        if name in ("-B", "--bind", "--mount"):
            _mounts(value.split(","), line, out)
        elif name == "--env":
            for item in value.split(","):
                key, has_value, text = item.partition("=")
                if has_value and not _secret(key, text):
                    out.put(("container", "env", key), text, line)
                else:
                    _pass_through(out, key, line)
        elif name == "--pwd":
            out.put(("container", "workdir"), value, line)
        else:
            out.skip(line, f"apptainer {name}: the preset and clusterctl set the devices")
    if rest:
        image = rest[0].removeprefix("docker://")
        if _image_file(image):
            out.skip(
                line,
                f"apptainer image {image}: an image file; container.image takes a Docker image "
                "reference, so give the one it was built from with --image",
            )
        else:
            out.put(("container", "image"), image, line, "the Apptainer image's Docker source")
        return rest[1:]
    return []


def _image_file(image: str) -> bool:
    """An image file (apptainer .sif, enroot .sqsh) rather than a registry reference."""
    return image.startswith(("/", ".")) or image.endswith((".sif", ".img", ".sqsh"))


def _mounts(items: list[str], line: int, out: Imported) -> None:
    """SRC[:DST[:OPTS]] binds (pyxis, apptainer, docker -v) as container.mounts."""
    mounts: list[dict[str, Any]] = list(out.get(("container", "mounts")) or [])
    for item in filter(None, items):
        source, _, rest = item.partition(":")
        target, _, mode = rest.partition(":")
        mount: dict[str, Any] = {"source": source, "target": target or source}
        if "ro" in mode.split(","):
            mount["read_only"] = True
        mounts.append(mount)
    out.put(("container", "mounts"), mounts, line)


# docker run options that take no value (docker run --help, Docker 20.10-27)
_DOCKER_BARE = {"-i", "-t", "-it", "-ti", "-d", "--rm", "--privileged", "--init", "--interactive",
                "--tty", "--detach", "-P", "--publish-all", "--read-only"}  # fmt: skip


def _docker_run(words: list[str], line: int, out: Imported) -> list[str]:
    """`docker run OPTIONS IMAGE CMD...` in front of the trainer: the image, mounts,
    environment and working directory go to container:; what clusterctl sets itself (network,
    IPC, devices, GPUs, runtime, name) is listed. Returns the words after the image."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        name, sep, value = word.partition("=")
        if name not in _DOCKER_BARE and not sep and i + 1 < len(words):
            value, i = words[i + 1], i + 1
        i += 1
        if name in ("-v", "--volume"):
            _mounts([value], line, out)
        elif name in ("-e", "--env"):
            key, has_value, text = value.partition("=")
            if has_value and not _secret(key, text):
                out.put(("container", "env", key), text, line)
            else:  # a secret, or a name docker takes from the environment: never written
                _pass_through(out, key, line)
        elif name in ("-w", "--workdir"):
            out.put(("container", "workdir"), value, line)
        else:
            out.skip(line, f"docker run {word}: clusterctl sets its own docker run options")
    if i < len(words):
        out.put(("container", "image"), words[i], line)
        return words[i + 1 :]
    return []


def _job_submit_options(words: list[str], line: int, out: Imported) -> None:
    """`ray job submit` options (Ray's job CLI): the runtime env becomes workload.runtime_env;
    the address, the submission id and --no-wait are clusterctl's."""
    runtime_env: dict[str, Any] = dict(out.get(("workload", "runtime_env")) or {})
    i = 0
    while i < len(words) and words[i] != "--":
        word = words[i]
        name, sep, value = word.partition("=")
        takes_value = name in ("--runtime-env-json", "--working-dir", "--runtime-env")
        if takes_value and not sep and i + 1 < len(words):
            value, i = words[i + 1], i + 1
        if name == "--runtime-env-json":
            try:
                parsed = json.loads(value)
            except ValueError as exc:
                out.skip(line, f"--runtime-env-json is not JSON ({exc}): not mapped")
            else:
                if isinstance(parsed, dict):
                    runtime_env.update(parsed)
        elif name == "--working-dir":
            runtime_env["working_dir"] = value
        elif name == "--runtime-env":
            out.skip(
                line,
                f"--runtime-env {value}: the file is not read here; copy what it sets into "
                "workload.runtime_env",
            )
        else:
            out.skip(line, f"ray job submit {word}: clusterctl submits to its own Ray head")
        i += 1
    if runtime_env:
        out.put(("workload", "runtime_env"), runtime_env, line)


def _secret(name: str, value: str) -> bool:
    """A value that must come from the submitting environment, never the spec: a credential
    by its name or its shape, or one the script itself takes from its environment ($X)."""
    return secret_name(name) or looks_like_token(value) or value.startswith("$")


def _pass_through(out: Imported, name: str, line: int) -> None:
    passthrough = out.get(("container", "env_passthrough")) or []
    if name not in passthrough:
        out.put(("container", "env_passthrough"), [*passthrough, name], line)


def _environment(script: Script, call: TrainerCall, out: Imported) -> None:
    values = {n: (v.value, v.line) for n, v in script.exported().items()}
    values.update(
        {n: (v, script.assigned_at.get(n, call.command.line)) for n, v in call.command.env.items()}
    )
    for name, (value, line) in sorted(values.items(), key=lambda item: item[1][1]):
        if name in _OWNED_ENV:
            out.skip(line, f"{name}: {_OWNED_ENV[name]}")
        elif name.startswith("RAY_EXPERIMENTAL_NOSET_"):
            out.skip(line, f"{name}: clusterctl sets the switch that versions.ray reads")
        elif name in ("PATH", "PYTHONPATH", "HOME", "LD_LIBRARY_PATH"):
            out.skip(line, f"{name}: the image's own; set it there")
        elif _secret(name, value):
            _pass_through(out, name, line)
            out.skip(line, f"{name}: passed through from the submitting environment, never written")
        elif name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            # network.socket_ifname writes both (a spec that sets either itself is refused)
            out.put(("network", "socket_ifname"), value, line)
        elif name == "NCCL_IB_HCA":
            out.put(("network", "hcas"), [h for h in value.split(",") if h], line)
        elif name == "NCCL_IB_GID_INDEX" and value.isdigit():
            out.put(("network", "gid_index"), int(value), line)
        elif name.startswith(_NETWORK_PREFIXES):
            out.put(("network", "nccl_env", name), value, line)
        else:
            out.put(("container", "env", name), value, line)


_AMD_MARKERS = re.compile(r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE|rocm|MI300|mi300|RCCL_|amd", re.I)
_PRESET_IN_NAME = re.compile(
    r"(?<![a-z0-9])(mi300x|mi325x|mi355x|mi250x|h100|h800|h200|h20|b200|a100)(?![0-9])"
)


def _hardware_guess(
    script: Script | None, text: str, name: str, preset: str | None
) -> tuple[str, str]:
    """hardware.preset and why: --preset, else the file name, else a marked guess."""
    if preset is not None:
        return preset, "given with --preset"
    named = _PRESET_IN_NAME.search(name.lower())
    if named:
        return named.group(1), f"from the file name {name}"
    guess = "mi300x" if _AMD_MARKERS.search(text) else "h100"
    return guess, "a guess (the script names no hardware): give --preset"


def to_yaml(imported: Imported, source: str) -> str:
    """The spec as YAML, each value commented with the script line it came from, and the
    lines that were not mapped listed at the end. Scalars are written by PyYAML (its quoting)."""
    import yaml

    from clusterctl.spec.yamlfile import parse_yaml

    def scalar(value: Any) -> str:
        text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
        text = text.removesuffix("\n...\n").rstrip("\n")
        # PyYAML quotes for YAML 1.1; the spec loader reads YAML 1.2 (1e-6 is a number
        # there): whatever would not read back as written is double-quoted (JSON is YAML).
        if parse_yaml(f"v: {text}", "<import>")[0]["v"] != value:
            text = json.dumps(value, ensure_ascii=False)
        return text

    lines = [
        f"# Imported by clusterctl import from {_comment(source)}: {imported.read_by}.",
        "# Each value names the script line it came from; check the ones marked as guesses.",
    ]

    def walk(node: dict[str, Any], path: SpecPath, indent: int) -> None:
        for key, value in node.items():
            here = (*path, key)
            where = imported.lines.get(here)
            notes = [f"line {where}"] if where else []
            if here in imported.comments:
                notes.append(imported.comments[here])
            comment = f"  # {_comment('; '.join(notes))}" if notes else ""
            pad = "  " * indent
            free_form = path[-1:] in (("overrides",), ("args",), ("env",), ("nccl_env",))
            if isinstance(value, dict) and value and not free_form:
                lines.append(f"{pad}{scalar(key)}:{comment}")
                walk(value, here, indent + 1)
            else:
                lines.append(f"{pad}{scalar(key)}: {scalar(value)}{comment}")

    order = ["slurm", "hardware", "versions", "container", "network", "ray", "workload"]
    ordered = {k: imported.spec[k] for k in order if k in imported.spec}
    walk(ordered, (), 0)
    if imported.assumed:
        lines.append("")
        lines.append("# Assumed by the dry run (line: what the script was given):")
        for line, what in imported.assumed:
            lines.append(f"#   {line}: {_comment(what)}")
    if imported.unmapped:
        lines.append("")
        lines.append(f"# Not mapped from {_comment(source)} (line: why):")
        for line, why in imported.unmapped:
            lines.append(f"#   {line}: {_comment(why)}")
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """Text from a script made safe for one YAML comment line: a line break or any other
    control character is written as its escape, so no script byte can start a YAML line;
    a secret the text quotes (-eHF_TOKEN=..., --wandb_token x, a token's shape) is masked."""
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in _masked(text)
    )


# NAME=VALUE, --name VALUE and "NAME": "VALUE" where NAME carries a credential
# (spec/secrets.py): the forms a script hands a secret to a command in
_NAMED_VALUE = re.compile(
    r"(?P<name>--[\w.-]+|[A-Za-z_][\w.-]*|\"[A-Za-z_][\w.-]*\")"
    r"(?P<sep>=|(?<=[\w.-]) (?=[^-\s])|: ?\"?)(?P<value>[^\s,;'\"]*[^\s,;'\":])"
)


def _masked(text: str) -> str:
    def mask(found: re.Match[str]) -> str:
        name, sep, value = found["name"], found["sep"], found["value"]
        flag, quoted = name.startswith("--"), name.startswith('"')
        if (sep == " " and not flag) or (sep.startswith(":") and not quoted):
            return found.group(0)  # prose ("HF_TOKEN: passed through"), not a value
        bare = name.strip('"').lstrip("-")
        if value.startswith("$") or not (
            secret_name(bare) or bare in KEY_FLAGS or looks_like_token(value)
        ):
            return found.group(0)
        return f"{name}{sep}<secret>"

    return TOKEN_VALUE.sub("<secret>", _NAMED_VALUE.sub(mask, text))
