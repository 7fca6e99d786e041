"""The job spec: one pydantic model per YAML section.

Defaults that depend on other sections (GPU counts from the preset, devices from the fabric,
Ray CPUs from SLURM) are filled in by ``JobSpec.resolve_defaults``, so the object that
validation returns is the fully resolved spec that ``render`` writes out.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from typing_extensions import TypeAliasType

from clusterctl.spec.presets import INFINIBAND_DEVICE, PRESETS, PresetName

# Values that land on an #SBATCH line are not read by a shell but by sbatch's own option
# parser, which does not understand quoting: they are restricted to characters that need none.
SlurmWord = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.,:+=@%/\[\]-]+$")]
# The job name also names the bundle directory and the log directory: no path separators,
# and no leading '-' or '.' (it must never read as an option or climb out of a directory).
JobName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]


def _sbatch_option(value: str) -> str:
    """One sbatch option per entry: sbatch splits an #SBATCH line into words at white space
    and quotes, so "--comment=x --nodes=64" would be two options."""
    if not re.match(r"^--?[A-Za-z]", value):
        raise ValueError("an sbatch option starts with - or --")
    if re.search(r"[\s'\"\\]", value):
        raise ValueError(
            "one option per entry, with no white space, quotes or backslashes (sbatch splits "
            "#SBATCH lines into words): write --opt=value or -Xvalue"
        )
    return value


SbatchOption = Annotated[str, AfterValidator(_sbatch_option)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
AbsPath = Annotated[str, StringConstraints(pattern=r"^/[^\x00\n]*$")]
# docker --volume SOURCE:TARGET[:ro] splits at ':' and cannot carry one in a path.
MountPath = Annotated[str, StringConstraints(pattern=r"^/[^\x00\n:,]*$")]


def _int_as_text(value: object) -> object:
    """YAML reads `mem: 0` or `time: 30` as integers; SLURM takes them as text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Size = Annotated[
    str, BeforeValidator(_int_as_text), StringConstraints(pattern=r"^[0-9]+[kKmMgGtT]?[bB]?$")
]
SlurmTime = Annotated[
    str,
    BeforeValidator(_int_as_text),
    StringConstraints(
        pattern=r"^(UNLIMITED|INFINITE|[0-9]+|[0-9]+:[0-9]{2}(:[0-9]{2})?|[0-9]+-[0-9]+(:[0-9]{2}){0,2})$"
    ),
]
Port = Annotated[int, Field(ge=1024, le=65535)]
PORT_BLOCK = 16  # per-job ports: GCS, dashboard, client, then one agent port per node slot


def _port_range(value: str) -> str:
    low, sep, high = value.partition("-")
    if not (sep and low.isdigit() and high.isdigit()):
        raise ValueError("write LOW-HIGH, e.g. 20000-29999")
    if not 1024 <= int(low) <= int(high) <= 65535:
        raise ValueError("ports must satisfy 1024 <= LOW <= HIGH <= 65535")
    if int(high) - int(low) + 1 < PORT_BLOCK:
        raise ValueError(f"the range must hold at least {PORT_BLOCK} ports (one job's block)")
    return value


PortRange = Annotated[str, AfterValidator(_port_range)]
ImageRef = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$")]
# What `docker image inspect --format {{.Id}}` prints: the sha256 of the image's config.
ImageId = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")]
# A version as pip and image tags spell it (also lands in Dockerfiles, which are line-based).
Version = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!*_-]*$")]


def _requirement(value: str) -> str:
    """A pip requirement specifier, judged by the parser pip itself uses (packaging)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if value.startswith("-"):
        raise ValueError("pip options are not requirements; only specifiers such as 'pkg==1.2'")
    try:
        Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"not a pip requirement: {exc}") from None
    return value


PipRequirement = Annotated[str, AfterValidator(_requirement)]

# CC_* are job.sbatch's own variables and CLUSTERCTL_* the container's: a spec name there
# would be reset by the script or clash with it.
_RESERVED_ENV = ("CC_", "CLUSTERCTL_")


def _unreserved(name: str) -> str:
    if name.startswith(_RESERVED_ENV):
        raise ValueError(f"{name}: the prefixes CC_ and CLUSTERCTL_ are clusterctl's own")
    return name


UserEnvName = Annotated[EnvName, AfterValidator(_unreserved)]
# A Hydra override key (hydra-core 1.3 grammar: [+|++|~]key[@package]).
HydraKey = Annotated[
    str,
    StringConstraints(
        pattern=r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*(@[A-Za-z0-9_.:]*)?$"
    ),
]
Scalar = str | int | float | bool | None
# Hydra override values nest: lists of lists, dicts ({a: 1, b: [2, 3]}), as its grammar allows.
OverrideValue = TypeAliasType(
    "OverrideValue", "Scalar | list[OverrideValue] | dict[str, OverrideValue]"
)


class Section(BaseModel):
    """Base for every section: unknown keys are errors, never silently ignored.

    Types are strict (YAML's `true` is no node count, "3" no integer) and numbers finite.
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=False, strict=True, allow_inf_nan=False
    )


