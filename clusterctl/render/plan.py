"""Turn a resolved spec into the concrete argv lists and values the templates lay out.

Everything decided about the job lives here, in Python, where it is testable; the templates
only arrange these values and quote each one with the ``q`` filter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from clusterctl.render.workload_paths import WorkloadPath, workload_paths
from clusterctl.spec.models import (
    MAX_JOIN_DEADLINE,
    CommandWorkload,
    JobSpec,
    OpenRLHFWorkload,
    OverrideValue,
    Scalar,
    VerlWorkload,
)
from clusterctl.spec.presets import PRESETS, parse_version
from clusterctl.spec.resume import resume_options


@dataclass(frozen=True)
class JobPlan:
    """The job as values: what every phase of job.sbatch runs."""

    sbatch_directives: list[str]
    nodes: int
    gpus_per_node: int
    ray_num_cpus: int | None
    ray_num_gpus: int
    docker_run_args: list[str]
    container_env: dict[str, str]
    env_passthrough: list[str]
    devices: list[str]
    head_args: list[str]
    worker_args: list[str]
    join_deadline: int
    workload_kind: str
    workload_argv: list[str]
    job_submit_args: list[str] | None
    port_checks_all: list[int]  # fixed ports every node checks (the job's own come at run time)
    log_root: str
    workload_paths: list[WorkloadPath]  # checked in every node's container before Ray


def sbatch_directives(spec: JobSpec) -> list[str]:
    """The #SBATCH options, in a fixed order."""
    s = spec.slurm
    out = [f"--job-name={s.job_name}", f"--nodes={s.nodes + s.spare_nodes}", "--ntasks-per-node=1"]
    gpus = s.gpus_per_node or 0
    if gpus and s.gpu_request != "none":
        if s.gpu_request == "gres":
            kind = f"gpu:{s.gres_type}:" if s.gres_type else "gpu:"
            out.append(f"--gres={kind}{gpus}")
        else:
            out.append(f"--gpus-per-node={gpus}")
    for name, value in (
        ("cpus-per-task", s.cpus_per_task),
        ("mem", s.mem),
        ("time", s.time),
        ("partition", s.partition),
        ("account", s.account),
        ("qos", s.qos),
        ("nodelist", s.nodelist),
        ("exclude", s.exclude),
        ("constraint", s.constraint),
        ("output", s.output),
        ("error", s.error),
    ):
        if value is not None:
            out.append(f"--{name}={value}")
    if s.exclusive:
        out.append("--exclusive")
    if s.requeue is not None:
        out.append("--requeue" if s.requeue else "--no-requeue")
    # The batch shell alone gets SIGUSR1 before the time limit (scancel and preemption send
    # SIGTERM to every step): the workload can checkpoint and the trap clean up while new job
    # steps are still allowed.
    out.append(f"--signal=B:USR1@{s.signal_grace}")
    out.extend(s.extra)
    return out


