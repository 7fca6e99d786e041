#!/usr/bin/env python3
"""Record what each launch script in this corpus really executes.

Each script is copied into a fresh temporary directory, at its path in its
repository, and run there with ``bash SCRIPT`` (cwd = HOME = that directory,
a minimal fixed environment, a 20 s limit).  The first PATH entry is a
directory of stand-in executables (python, ray, srun, docker, ...) that append
one JSON line per call to a log and exit 0 without printing anything.  The
calls are written to ``<script>.argv.json`` beside the script.

Usage:
  python record_argv.py [SCRIPT ...]   record the given scripts (default: all)
  python record_argv.py --summary      rewrite SUMMARY.md from the .argv.json files

Standard library only; Python 3.11.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FRAMEWORKS = ("verl", "openrlhf")
SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm")
TIMEOUT_S = 20.0
SYSTEM_PATH = "/usr/bin:/bin"
# A fixed clock for the `date` stand-in: 2024-01-01T00:00:00Z.
FIXED_EPOCH = 1704067200

# Commands that would do real work, touch the machine, or wait: all replaced.
STANDINS = (
    # Python and the launchers.
    "python", "python3", "uv", "pip", "pip3", "conda",
    "ray", "torchrun", "deepspeed", "accelerate", "mpirun", "nsys",
    # SLURM and containers.
    "sbatch", "srun", "salloc", "scancel", "scontrol", "sinfo", "squeue", "docker",
    # Accelerators.
    "nvidia-smi", "rocm-smi", "npu-smi", "nvidia-ctk",
    # Network and downloads.
    "huggingface-cli", "hf", "modelscope", "wandb", "git", "wget", "curl", "ssh", "scp",
    "hostname",
    # System administration (OpenRLHF's nvidia_docker_install.sh).
    "sudo", "apt-get", "apt", "dpkg", "systemctl", "groupadd", "usermod", "newgrp", "gpg",
    # Time, and the `ulimit` builtin (shadowed by a function, see PRELUDE).
    "sleep", "date", "ulimit",
)  # fmt: skip

# Positional arguments for scripts that only print a usage line without them.
SCRIPT_ARGS = {
    "verl/sft__gsm8k__*": ["8", "ckpts"],
    "verl/sft__multiturn__*": ["8", "ckpts"],
}

# Hand-written notes for SUMMARY.md, on scripts whose record needs explaining.
NOTES = {
    "openrlhf/ckpt_ds_zero_to_universal.sh": "needs <CKPT_PATH> (a DeepSpeed checkpoint); "
    "prints usage on stdout; would run python -m deepspeed.checkpoint.ds_to_universal",
    "openrlhf/docker_run.sh": "interactive `docker run -it ... bash` only",
    "openrlhf/nvidia_docker_install.sh": "host setup (sudo apt-get, sudo rm -rf /var/lib/docker, "
    "...); the nvidia list URL takes the distribution from this host's /etc/os-release",
    "openrlhf/train_nonrl_slurm.sh": "sources ./train_dpo_llama.sh from the cwd (absent), so "
    "`torchrun ... -m` inside `srun bash -c` gets no module; SLURM_* unset leave empty flags",
    "openrlhf/train_ppo_ray_slurm.sh": "placeholder `OPENRLHF_PATH=<OPENRLHF_ROOT_PATH>` is a "
    "bash syntax error; the trainer would be `ray job submit` inside `srun bash -c`",
    "verl/grpo_trainer__run_qwen3_vl-30b-megatron.sh": "broken line continuation: the trainer "
    "argv stops early and the rest runs as a command (exit 127)",
    "verl/ppo_trainer__run_deepseek7b_llm_pfppo.sh": "`\\ ` (backslash, space) breaks the "
    "continuation: argv gets ' ', stops early, the rest runs as a command (exit 127)",
    "verl/grpo_trainer__run_qwen3_4b_grpo_vllm_1k_npu.sh": "sources the Ascend toolkit's "
    "set_env.sh under set -e",
    "verl/gspo_trainer__run_qwen3_32b_gspo_npu.sh": "uses `sp_size`, never set, under set -u",
    "verl/gspo_trainer__test_gspo_3b_math.sh": "SLURM job script: SLURM_JOB_NUM_NODES unset "
    "under set -u",
    "verl/gspo_trainer__test_gspo_3b_math_slurm.sh": "SLURM job script: SLURM_JOB_NUM_NODES "
    "unset under set -u",
    "verl/gspo_trainer__test_gspo_qwen30b_a3b_ep.sh": "needs HDFS_ROOT (set -u)",
    "verl/sapo_trainer__run_qwen30b_sapo.sh": "SLURM job script: data prep, conda, "
    "`until nvidia-smi` wait loop, ray start via srun, trainer via srun",
    "verl/split_placement__run_deepseek7b_llm.sh": "trainer is the example's own "
    "main_ppo_split.py, run from the cwd",
}

# Only these variables are kept in each call's "env".
ENV_KEEP = (
    r"^(?:(?:NCCL|RCCL|HIP|CUDA|ROCR|RAY|VLLM|HYDRA|TORCH|TOKENIZERS|GLOO|UCX|HF|MASTER)_"
    r"|PYTHON|WANDB_MODE$)"
)

STANDIN_SOURCE = """\
#!{python} -I
import json, os, re, sys
keep = re.compile({keep!r})
env = {{k: v for k, v in sorted(os.environ.items()) if keep.match(k)}}
call = {{"pid": os.getpid(), "cmd": {name!r}, "argv": sys.argv[1:], "env": env}}
line = json.dumps(call) + "\\n"
fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())
os.close(fd)
{tail}
"""

DATE_TAIL = """\
real = {real!r}
if real:
    os.execv(real, [real, "-u", "-d", "@{epoch}", *sys.argv[1:]])