class SlurmSpec(Section):
    """What goes into the #SBATCH header."""

    job_name: JobName = Field("clusterctl", description="sbatch --job-name")
    partition: SlurmWord | None = Field(None, description="sbatch --partition")
    account: SlurmWord | None = Field(None, description="sbatch --account")
    qos: SlurmWord | None = Field(None, description="sbatch --qos")
    time: SlurmTime = Field("01:00:00", description="sbatch --time (walltime limit)")
    nodes: int = Field(1, ge=1, le=4096, description="number of nodes, one container per node")
    spare_nodes: int = Field(
        0,
        ge=0,
        le=64,
        description="extra nodes allocated (sbatch --nodes=nodes+spare_nodes): preflight "
        "judges all of them and the job runs on `nodes` healthy ones, the batch node (the Ray "
        "head) among them",
    )
    drain_bad_nodes: bool = Field(
        False,
        description="with spare_nodes: drain the nodes left out (scontrol update State=DRAIN "
        'Reason="clusterctl: ..."; needs SLURM operator rights)',
    )
    gpus_per_node: int | None = Field(
        None, ge=0, le=64, description="GPUs per node; default from hardware.preset"
    )
    gpu_request: Literal["gpus-per-node", "gres", "none"] | None = Field(
        None,
        description="render the GPU request as --gpus-per-node=N or --gres=gpu:N (clusters "
        "differ), or none: ask SLURM for no GPU; default gpus-per-node, none with "
        "hardware.logical_gpus (a dev cluster whose SLURM offers GPUs, `dev-cluster up "
        "--gpus-per-node K`, takes gpus-per-node or gres)",
    )
    gres_type: SlurmWord | None = Field(
        None, description="GPU type in the gres string: --gres=gpu:TYPE:N"
    )
    cpus_per_task: int | None = Field(
        None, ge=1, le=1024, description="sbatch --cpus-per-task (one task per node)"
    )
    mem: Size | None = Field(None, description="sbatch --mem per node, e.g. 0 (all) or 512G")
    exclusive: bool = Field(True, description="sbatch --exclusive")
    nodelist: SlurmWord | None = Field(None, description="sbatch --nodelist, e.g. gpu-[0-1]")
    exclude: SlurmWord | None = Field(None, description="sbatch --exclude")
    constraint: SlurmWord | None = Field(None, description="sbatch --constraint")
    output: SlurmWord = Field("clusterctl-%x-%j.out", description="sbatch --output")
    error: SlurmWord | None = Field(None, description="sbatch --error (default: with output)")
    signal_grace: int = Field(
        120,
        ge=10,
        le=3600,
        description="seconds before the time limit at which the script is told to clean up",
    )
    checkpoint_grace: int = Field(
        0,
        ge=0,
        le=3600,
        description="seconds the workload gets after SLURM's time-limit warning (signal_grace "
        "before the limit) to save a checkpoint and exit before the containers are removed "
        "(verl also gets the stop time for its own save, OpenRLHF is stopped with ray job "
        "stop; 0: stopped at once)",
    )
    requeue: bool | None = Field(
        None,
        description="true: sbatch --requeue (SLURM may requeue the job after a node failure or "
        "a preemption; each run keeps its own log directory); false: --no-requeue; unset: the "
        "cluster's JobRequeue default",
    )
    continuations: int = Field(
        0,
        ge=0,
        le=100,
        description="runs submitted after one that ended unfinished (time limit, a failed node "
        "or workload; not scancel), each chained with --dependency=afterany and continuing from "
        "the workload's last checkpoint, until one finishes or these are spent",
    )
    retry_exclude_bad_nodes: bool = Field(
        False,
        description="a continuation after a node's failure runs without that node (--exclude)",
    )
    extra: list[SbatchOption] = Field(
        default_factory=list,
        description="extra #SBATCH options; options clusterctl sets itself are refused",
    )


