"""What a dry run recorded, as the Script the conversion reads: every command bash ran with
bash's values, in order, and the list of what the stand-ins assumed on the script's behalf."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

from clusterctl.importer.dryrun import (
    Call,
    DryRun,
    Target,
    assumed_environment,
    dry_run,
    environment_of,
)
from clusterctl.importer.shell import Command, Script, ScriptError, read_script_file
from clusterctl.spec.presets import PRESETS

# Tools whose answer the script may have used as a value: each call is listed as assumed.
_ANSWERING = {"nvidia-smi", "rocm-smi", "amd-smi", "hostname", "scontrol", "date", "python",
              "python3"}  # fmt: skip
# Node counts a launcher puts in the environment at run time (SLURM, PBS, PyTorchJob-style
# platforms): a script that reads one gets the allocation's count from the dry run.
NODE_COUNT_VARIABLES = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "NNODES", "NUM_NODES",
                        "WORLD_SIZE", "PBS_NODEFILE", "MLP_WORKER_NUM", "ARNOLD_WORKER_NUM",
                        "PET_NNODES")  # fmt: skip
_BASH_OWN = {"HOME", "PWD", "OLDPWD", "RANDOM", "LINENO", "BASH_SOURCE", "BASH", "IFS",
             "SECONDS", "PPID", "UID", "EUID", "HOSTNAME", "OPTARG", "OPTIND", "FUNCNAME",
             "PIPESTATUS", "BASHPID", "EPOCHSECONDS", "REPLY", "SHELL", "USER", "PATH",
             "BASH_REMATCH", "LOGNAME", "TERM", "LANG", "TZ", "PS1", "GROUPS", "HOSTTYPE",
             "OSTYPE", "MACHTYPE", "SHLVL", "COLUMNS", "LINES", "BASH_VERSION"}  # fmt: skip


def target_of(preset: str, nodes: int, gpus: int | None = None, cpus: int | None = None) -> Target:
    """The node the stand-ins answer as: the preset's, with the GPUs and CPUs the job asks
    for (its #SBATCH --gres=gpu:N / --gpus-per-node, --cpus-per-task) where it says."""
    found = PRESETS[preset]
    names = {"mi300x": "AMD Instinct MI300X", "mi250x": "AMD Instinct MI250X",
             "mi325x": "AMD Instinct MI325X", "mi355x": "AMD Instinct MI355X",
             "h100": "NVIDIA H100 80GB HBM3", "h800": "NVIDIA H800",
             "h200": "NVIDIA H200", "h20": "NVIDIA H20", "b200": "NVIDIA B200",
             "a100": "NVIDIA A100-SXM4-80GB"}  # fmt: skip
    gpu_name = names.get(preset, "none")
    return Target(found.vendor, gpu_name, gpus or found.gpus_per_node, nodes, cpus or 128)


# A template's placeholder where bash reads a redirection: `export WANDB_API_KEY=<your key>`
_SYNTAX_AT = re.compile(r"line (\d+): syntax error near unexpected token")
_PLACEHOLDER = re.compile(r"(?<![\w'\"<])<([A-Za-z_][\w.:/-]*)>(?![\w'\">])")


def run_script(
    path: Path, args: list[str], target: Target, env: dict[str, str], deadline: float = 0.0
) -> DryRun:
    """The dry run; a script bash itself refuses (a syntax error) is a ScriptError. A line
    bash refuses for a template's <placeholder> is run with the placeholder as its text, and
    that is listed: the user fills it in."""
    text = read_script_file(path)  # bounded, as every read of a script
    filled: list[tuple[int, str]] = []
    for _ in range(MAX_PLACEHOLDER_LINES):
        run = dry_run(path, args, target, env, text if filled else None)
        if deadline and time.monotonic() > deadline:
            break  # import's whole budget is spent: what ran is what is read
        at = _SYNTAX_AT.search(run.output)
        lines = text.split(b"\n")
        if at is None or not 0 < int(at[1]) <= len(lines):
            break
        number = int(at[1])
        line = lines[number - 1].decode(errors="replace")
        quoted = _PLACEHOLDER.sub(lambda m: f"'<{m[1]}>'", line)
        if quoted == line:
            break
        filled += [(number, m[0]) for m in _PLACEHOLDER.finditer(line)]
        lines[number - 1] = quoted.encode()
        text = b"\n".join(lines)
    run.placeholders = filled
    if not run.calls and run.exit_status == 2:
        errors = [ln for ln in run.output.splitlines() if "syntax error" in ln]
        if errors:
            raise ScriptError(f"bash refuses it: {errors[0].split(': ', 1)[-1]}")
    return run


MAX_PLACEHOLDER_LINES = 8


def script_from_run(run: DryRun, static: Script | None, source: str, env_given: set[str]) -> Script:
    """Each recorded call as a Command (a launcher's words in front of the command it ran),
    the #SBATCH lines as the static reader found them, and what was assumed."""
    script = Script()
    if static is not None:
        script.sbatch = list(static.sbatch)
        script.assigned_at = {name: var.line for name, var in static.variables.items()}
    launched = {call.parent for call in run.calls if call.parent}
    for call in run.calls:
        if call.id in launched and call.inner >= 0:
            continue  # its words stand in front of the command it ran
        prefix = [word for parent in run.parents(call) for word in parent.argv[: parent.inner]]
        script.commands.append(
            Command(
                prefix + call.argv,
                call.line,
                call.line,
                environment_of(call, run),
                conditional=False,
                unresolved=[],
                background=call.background
                or any(p.background for p in run.parents(call))
                or _written_to_background(call, static),
            )
        )
    script.assumed = _assumed(run, source, env_given) + [
        (line, f"{word} is a placeholder of the script: kept as that text; fill it in")
        for line, word in run.placeholders
    ]
    if run.exit_status and not run.timed_out:
        last = [ln for ln in run.output.splitlines() if ln.strip()][-1:] or [""]
        where = f" after line {run.calls[-1].line}" if run.calls else ""
        script.stopped = (
            f"the script stopped with exit {run.exit_status}{where} under the dry run "
            f"({target_text(run)}): {last[0][:200]}"
        )
    if run.timed_out:
        why = "the dry run was stopped at its deadline (a wait loop?)"
        script.notes.append((0, f"{why}: what ran until then is what was read"))
    return script


def _written_to_background(call: Call, static: Script | None) -> bool:
    """The script sends the command on CALL's line to the background as bash reads it (`a |
    tee log &`: bash gives a pipeline sent off no /dev/null stdin, so the run cannot tell)."""
    if static is None or not call.line:
        return False
    program = call.argv[0].rsplit("/", 1)[-1]
    return any(
        c.background and c.line <= call.line <= c.end_line and c.argv[0].endswith(program)
        for c in static.commands
    )


def _assumed(run: DryRun, source: str, env_given: set[str]) -> list[tuple[int, str]]:
    assumed: list[tuple[int, str]] = []
    for call in run.calls:
        if call.tool in _ANSWERING and not _is_trainer_like(call):
            text = shlex.join(call.argv)
            if len(text) > 120:
                text = text[:117] + "..."
            assumed.append((call.line, f"`{text}` answered as on node0 of the target"))
    allocation = assumed_environment(_target_from(run))
    for name in sorted(_referenced(source)):
        if name in allocation and name not in env_given:
            line = _first_line(source, name)
            assumed.append((line, f"${name}={allocation[name]} (the target allocation's)"))
        elif name == "HOME" and name not in env_given:
            line = _first_line(source, name)
            assumed.append((line, f"$HOME={run.baseline.get('HOME', '')} (yours)"))
    for name in sorted(unset_variables(source) - set(run.baseline) - env_given):
        assumed.append(
            (
                _first_line(source, name),
                f"${name} is read from the environment and unset here, so bash made it "
                f"empty: give --env {name}=VALUE if your shell sets it",
            )
        )
    assumed.extend(run.assumed)
    return sorted(set(assumed))


def target_text(run: DryRun) -> str:
    target = _target_from(run)
    return f"{target.nodes} node(s) of {target.gpus_per_node} x {target.gpu_name or 'no GPU'}"


def _target_from(run: DryRun) -> Target:
    env = run.baseline
    return Target(
        env.get("CC_VENDOR", "none"),
        env.get("CC_GPU_NAME", ""),
        int(env.get("CC_GPUS", "0") or 0),
        int(env.get("SLURM_NNODES", "1") or 1),
    )


def _is_trainer_like(call: Call) -> bool:
    return call.tool.startswith("python") and "-c" not in call.argv[1:2]


_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNMENT = re.compile(
    r"(?:^|[\s;(&|{])(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?"
    r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?="
)
_BOUND = re.compile(
    r"\b(?:for|select)\s+([A-Za-z_]\w*)\s+in\b|\bread\s+(?:-\w+\s+(?:\S+\s+)?)*([A-Za-z_][\w ]*)"
    r"|\bgetopts\s+\S+\s+([A-Za-z_]\w*)|\bexport\s+([A-Za-z_]\w*)\s*$"
)


def _referenced(source: str) -> set[str]:
    return {m.group(1) for m in _REFERENCE.finditer(source) if not _comment_only(source, m)}


def unset_variables(source: str) -> set[str]:
    """Variables the script reads but never sets: its environment's, or nothing."""
    assigned = {m.group(1) for m in _ASSIGNMENT.finditer(source)}
    for m in _BOUND.finditer(source):
        for group in m.groups():
            if group:
                assigned.update(group.split())
    return _referenced(source) - assigned - _BASH_OWN


def _comment_only(source: str, match: re.Match[str]) -> bool:
    start = source.rfind("\n", 0, match.start()) + 1
    return source[start : match.start()].lstrip().startswith("#")


def _first_line(source: str, name: str) -> int:
    for number, text in enumerate(source.splitlines(), 1):
        if not text.lstrip().startswith("#") and re.search(rf"\$\{{?{name}\b", text):
            return number
    return 0