"""

# Read by bash before the script (BASH_ENV): `ulimit` is a builtin, so PATH
# cannot replace it, and its result would depend on this host's hard limits.
PRELUDE = 'ulimit() {{ {standin} "$@"; }}\n'

# Process ids further apart than this suggest a wrap: keep the log's order then.
PID_SPAN = 1 << 14
Record = dict[str, Any]
NOT_FOUND = re.compile(r": ([^:\s]+): command not found$")
TRAINER = re.compile(r"(?:^|\s)-m\s+verl\.|verl\.trainer|openrlhf\.cli")
MODULE = re.compile(r"\b(verl\.[\w.]+|openrlhf\.cli\.[\w.]+)")


def corpus_scripts() -> list[Path]:
    """Every launch script of the corpus, sorted."""
    found = []
    for fw in FRAMEWORKS:
        found += [p for p in (HERE / fw).iterdir() if p.name.endswith(SCRIPT_SUFFIXES)]
    return sorted(found)


def original_path(script: Path) -> str:
    """The script's path in its repository, from its corpus name."""
    if script.parent.name == "openrlhf":
        return f"examples/scripts/{script.name}"
    return "examples/" + script.name.replace("__", "/")


def script_args(script: Path) -> list[str]:
    """The positional arguments a script is run with (usually none)."""
    key = f"{script.parent.name}/{script.name}"
    return next((a for pat, a in SCRIPT_ARGS.items() if fnmatch.fnmatch(key, pat)), [])


def write_standins(bin_dir: Path, log: Path) -> None:
    """Write one stand-in executable per name in STANDINS."""
    python = os.path.realpath(sys.executable)
    real_date = shutil.which("date", path=SYSTEM_PATH) or ""
    for name in STANDINS:
        tail = DATE_TAIL.format(real=real_date, epoch=FIXED_EPOCH) if name == "date" else ""
        text = STANDIN_SOURCE.format(
            python=python, keep=ENV_KEEP, name=name, log=str(log), tail=tail
        )
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)


def read_calls(log: Path) -> list[Record]:
    """The logged calls, in the order bash started them.

    Members of a pipeline and background jobs run at once, so the log's order
    can vary; process ids, given out in fork order, do not (unless they wrap).
    """
    if not log.exists():
        return []
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    pids = [c["pid"] for c in calls]
    if pids and max(pids) - min(pids) < PID_SPAN:
        calls.sort(key=lambda c: c["pid"])
    for call in calls:
        del call["pid"]
    return calls


def scrub(value: object, paths: list[tuple[str, str]]) -> object:
    """Replace each (path, token) pair in every string, recursively."""
    if isinstance(value, str):
        for path, token in paths:
            value = value.replace(path, token)
        return value
    if isinstance(value, list):
        return [scrub(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, paths) for k, v in value.items()}
    return value