class HardwareSpec(Section):
    """The kind of node: decides vendor, devices, visibility variables and NCCL/RCCL defaults."""

    preset: PresetName = Field(
        "none",
        description="mi300x, mi325x, mi355x, mi250x, h100, h800, h200, h20, b200, a100 or none",
    )
    logical_gpus: int | None = Field(
        None,
        ge=1,
        le=64,
        description="dev clusters without GPUs: declare this many GPUs to Ray on each node "
        "(Ray takes a declared count on faith) and run the preset's job with no device: SLURM "
        "is asked for no GPU unless slurm.gpu_request says how, no GPU device or docker --gpus "
        "reaches the containers, preflight skips the GPU checks saying why, and the self-test "
        "runs its GPU branches up to the first call that needs a device, reported as a named "
        "skip; with preset none, a CPU "
        "job whose framework places its workers by Ray GPU resources (verl's resource pools)",
    )


class VersionsSpec(Section):
    """Versions of the software stack in the image: used by the build and by the lint rules."""

    ray: Version = Field("2.60.0", description="ray[default] version, the same on every node")
    python: Version = Field("3.11", description="Python in the image")
    torch: Version | None = Field(None, description="PyTorch version")
    vllm: Version | None = Field(None, description="vLLM version")
    verl: Version | None = Field(None, description="verl version")
    openrlhf: Version | None = Field(None, description="OpenRLHF version")
    rocm: Version | None = Field(None, description="ROCm version (AMD presets)")
    cuda: Version | None = Field(None, description="CUDA version (NVIDIA presets)")


class BuildSpec(Section):
    """An image build rendered into the bundle as a Dockerfile."""

    base_image: ImageRef | None = Field(
        None, description="FROM image; default per Dockerfile flavour"
    )
    dockerfile: Literal["rocm", "cuda", "cpu"] | None = Field(
        None, description="which Dockerfile template; default from hardware.preset"
    )
    wheelhouse: (
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")] | None
    ) = Field(
        None,
        description="directory of wheels (relative to the build context) installed with "
        "pip --no-index: offline builds for air-gapped clusters",
    )
    pip_packages: list[PipRequirement] = Field(
        default_factory=list, description="extra pip requirements installed in the image"
    )


class MountSpec(Section):
    source: MountPath = Field(description="host path")
    target: MountPath = Field(description="path inside the container")
    read_only: bool = False


class ContainerSpec(Section):
    """One container per node."""

    runtime: Literal["docker"] = Field("docker", description="container runtime")
    image: ImageRef = Field(description="image reference, the same on every node")
    pull: Literal["always", "if-missing", "never", "load"] = Field(
        "if-missing",
        description="always pull, pull if missing, never pull (fail if missing), or docker "
        "load a tarball from shared storage",
    )
    load_from: AbsPath | None = Field(
        None,
        description="image tarball for pull: load (clusterctl image save writes it and its "
        "image ID beside it: every node's image must then be that one)",
    )
    load_via: Literal["shared", "sbcast"] = Field(
        "shared",
        description="pull: load: every node reads load_from from shared storage (shared), or "
        "SLURM's sbcast reads it once and copies it down a tree to each node's load_stage "
        "(sbcast); each node then loads its own copy and removes it",
    )
    # SLURM's sbcast page: "DEST should be on a file system local to that node"; its examples
    # write to /tmp (slurm.schedmd.com/sbcast.html, Slurm 19.05 to 26.05)
    load_stage: AbsPath = Field(
        "/tmp",
        description="node-local directory sbcast copies the tarball into (load_via: sbcast)",
    )
    image_id: ImageId | None = Field(
        None,
        description="the image ID (sha256:...) every node must hold under container.image, as "
        "clusterctl build / image save print it; a node with another image under the tag "
        "fails preflight",
    )
    build: BuildSpec | None = Field(None, description="render a Dockerfile into the bundle")
    mounts: list[MountSpec] = Field(default_factory=list, description="bind mounts")
    workdir: AbsPath | None = Field(None, description="working directory in the container")
    shm_size: Size | None = Field(None, description="--shm-size; default from the preset")
    env: dict[UserEnvName, Scalar] = Field(
        default_factory=dict, description="literal environment values (no secrets here)"
    )
    env_passthrough: list[UserEnvName] = Field(
        default_factory=list,
        description="names passed through from the submitting environment (secrets such as "
        "WANDB_API_KEY, HF_TOKEN): never in the bundle, argv or clusterctl's logs; Docker keeps "
        "the value in the container's config and SLURM in the job's saved environment, as for "
        "any variable a job passes",
    )
    devices: list[AbsPath] | None = Field(
        None,
        description="device nodes; default from the preset, plus /dev/infiniband on ib/roce",
    )
    group_add: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]] | None = Field(
        None, description="supplementary groups; default from the preset (video on AMD)"
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="extra docker run arguments; ones clusterctl controls are refused",
    )
    prepare_deadline: int = Field(
        1800,
        ge=10,
        le=86400,
        description="seconds for the preflight step on every node, image pull or load included",
    )
    cleanup_deadline: int = Field(
        60, ge=5, le=600, description="seconds for removing the containers at the end"
    )
    orphan_timeout: int = Field(
        60,
        ge=10,
        le=3600,
        description="a node removes its own container when the batch side's heartbeat is "
        "this many seconds old, or SLURM no longer runs this run of the job (a dead man's "
        "switch for nodes whose slurmd or batch host died)",
    )


