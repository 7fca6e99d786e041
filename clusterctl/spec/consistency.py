"""Contradictions between sections: the spec cannot mean what it says.

These are hard errors (no rule id can allow them). Likely-but-not-certain failures are lint
rules (clusterctl.lint).
"""

from __future__ import annotations

import json

from clusterctl.spec.images import duplicate_requirements
from clusterctl.spec.models import CommandWorkload, JobSpec, OpenRLHFWorkload, VerlWorkload
from clusterctl.spec.secrets import unexpanded_references

FieldPath = tuple[str | int, ...]

# Options clusterctl sets itself, as SkyPilot protects its sbatch options. Long name -> short.
PROTECTED_SBATCH = {
    "nodes": "N",
    "ntasks": "n",
    "ntasks-per-node": None,
    "gpus": "G",
    "gpus-per-node": None,
    "gpus-per-task": None,
    "gres": None,
    "cpus-per-task": "c",
    "mem": None,
    "mem-per-cpu": None,
    "mem-per-gpu": None,
    "output": "o",
    "error": "e",
    "exclusive": None,
    "nodelist": "w",
    "exclude": "x",
    "partition": "p",
    "account": "A",
    "qos": "q",
    "time": "t",
    "job-name": "J",
    "constraint": "C",
    "signal": None,
    "wrap": None,
    "requeue": None,
    "no-requeue": None,
    "dependency": "d",
}
CLEANUP_MARGIN = 10  # seconds between the end of the cleanup and SLURM's kill at the limit
PROTECTED_DOCKER = {
    "network": None,
    "net": None,
    "ipc": None,
    "name": None,
    "device": None,
    "gpus": None,
    "init": None,
    "rm": None,
    "detach": "d",
    "label": "l",
    "shm-size": None,
    "env": "e",
    "env-file": None,
    "volume": "v",
    "mount": None,
    "workdir": "w",
    "group-add": None,
    "entrypoint": None,
    "label-file": None,
    "interactive": "i",
    "tty": "t",
}
_SECTION_FOR_DOCKER = {
    "network": "network",
    "net": "network",
    "device": "container.devices",
    "gpus": "hardware.preset",
    "shm-size": "container.shm_size",
    "env": "container.env",
    "volume": "container.mounts",
    "mount": "container.mounts",
    "workdir": "container.workdir",
    "group-add": "container.group_add",
}


def protected_option(
    arg: str, table: dict[str, str | None], abbreviations: bool = False
) -> str | None:
    """The protected option ``arg`` sets, if any (long, --long=value, -x, -xVALUE, -abc).

    With ``abbreviations`` (getopt_long, as sbatch parses), a long name that begins a
    protected name counts as it: ``--nod=64`` is ``--nodes`` (or ambiguous, an error either
    way). Long names that are real sbatch options in their own right and begin a protected
    one do not exist (``--gpus`` and ``--mem`` are protected themselves).
    """
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0]
        if name in table:
            return name
        if abbreviations and name:
            matches = sorted(long for long in table if long.startswith(name))
            return " or --".join(matches) if matches else None
        return None
    if arg.startswith("-") and len(arg) > 1:
        shorts = {s: long for long, s in table.items() if s}
        if arg[1] in shorts:
            return shorts[arg[1]]
        for letter in arg[1:]:
            if not letter.isalpha():
                break
            if letter in shorts:
                return shorts[letter]
    return None