def record(script: Path, timeout: float = TIMEOUT_S) -> Record:
    """Run one script under the stand-ins and return its record."""
    with tempfile.TemporaryDirectory(prefix="record_argv.") as top:
        top_path = Path(top).resolve()
        bin_dir, run_dir = top_path / "bin", top_path / "run"
        bin_dir.mkdir()
        run_dir.mkdir()
        log = top_path / "calls.jsonl"
        write_standins(bin_dir, log)
        prelude = top_path / "prelude.sh"
        prelude.write_text(PRELUDE.format(standin=bin_dir / "ulimit"))
        copy = run_dir / "src" / original_path(script)
        copy.parent.mkdir(parents=True)
        shutil.copyfile(script, copy)
        env = {
            "PATH": f"{bin_dir}:{SYSTEM_PATH}",
            "HOME": str(run_dir),
            "LANG": "C",
            "TZ": "UTC",
            "BASH_ENV": str(prelude),
        }
        bash = shutil.which("bash", path=SYSTEM_PATH) or "/bin/bash"
        args = script_args(script)
        proc = subprocess.Popen(
            [bash, str(copy), *args],
            cwd=run_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        with contextlib.suppress(ProcessLookupError):  # Stray background jobs.
            os.killpg(proc.pid, signal.SIGKILL)
        calls = read_calls(log)
        status = 124 if timed_out else proc.returncode
        result: Record = {"script": script.name}
        if args:
            result["args"] = args
        result["exit_status"] = status
        if timed_out:
            result["timed_out"] = True
        result["calls"] = calls
        lines = err.decode(errors="replace").splitlines()
        missing = sorted({m.group(1) for line in lines if (m := NOT_FOUND.search(line))})
        if missing:
            result["missing_commands"] = missing
        if status != 0:
            result["stderr_tail"] = lines[-5:]
        paths = [
            (str(run_dir), "<tmp>"),
            (str(top_path), "<tmp>/.."),
            (str(top_path.parent), "<tmp>/../.."),
        ]
        return scrub(result, paths)  # type: ignore[return-value]


def trainer_call(calls: list[Record]) -> tuple[Record, str] | None:
    """The first call that starts a verl / OpenRLHF trainer, and its module."""
    for call in calls:
        text = " ".join(call["argv"])
        if TRAINER.search(text):
            modules = MODULE.findall(text)
            return call, (modules[0] if modules else "?")
    return None


def launcher(call: Record) -> str:
    """A short name for how a trainer call is launched."""
    cmd: str = call["cmd"]
    argv = call["argv"]
    if cmd == "ray" and argv[:2] == ["job", "submit"]:
        return "ray job submit"
    if cmd == "uv" and argv[:1] == ["run"]:
        return "uv run"
    if cmd in ("python", "python3"):
        return f"{cmd} -m" if "-m" in argv else cmd
    if cmd == "srun":
        inner = next((w for w in ("apptainer", "torchrun", "python3", "python") if w in argv), "")
        return f"srun ({inner})" if inner else "srun"
    return cmd


def no_trainer_reason(result: Record) -> str:
    """Why a record has no trainer call."""
    calls = result["calls"]
    if result["exit_status"] != 0 and not calls:
        tail = result.get("stderr_tail") or ["(no stderr; usage text on stdout)"]
        return f"exit {result['exit_status']} before any call: {tail[-1]}"
    for call in calls:
        script = call["argv"][0] if call["argv"] else ""
        if call["cmd"].startswith("python") and script.endswith(".py"):
            return f"runs a local file: {call['cmd']} {script}"
    if calls:
        return "no call names a trainer module"
    return "no stand-in was called"


def summary() -> str:
    """SUMMARY.md's text, from the .argv.json files."""
    out = ["# Launch-script corpus: summary", ""]
    out.append("Generated by `python record_argv.py --summary` from the `*.argv.json` files.")
    out.append("Trainer call: the first call whose argv contains `-m verl.`, `verl.trainer`")
    out.append("or `openrlhf.cli`. `<tmp>` stands for the run's temporary cwd = HOME.")
    out.append("`calls` counts every stand-in, `date` and `ulimit` included (see SOURCES.md).")
    out.append("")
    modules: Counter[str] = Counter()
    launchers: Counter[str] = Counter()
    for fw in FRAMEWORKS:
        records = [json.loads(p.read_text()) for p in sorted((HERE / fw).glob("*.argv.json"))]
        found = [r for r in records if trainer_call(r["calls"])]
        exit0 = sum(r["exit_status"] == 0 for r in records)
        out.append(f"## {fw}: {len(records)} scripts, {exit0} exit 0, {len(found)} trainer calls")
        out.append("")
        for r in records:
            cmds = Counter(c["cmd"] for c in r["calls"])
            called = ", ".join(f"{c}x{n}" if n > 1 else c for c, n in cmds.items()) or "-"
            hit = trainer_call(r["calls"])
            if hit:
                call, module = hit
                modules[module] += 1
                launchers[launcher(call)] += 1
                how = f"`{module}` via {launcher(call)}"
            else:
                how = f"none found ({no_trainer_reason(r)})"
            args = f" (args: {' '.join(r['args'])})" if r.get("args") else ""
            line = f"- `{r['script']}`{args}: exit {r['exit_status']}; calls: {called}; "
            line += f"trainer: {how}"
            if r.get("missing_commands"):
                line += f"; not found: {', '.join(r['missing_commands'])}"
            if note := NOTES.get(f"{fw}/{r['script']}"):
                line += f". Note: {note}"
            out.append(line)
        out.append("")
    out.append("## Trainer modules")
    out.append("")
    out += [f"- `{m}`: {n}" for m, n in modules.most_common()]
    out.append("")
    out.append("## Launchers of the trainer calls")
    out.append("")
    out += [f"- {m}: {n}" for m, n in launchers.most_common()]
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Record every given script (default: the whole corpus), or write SUMMARY.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path, help="scripts (default: all)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per script")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--summary", action="store_true", help="only rewrite SUMMARY.md")
    args = parser.parse_args(argv)
    if args.summary:
        (HERE / "SUMMARY.md").write_text(summary())
        return 0
    scripts = [p.resolve() for p in args.scripts] or corpus_scripts()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(lambda s: (s, record(s, args.timeout)), scripts)
        for script, result in results:
            out = script.with_name(script.name + ".argv.json")
            out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
            n = len(result["calls"])
            print(f"{script.parent.name}/{script.name}: exit {result['exit_status']}, {n} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