class NetworkSpec(Section):
    """How nodes talk to each other."""

    fabric: Literal["ib", "roce", "ethernet"] | None = Field(
        None, description="ib, roce or ethernet; default from the preset"
    )
    hcas: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]+$")]] = Field(
        default_factory=list, description="HCAs for NCCL_IB_HCA, e.g. mlx5_0"
    )
    gid_index: int | None = Field(None, ge=0, le=255, description="NCCL_IB_GID_INDEX")
    socket_ifname: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:^=,-]+$")] | None = (
        Field(
            None,
            description="interface for NCCL/GLOO bootstrap and for the node addresses Ray "
            "uses, in NCCL_SOCKET_IFNAME's forms: name prefixes (ib,eth), =exact, ^excluded",
        )
    )
    address_source: Literal["interface", "slurm"] = Field(
        "interface",
        description="where a node's address comes from: the IPv4 of socket_ifname (or the "
        "first global address), or the NodeAddr SLURM has for the node",
    )
    nccl_env: dict[UserEnvName, Scalar] = Field(
        default_factory=dict, description="extra NCCL_* / RCCL_* variables"
    )
    allow_loopback: bool = Field(
        False,
        description="accept a loopback node address: only for single-host dev clusters where "
        "every SLURM node is the same machine",
    )


# seconds: the longest join any job may wait for (render.plan.join_deadline caps its own at it)
MAX_JOIN_DEADLINE = 7200