def _scalar(value: Scalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def hydra_string(text: str) -> str:
    """A Hydra quoted string that Hydra's override parser (hydra-core 1.3) reads back as
    exactly ``text``: quotes escaped; backslashes doubled only where they precede a quote or
    end the string, the only places Hydra reads them as escapes."""
    body = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + body.replace("'", "\\'") + "'"


def _hydra_scalar(value: Scalar) -> str:
    return hydra_string(value) if isinstance(value, str) else _scalar(value)


def hydra_value(value: OverrideValue) -> str:
    """A Hydra override value: every string quoted (so `a,b` is no sweep, `[1,2]` no list and
    `1` no integer), numbers, booleans and null bare, lists as [a,b], dicts as {k:v}."""
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    return _hydra_scalar(value)


def verl_argv(spec: JobSpec, wl: VerlWorkload) -> list[str]:
    """python -m <entrypoint> [--config-path P] [--config-dir D] [--config-name N] with the
    overrides; the allocation keys default to the slurm section (a lower value leaves GPUs to
    another pool, which check_consistency allows)."""
    owned = {
        "trainer.nnodes": str(spec.slurm.nodes),
        "trainer.n_gpus_per_node": str(spec.slurm.gpus_per_node or 0),
    }
    argv = ["python3", "-m", wl.entrypoint]
    if wl.config_path is not None:
        argv.append(f"--config-path={wl.config_path}")
    if wl.config_dir is not None:
        argv.append(f"--config-dir={wl.config_dir}")
    if wl.config_name is not None:
        argv.append(f"--config-name={wl.config_name}")
    for key, value in wl.overrides.items():
        if key.lstrip("+") in owned:
            owned[key.lstrip("+")] = hydra_value(value)
            continue
        argv.append(key if key.startswith("~") and value is None else f"{key}={hydra_value(value)}")
    argv += [f"{k}={v}" for k, v in owned.items()]
    return argv


def openrlhf_args(wl: OpenRLHFWorkload) -> list[str]:
    """--name value pairs: true is a bare flag (but "True" for the flags that take the W&B key
    as their value), false is left out, lists repeat values."""
    from clusterctl.spec.secrets import KEY_FLAGS

    out: list[str] = []
    for name, value in wl.args.items():
        flag = name if name.startswith("-") else f"--{name}"
        if value is True and name.lstrip("-") in KEY_FLAGS:
            out += [flag, "True"]
        elif value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            out += [flag, *(_argument(v) for v in value)]
        else:
            out += [flag, _argument(value)]
    return out


def _argument(value: OverrideValue) -> str:
    """One argparse value: scalars as written, a nested list or dict as JSON."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return _scalar(value)


def job_submit_args(spec: JobSpec, wl: OpenRLHFWorkload | VerlWorkload) -> list[str]:
    """Options for ``ray job submit`` (the dashboard address and submission id come at run
    time). With a checkpoint window, Ray's job supervisor waits that long between its SIGTERM
    and SIGKILL on `ray job stop` (RAY_JOB_STOP_WAIT_TIME_S, read from the job's runtime_env
    env_vars; Ray's default is 3 s: dashboard/modules/job/job_supervisor.py, Ray 2.9-2.60)."""
    runtime_env = dict(wl.runtime_env)
    grace = spec.slurm.checkpoint_grace
    if grace:
        env_vars = dict(runtime_env.get("env_vars") or {})
        env_vars.setdefault("RAY_JOB_STOP_WAIT_TIME_S", str(grace))
        runtime_env["env_vars"] = env_vars
    if not runtime_env:
        return []
    return ["--runtime-env-json", json.dumps(runtime_env, sort_keys=True)]


def container_env(spec: JobSpec) -> dict[str, str]:
    """Literal environment for every container: preset defaults, network, then the user's."""
    preset = PRESETS[spec.hardware.preset]
    env: dict[str, str] = dict(preset.collective_env)
    if preset.vendor == "amd":
        noset = preset.ray_noset_var(parse_version(spec.versions.ray))
        if noset:
            env[noset] = "1"
    net = spec.network
    if net.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = net.socket_ifname
        env["GLOO_SOCKET_IFNAME"] = net.socket_ifname
    if net.fabric == "ethernet":
        env["NCCL_IB_DISABLE"] = "1"
    if net.hcas:
        env["NCCL_IB_HCA"] = ",".join(net.hcas)
    if net.gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(net.gid_index)
    env.update({k: _scalar(v) for k, v in net.nccl_env.items()})
    # Ray's GCS marks a node dead after health_check_failure_threshold missed checks, one
    # every health_check_period_ms, each waiting health_check_timeout_ms (Ray
    # src/ray/common/ray_config_def.h; the names checked in the 2.60 wheel's _raylet.so, not
    # in older wheels). One check a second, each given a second (the default 10 s timeout
    # per check made a hung node take 10x longer), ray.node_timeout of them.
    env["RAY_health_check_period_ms"] = "1000"
    env["RAY_health_check_timeout_ms"] = "1000"
    env["RAY_health_check_failure_threshold"] = str(spec.ray.node_timeout)
    # Python writes print() output to a pipe or file in blocks: a Ray actor's step lines
    # (verl's console logger) reached the workload log only steps later, so the stall watch
    # saw no progress during healthy steps. verl's own SLURM example sets it for the same
    # reason (volcengine/verl@b178a3cd:examples/slurm/ray_on_slurm.slurm; any Python 3).
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: _scalar(v) for k, v in spec.container.env.items()})
    if isinstance(spec.workload, CommandWorkload):
        env.update({k: str(v) for k, v in resume_options(spec).items()})
    return env


def docker_run_args(spec: JobSpec, env: dict[str, str]) -> list[str]:
    """docker run arguments shared by every node (name, labels and address come at run time)."""
    c = spec.container
    preset = PRESETS[spec.hardware.preset]
    args = [
        "--detach",
        "--init",
        "--network",
        "host",
        "--ipc",
        "host",
        "--shm-size",
        str(c.shm_size),
    ]
    for device in c.devices or []:
        args += ["--device", f"{device}:{device}"]
    for group in c.group_add or []:
        args += ["--group-add", group]
    if not spec.hardware.logical_gpus:
        # the GPU node's settings: docker --gpus, and the limits RDMA and the GPU runtime
        # need (a dev cluster's engine may not be allowed to raise memlock: runc fails with
        # "error setting rlimit type 8: operation not permitted" on this project's machine)
        args += list(preset.docker_gpu_flags)
        for ulimit in preset.ulimits:
            args += ["--ulimit", ulimit]
    if preset.vendor == "amd":
        args += ["--cap-add", "SYS_PTRACE", "--security-opt", "seccomp=unconfined"]
    elif spec.watch.stall_seconds:
        # py-spy reads other processes' memory: in Docker it needs SYS_PTRACE (py-spy
        # README, "How do I run py-spy in Docker?", py-spy 0.3-0.4)
        args += ["--cap-add", "SYS_PTRACE"]
    for mount in c.mounts:
        suffix = ":ro" if mount.read_only else ""
        args += ["--volume", f"{mount.source}:{mount.target}{suffix}"]
    if c.workdir:
        args += ["--workdir", c.workdir]
    for name, value in env.items():
        args += ["--env", f"{name}={value}"]
    for name in c.env_passthrough:
        args += ["--env", name]  # value taken from the environment of docker run, never a file
    args += c.extra_args
    return args