def _sbatch_extras(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    out: list[tuple[FieldPath, str]] = []
    for i, option in enumerate(spec.slurm.extra):
        name = protected_option(option, PROTECTED_SBATCH, abbreviations=True)
        if name:
            out.append(
                (
                    ("slurm", "extra", i),
                    f"--{name} is set by clusterctl from the slurm section; set it there",
                )
            )
    return out


def _docker_extras(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    out: list[tuple[FieldPath, str]] = []
    for i, arg in enumerate(spec.container.extra_args):
        name = protected_option(arg, PROTECTED_DOCKER)
        if name:
            where = _SECTION_FOR_DOCKER.get(name)
            hint = f"; use {where}" if where else ""
            out.append(
                (
                    ("container", "extra_args", i),
                    f"docker run --{name} is controlled by clusterctl{hint}",
                )
            )
        if "\n" in arg or "\r" in arg:
            out.append((("container", "extra_args", i), "newline in a docker argument"))
    return out


def _verl(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    """verl's trainer pool must fit the allocation. It may be smaller: verl gives a reward
    model or a distillation teacher resource pools of their own beside the trainer's
    (verl/trainer/main_ppo.py init_resource_pool_mgr, verl @b178a3c), so only a pool larger
    than the allocation is a contradiction (its placement group would wait forever)."""
    wl = spec.workload
    if not isinstance(wl, VerlWorkload):
        return []
    out: list[tuple[FieldPath, str]] = []
    if wl.runtime_env and spec.slurm.checkpoint_grace:
        out.append(
            (
                ("workload", "runtime_env"),
                "verl learns the stop time for its checkpoint from its environment "
                "(MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP), which a job submitted with "
                "ray job submit does not get: drop workload.runtime_env or "
                "slurm.checkpoint_grace",
            )
        )
    owned = {
        "trainer.nnodes": spec.slurm.nodes,
        "trainer.n_gpus_per_node": spec.slurm.gpus_per_node or 0,
    }
    for key, allocated in owned.items():
        for written in (key, f"+{key}", f"++{key}"):
            if written not in wl.overrides:
                continue
            value = wl.overrides[written]
            if not isinstance(value, int) or isinstance(value, bool):
                out.append(
                    (
                        ("workload", "overrides", written),
                        f"{key}={value!r} is not a number; leave it out and clusterctl sets it "
                        f"from the slurm section ({allocated})",
                    )
                )
            elif value > allocated:
                out.append(
                    (
                        ("workload", "overrides", written),
                        f"{key}={value} is more than the allocation ({allocated}): verl's "
                        "resource pool would wait for GPUs that never come",
                    )
                )
    return out


def _ports(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    ray = spec.ray
    out: list[tuple[FieldPath, str]] = []
    named = {
        "head_port": ray.head_port,
        "dashboard_port": ray.dashboard_port,
        "client_port": ray.client_port,
        "dashboard_agent_port": ray.dashboard_agent_port,
        "node_manager_port": ray.node_manager_port,
        "object_manager_port": ray.object_manager_port,
    }
    seen: dict[int, str] = {}
    range_low, range_high = (int(x) for x in ray.port_range.split("-"))
    for name, port in named.items():
        if port is None:
            continue
        if port in seen:
            out.append((("ray", name), f"port {port} is also ray.{seen[port]}"))
        elif range_low <= port <= range_high:
            out.append((("ray", name), f"port {port} lies in ray.port_range {ray.port_range}, "
                        "where other jobs' own ports come from"))  # fmt: skip
        seen[port] = name
    low, high = ray.min_worker_port, ray.max_worker_port
    if (low is None) != (high is None):
        missing = "max_worker_port" if high is None else "min_worker_port"
        out.append((("ray", missing), "set min_worker_port and max_worker_port together"))
    elif low is not None and high is not None:
        if low > high:
            out.append((("ray", "min_worker_port"), f"{low} is above max_worker_port {high}"))
        for port, name in seen.items():
            if low <= port <= high:
                out.append((("ray", name), f"port {port} lies in the worker port range"))
    return out


# Linux refuses an exec whose single argument exceeds MAX_ARG_STRLEN (32 pages: 128 KiB,
# include/uapi/linux/binfmts.h) with "Argument list too long"; all of argv and the
# environment together must stay under ARG_MAX (commonly 2 MiB). Values that reach an argv
# (docker run --env, docker exec of the workload, ray job submit) are held to both.
MAX_ARG_BYTES = 128 * 1024 - 1
MAX_ARGV_BYTES = 1024 * 1024


def _argv_sizes(spec: JobSpec) -> list[tuple[FieldPath, str]]:

    args: list[tuple[FieldPath, int]] = []
    for name, value in spec.container.env.items():
        args.append((("container", "env", name), len(f"{name}={value}".encode())))
    for name, value in spec.network.nccl_env.items():
        args.append((("network", "nccl_env", name), len(f"{name}={value}".encode())))
    wl = spec.workload
    if isinstance(wl, CommandWorkload):
        items = [wl.command] if isinstance(wl.command, str) else wl.command
        args += [(("workload", "command", i), len(item.encode())) for i, item in enumerate(items)]
    elif isinstance(wl, VerlWorkload):
        for key, override in wl.overrides.items():
            args.append((("workload", "overrides", key), len(f"{key}={override}".encode())))
    elif isinstance(wl, OpenRLHFWorkload):
        for key, arg in wl.args.items():
            args.append((("workload", "args", key), len(str(arg).encode())))
        if wl.runtime_env:
            size = len(json.dumps(wl.runtime_env).encode())
            args.append((("workload", "runtime_env"), size))
    out = [
        (path, f"{size} bytes: Linux refuses one argument over 128 KiB (put it in a file)")
        for path, size in args
        if size > MAX_ARG_BYTES
    ]
    total = sum(size for _, size in args)
    if not out and total > MAX_ARGV_BYTES:
        out.append((("workload",), f"{total} bytes of arguments: more than 1 MiB cannot be run"))
    return out


# Set by job.sbatch for every job (Ray's token authentication, one token per job).
JOB_OWNED_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
# Variables clusterctl writes from network: (plan.container_env), where the node checks and the
# choice of Ray's address read the same value: set in the environment instead, NCCL would use
# one interface or HCA and Ray and verify another (issue 21: one reading of each fact).
FROM_NETWORK = {
    name: f"{name} is written by clusterctl from {setting}: set that instead, so the node "
    "checks, Ray's address and NCCL read one value"
    for name, setting in (
        ("NCCL_SOCKET_IFNAME", "network.socket_ifname"),
        ("GLOO_SOCKET_IFNAME", "network.socket_ifname"),
        ("NCCL_IB_HCA", "network.hcas"),
        ("NCCL_IB_GID_INDEX", "network.gid_index"),
    )
} | {"RAY_ADDRESS": "RAY_ADDRESS is set by clusterctl: the workload is given its own job's head"}


def check_consistency(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    """Every contradiction between sections, as (field path, message)."""
    out: list[tuple[FieldPath, str]] = []
    for section, env in (("env", spec.container.env), ("nccl_env", spec.network.nccl_env)):
        for name in env:
            if name in JOB_OWNED_ENV:
                where = ("container" if section == "env" else "network", section, name)
                out.append((where, f"{name} is set by clusterctl: each job gets its own Ray token"))
        for name in sorted(set(env) & set(FROM_NETWORK)):
            where = ("container" if section == "env" else "network", section, name)
            out.append((where, FROM_NETWORK[name]))
    for name in spec.container.env_passthrough:
        if name in JOB_OWNED_ENV:
            out.append(
                (
                    ("container", "env_passthrough"),
                    f"{name} is set by clusterctl: each job gets its own Ray token",
                )
            )
    c, slurm = spec.container, spec.slurm
    gpus = slurm.gpus_per_node or 0
    logical = spec.hardware.logical_gpus
    if spec.hardware.preset == "none" and gpus > 0 and not logical:
        out.append(
            (
                ("slurm", "gpus_per_node"),
                f"{gpus} GPUs per node with hardware.preset none (CPU-only)",
            )
        )
    if logical and gpus != logical:
        out.append(
            (
                ("slurm", "gpus_per_node"),
                f"{gpus} GPUs per node, but hardware.logical_gpus declares {logical}",
            )
        )
    if spec.ray.num_gpus is not None and spec.ray.num_gpus > gpus:
        out.append(
            (
                ("ray", "num_gpus"),
                f"Ray would offer {spec.ray.num_gpus} GPUs per node but the job asks "
                f"SLURM for {gpus}",
            )
        )
    if slurm.cpus_per_task and spec.ray.num_cpus and spec.ray.num_cpus > slurm.cpus_per_task:
        out.append(
            (
                ("ray", "num_cpus"),
                f"Ray would offer {spec.ray.num_cpus} CPUs per node but SLURM gives "
                f"{slurm.cpus_per_task}",
            )
        )
    # after the warning: the checkpoint window, then every node's cleanup, before the limit
    needed = slurm.checkpoint_grace + c.cleanup_deadline + CLEANUP_MARGIN
    if slurm.checkpoint_grace and needed > slurm.signal_grace:
        out.append(
            (
                ("slurm", "checkpoint_grace"),
                f"{slurm.checkpoint_grace}s to checkpoint + {c.cleanup_deadline}s of cleanup "
                f"(container.cleanup_deadline) + {CLEANUP_MARGIN}s do not fit in "
                f"slurm.signal_grace={slurm.signal_grace}s: raise signal_grace to {needed}",
            )
        )
    out += _resume_conflicts(spec)
    if slurm.gres_type and slurm.gpu_request != "gres":
        out.append((("slurm", "gres_type"), "gres_type needs gpu_request: gres"))
    if c.pull == "load" and not c.load_from:
        out.append((("container", "load_from"), "pull: load needs the tarball path here"))
    if c.load_from and c.pull != "load":
        out.append((("container", "pull"), "load_from is set but pull is not 'load'"))
    if c.load_via == "sbcast" and c.pull != "load":
        out.append((("container", "load_via"), "sbcast copies the load_from tarball: pull: load"))
    if spec.network.fabric == "ethernet":
        if spec.network.hcas:
            out.append((("network", "hcas"), "HCAs listed but network.fabric is ethernet"))
        if spec.network.gid_index is not None:
            out.append((("network", "gid_index"), "GID index set but network.fabric is ethernet"))
    for name in sorted(set(c.env) & set(c.env_passthrough)):
        out.append((("container", "env", name), "also listed in container.env_passthrough"))
    targets: dict[str, int] = {}
    for i, mount in enumerate(c.mounts):
        if mount.target in targets:
            out.append(
                (
                    ("container", "mounts", i, "target"),
                    f"{mount.target} is also mounted by mounts[{targets[mount.target]}]",
                )
            )
        targets.setdefault(mount.target, i)
    seen_sidecars: set[str] = set()
    for i, sidecar in enumerate(spec.sidecars):
        if sidecar.name in seen_sidecars:
            out.append((("sidecars", i, "name"), f"another sidecar is named {sidecar.name}"))
        seen_sidecars.add(sidecar.name)
        if not sidecar.command:
            out.append((("sidecars", i, "command"), "the command is empty"))
    wl = spec.workload
    if wl.framework == "command" and not wl.command:
        out.append((("workload", "command"), "the command is empty"))
    out += _sbatch_extras(spec) + _docker_extras(spec) + _verl(spec) + _ports(spec)
    out += list(unexpanded_references(spec)) + _argv_sizes(spec) + duplicate_requirements(spec)
    return out


def _resume_conflicts(spec: JobSpec) -> list[tuple[FieldPath, str]]:
    """A workload setting that says otherwise than resume: (both are the same option)."""
    from clusterctl.spec.models import OpenRLHFWorkload, VerlWorkload
    from clusterctl.spec.resume import resume_options

    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        section, written = "overrides", dict(wl.overrides)
    elif isinstance(wl, OpenRLHFWorkload):
        section, written = "args", dict(wl.args)
    else:
        return []
    out: list[tuple[FieldPath, str]] = []
    for key, value in resume_options(spec).items():
        for name in (key, f"+{key}", f"++{key}", f"--{key}"):
            if name in written and str(written[name]).lower() != str(value).lower():
                out.append(
                    (
                        ("workload", section, name),
                        f"{written[name]!r} contradicts resume: (which sets {key} to {value!r}); "
                        "set it in one place",
                    )
                )
    return out