class RaySpec(Section):
    """The Ray cluster inside the containers."""

    # Every port left unset is the job's own: a block of PORT_BLOCK ports in port_range,
    # chosen by the job id, so jobs that share a host (or nodes) never meet on one port.
    head_port: Port | None = Field(None, description="GCS port on the head; default: per job")
    dashboard_port: Port | None = Field(
        None, description="dashboard / job submission port; default: per job"
    )
    client_port: Port | None = Field(None, description="Ray client server port; default: per job")
    dashboard_agent_port: Literal[0] | Port | None = Field(
        None,
        description="dashboard agent HTTP port on every node; default: per job and node (13 "
        "slots: nodes past them share one on separate hosts); 0: any free port, for more "
        "nodes on one host (the dev cluster)",
    )
    node_timeout: int = Field(
        30,
        ge=5,
        le=3600,
        description="seconds a node may miss Ray's health checks before the job fails naming "
        "it as lost (Ray's own default is about 15-60 s)",
    )
    port_range: PortRange = Field(
        "20000-29999",
        description="where per-job ports come from: LOW-HIGH, blocks of 16 by job id "
        "(default: between Ray's worker ports 10002-19999 and Linux's ephemeral 32768-60999)",
    )
    node_manager_port: Port | None = Field(None, description="fixed raylet port")
    object_manager_port: Port | None = Field(None, description="fixed object manager port")
    min_worker_port: Port | None = Field(None, description="lowest worker port")
    max_worker_port: Port | None = Field(None, description="highest worker port")
    temp_dir: AbsPath = Field("/tmp/ray", description="node-local Ray temp dir in the container")
    num_cpus: int | None = Field(
        None, ge=1, le=4096, description="CPUs Ray offers per node; default slurm.cpus_per_task"
    )
    num_gpus: int | None = Field(
        None, ge=0, le=64, description="GPUs Ray offers per node; default slurm.gpus_per_node"
    )
    start_deadline: int = Field(120, ge=5, le=3600, description="seconds for the head to answer")
    join_deadline: int | None = Field(
        None,
        ge=5,
        le=MAX_JOIN_DEADLINE,
        description="seconds for every node to join Ray (default: grows with the node count, "
        "see render.plan.join_deadline)",
    )
    join_retries: int = Field(3, ge=1, le=20, description="ray start attempts per worker")
    # Ray's own autoscaler keeps at most 10 node launches in flight
    # (AUTOSCALER_MAX_CONCURRENT_LAUNCHES, ray 2.60 autoscaler/_private/constants.py)
    join_wave: int | None = Field(
        32,
        ge=1,
        le=4096,
        description="at most this many workers start Ray at once, the next as one joins "
        "(null: all at once); lower it where nodes share cores (the dev cluster)",
    )


class SelftestSpec(Section):
    """Connectivity self-test between the nodes before the workload starts."""

    enabled: bool = True
    deadline: int = Field(120, ge=5, le=3600, description="seconds for the whole self-test")
    backend: Literal["gloo", "nccl"] | None = Field(
        None,
        description="collective backend tested: nccl (RCCL on ROCm) with one rank per GPU on "
        "GPU presets, gloo with one rank per node otherwise (the default picks by preset)",
    )
    size_mb: int = Field(16, ge=1, le=16384, description="all-reduce message size")
    min_busbw_gbps: float | None = Field(
        None,
        ge=0,
        le=100_000,
        description="fail below this all-reduce bus bandwidth (0: only report); unset: the "
        "preset's public acceptance floor where this test is comparable with it (one node, "
        "every GPU a rank, a message at least the figure's size), else only report",
    )
    rollout_tp: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="GPUs of one rollout engine for the placement rehearsal (one STRICT_PACK "
        "group of TP bundles per engine; setting it or rollout_engines replaces OpenRLHF's own "
        "PACK shape); default: the workload's rollout TP (verl "
        "actor_rollout_ref.rollout.tensor_model_parallel_size, OpenRLHF "
        "--vllm_tensor_parallel_size)",
    )
    rollout_engines: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="rollout engines placed at once; default: the workload's (OpenRLHF "
        "--vllm_num_engines, verl: every GPU of the job / TP)",
    )
    weight_sync_mb: int = Field(
        16,
        ge=0,
        le=16384,
        description="tensor broadcast from a trainer rank on the head to a rollout rank on "
        "another node in a fresh process group, timed (0: skip the rehearsal)",
    )


class VerlWorkload(Section):
    framework: Literal["verl"]
    entrypoint: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")] = Field(
        "verl.trainer.main_ppo", description="module run with python -m"
    )
    config_path: Annotated[str, StringConstraints(pattern=r"^[^\x00\n]+$")] | None = Field(
        None,
        description="Hydra --config-path: a directory of the trainer's own configs (relative "
        "to the entry point's module, or absolute in the container); unset: verl's own",
    )
    config_dir: Annotated[str, StringConstraints(pattern=r"^[^\x00\n]+$")] | None = Field(
        None,
        description="Hydra --config-dir: a directory of configs added to the search path "
        "(absolute in the container), where --config-name may be found",
    )
    config_name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.@/-]+$")] | None = Field(
        None,
        description="Hydra --config-name, e.g. ppo_megatron_trainer; unset: the entry "
        "point's default config",
    )
    overrides: dict[HydraKey, OverrideValue] = Field(
        default_factory=dict,
        description="Hydra overrides, values as Hydra's grammar types them (numbers, lists, "
        "dicts); trainer.nnodes and trainer.n_gpus_per_node default to the slurm section "
        "(set them lower when another resource pool, e.g. a reward model's, takes the rest)",
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict,
        description="Ray runtime_env (working_dir, env_vars, py_executable, ...): when set, "
        "the trainer is submitted with ray job submit --runtime-env-json, as verl's docs "
        "submit it; unset: it runs directly in the head container",
    )