def ray_args(spec: JobSpec) -> tuple[list[str], list[str]]:
    """Arguments for ``ray start`` on the head and on workers (addresses come at run time)."""
    ray = spec.ray
    # --num-cpus comes at run time: ray.num_cpus, else the CPUs SLURM gave the node, so Ray
    # never claims every core of the host (verl #523).
    common = [
        f"--num-gpus={spec.ray.num_gpus or 0}",
        f"--temp-dir={ray.temp_dir}",
        "--disable-usage-stats",
    ]
    for name, port in (
        ("node-manager-port", ray.node_manager_port),
        ("object-manager-port", ray.object_manager_port),
        ("min-worker-port", ray.min_worker_port),
        ("max-worker-port", ray.max_worker_port),
    ):
        if port is not None:
            common.append(f"--{name}={port}")
    # The head's ports (--port, --dashboard-port, ...) and every node's agent port come at run
    # time too: fixed by the spec, else the job's own (cc_job_ports in job.sbatch).
    head = ["--include-dashboard=true", *common]
    return head, common


# The dev cluster's 32 nodes, all on 2 cores, joined in 158 to 357 s (5 to 11 s a node,
# docs/scale.md); nodes of a real cluster start their own processes in parallel.
JOIN_DEADLINE_FLOOR = 300  # seconds; up to 20 nodes
JOIN_SECONDS_PER_NODE = 15


def join_deadline(spec: JobSpec) -> int:
    """ray.join_deadline, else one that grows with the nodes Ray must count: every raylet
    registers with the one GCS, and with ray.join_wave only so many start at once."""
    if spec.ray.join_deadline is not None:
        return spec.ray.join_deadline
    return min(
        MAX_JOIN_DEADLINE, max(JOIN_DEADLINE_FLOOR, JOIN_SECONDS_PER_NODE * spec.slurm.nodes)
    )


def build_plan(spec: JobSpec) -> JobPlan:
    """Everything job.sbatch needs, computed from the resolved spec."""
    env = container_env(spec)
    head_args, worker_args = ray_args(spec)
    wl = spec.workload
    submit: list[str] | None = None
    if isinstance(wl, VerlWorkload):
        argv = verl_argv(spec, wl)
        submit = job_submit_args(spec, wl) if wl.runtime_env else None
    elif isinstance(wl, OpenRLHFWorkload):
        argv = ["python3", "-m", wl.entrypoint, *openrlhf_args(wl)]
        submit = job_submit_args(spec, wl)
    else:
        assert isinstance(wl, CommandWorkload)
        argv = ["bash", "-c", wl.command] if isinstance(wl.command, str) else list(wl.command)
    ray = spec.ray
    fixed_worker_ports = [p for p in (ray.node_manager_port, ray.object_manager_port) if p]
    return JobPlan(
        sbatch_directives=sbatch_directives(spec),
        nodes=spec.slurm.nodes,
        gpus_per_node=spec.slurm.gpus_per_node or 0,
        ray_num_cpus=ray.num_cpus,
        ray_num_gpus=ray.num_gpus or 0,
        docker_run_args=docker_run_args(spec, env),
        container_env=env,
        env_passthrough=list(spec.container.env_passthrough),
        devices=list(spec.container.devices or []),
        head_args=head_args,
        worker_args=worker_args,
        join_deadline=join_deadline(spec),
        workload_kind=wl.framework,
        workload_argv=argv,
        job_submit_args=submit,
        port_checks_all=fixed_worker_ports,
        log_root=log_root(spec.logs.dir),
        workload_paths=workload_paths(spec),
    )


def log_root(directory: str) -> str:
    """logs.dir as the script uses it: a relative path starts with ./ so that no command
    can read it as an option (logs.dir: --privileged)."""
    return directory if directory.startswith(("/", "./", "../")) else f"./{directory}"