class OpenRLHFWorkload(Section):
    framework: Literal["openrlhf"]
    entrypoint: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")] = Field(
        "openrlhf.cli.train_ppo_ray", description="module run with python -m"
    )
    args: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")], OverrideValue] = (
        Field(
            default_factory=dict,
            description="arguments as name: value (true adds a bare flag, false omits it)",
        )
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict, description="Ray runtime_env for ray job submit"
    )


class CommandWorkload(Section):
    framework: Literal["command"]
    command: str | list[str] = Field(
        description="run in the head container once the cluster is ready; a string runs "
        "under bash -c inside the container, a list is the argv"
    )


Workload = Annotated[
    VerlWorkload | OpenRLHFWorkload | CommandWorkload, Field(discriminator="framework")
]


def _grep_pattern(value: str) -> str:
    """An extended regular expression as grep -E reads it: grep itself judges it."""
    import subprocess

    try:
        proc = subprocess.run(
            ["grep", "-E", "-e", value, "/dev/null"], capture_output=True, text=True, timeout=10
        )
    except OSError:
        return value  # no grep here: the job's own grep judges it on the batch host
    if proc.returncode == 2:
        raise ValueError(f"grep -E refuses it: {proc.stderr.strip().removeprefix('grep: ')}")
    return value


class WatchSpec(Section):
    """The workload's progress: a job that stops making progress without dying."""

    @model_validator(mode="before")
    @classmethod
    def _no_gpu_busy(cls, data: Any) -> Any:
        if isinstance(data, dict) and "gpu_busy_percent" in data:
            raise ValueError(
                "watch.gpu_busy_percent was removed: a rank blocked in a collective keeps its "
                "GPU ~100% busy (NVIDIA/nccl#257, #1289), so GPU use cannot tell progress from "
                "a hang; stall/ captures every node's GPU use as evidence instead"
            )
        return data

    stall_seconds: int | None = Field(
        None,
        ge=5,
        le=604800,
        description="seconds without progress after which the job counts as stalled: evidence "
        "is captured in the log directory's stall/ (ray status, non-alive actors, py-spy dumps "
        "of every Ray worker and the workload on every node, Ray log tails, dmesg); unset: off",
    )
    first_progress_seconds: int | None = Field(
        None,
        ge=5,
        le=604800,
        description="seconds from the workload's start to its first progress line (start-up: "
        "loading models, starting inference engines, often much longer than a step); unset: "
        "stall_seconds",
    )
    progress_pattern: Annotated[str, AfterValidator(_grep_pattern)] | None = Field(
        None,
        description="extended regex (grep -E) a progress line of the workload log matches, e.g. "
        "'step:[0-9]+' for verl's console logger; default: any new output",
    )
    action: Literal["fail", "report"] = Field(
        "fail", description="on a stall: fail the job naming it, or report and keep watching"
    )

    @model_validator(mode="after")
    def _first_progress_needs_the_watch(self) -> WatchSpec:
        if self.first_progress_seconds is not None and self.stall_seconds is None:
            raise ValueError(
                "watch.first_progress_seconds needs watch.stall_seconds (the watch is off "
                "without it)"
            )
        return self


class ResumeSpec(Section):
    """Checkpoints and resume, set once: written as the framework's own options (verl
    trainer.default_local_dir / save_freq / resume_mode, OpenRLHF --ckpt.path /
    --ckpt.save_steps / --ckpt.load_enable or the flat names before 0.10.2)."""

    checkpoint_dir: AbsPath | None = Field(
        None,
        description="where checkpoints go, as the container sees it: on storage every node "
        "shares (a container.mounts target); unset: no resume settings",
    )
    save_every: int | None = Field(
        None, ge=1, le=10_000_000, description="save a checkpoint every this many steps"
    )
    from_latest: bool = Field(
        True, description="a run starts from the newest checkpoint in checkpoint_dir"
    )


class SidecarSpec(Section):
    """A process beside the trainer, outside Ray: a generative reward server, an LLM judge."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")] = Field(
        description="names its log (sidecar-NAME.log) and its FAIL lines"
    )
    command: str | list[str] = Field(
        description="run in the head container before the workload: a string under bash -c, "
        "a list as the argv"
    )
    ready_port: Port | None = Field(
        None,
        description="the workload starts once something listens on this port of the head "
        "node; unset: once the process runs",
    )
    ready_deadline: int = Field(
        600, ge=5, le=7200, description="seconds for the sidecar to be ready (model loading)"
    )


class LogsSpec(Section):
    dir: Annotated[str, StringConstraints(pattern=r"^[^\x00\n]+$")] = Field(
        "clusterctl-logs", description="log root (relative to the submit directory)"
    )
    copy_node_logs: Literal["always", "on-failure", "never"] = Field(
        "on-failure", description="copy each node's Ray and container logs back"
    )


class LintSpec(Section):
    allow: list[str] = Field(
        default_factory=list, description="ids of lint rules allowed to fail for this spec"
    )


class JobSpec(Section):
    """A multi-node RL post-training job."""

    profile: ProfileName | None = Field(
        None,
        description="cluster profile (clusterctl-profiles.yaml) whose site settings fill what "
        "this spec leaves unset",
    )
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    hardware: HardwareSpec = Field(default_factory=HardwareSpec)
    versions: VersionsSpec = Field(default_factory=VersionsSpec)
    container: ContainerSpec
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    ray: RaySpec = Field(default_factory=RaySpec)
    selftest: SelftestSpec = Field(default_factory=SelftestSpec)
    watch: WatchSpec = Field(default_factory=WatchSpec)
    resume: ResumeSpec = Field(default_factory=ResumeSpec)
    workload: Workload
    sidecars: list[SidecarSpec] = Field(
        default_factory=list,
        description="processes beside the trainer, outside Ray (a reward server, an LLM "
        "judge), started in the head container and ready before the workload starts",
    )
    logs: LogsSpec = Field(default_factory=LogsSpec)
    lint: LintSpec = Field(default_factory=LintSpec)

    @model_validator(mode="after")
    def resolve_defaults(self) -> JobSpec:
        """Fill defaults that come from other sections; explicit values are kept."""
        preset = PRESETS[self.hardware.preset]
        logical = self.hardware.logical_gpus
        if self.slurm.gpus_per_node is None:
            self.slurm.gpus_per_node = logical or preset.gpus_per_node
        if self.slurm.gpu_request is None:
            self.slurm.gpu_request = "none" if logical else "gpus-per-node"
        if self.ray.num_gpus is None:
            self.ray.num_gpus = self.slurm.gpus_per_node
        if self.ray.num_cpus is None and self.slurm.cpus_per_task is not None:
            self.ray.num_cpus = self.slurm.cpus_per_task
        if self.network.fabric is None:
            self.network.fabric = preset.default_fabric
        if self.selftest.backend is None:
            self.selftest.backend = "nccl" if self.ray.num_gpus else "gloo"
        c = self.container
        if c.shm_size is None:
            c.shm_size = preset.shm_size
        if c.devices is None and logical:
            c.devices = []  # logical GPUs have no device nodes; nor has the dev cluster a HCA
        elif c.devices is None:
            devices = list(preset.devices)
            if self.network.fabric in ("ib", "roce"):
                devices.append(INFINIBAND_DEVICE)
            c.devices = devices
        if c.group_add is None:
            c.group_add = list(preset.group_add)
        if c.build is not None and c.build.dockerfile is None:
            c.build.dockerfile = preset.dockerfile
        self._fill_resume_options()
        return self

    def _fill_resume_options(self) -> None:
        """resume: as the framework's own options, where the workload does not set them
        (a different value there is reported by check_consistency)."""
        from clusterctl.spec.resume import resume_options

        wl = self.workload
        if isinstance(wl, VerlWorkload):
            for key, value in resume_options(self).items():
                if not any(k in wl.overrides for k in (key, f"+{key}", f"++{key}")):
                    wl.overrides[key] = value
        elif isinstance(wl, OpenRLHFWorkload):
            for key, value in resume_options(self).items():
                if key not in wl.args and f"--{key}" not in wl.args:
                    wl.args[key] = value


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of the spec, for editors (yaml-language-server) and docs."""
    schema = JobSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "clusterctl job spec"
    return schema
