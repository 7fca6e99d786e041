"""The rules. Each one cites where the failure was seen (seeds, issue trackers, source)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.version import Version

from clusterctl.lint.registry import FieldPath, rule
from clusterctl.lint.workload import (
    OPENRLHF_FLAGS,
    as_float,
    as_int,
    openrlhf,
    openrlhf_gpu_budget,
    openrlhf_weight_sync,
    role_shape,
    truthy,
    verl,
    vllm_shape,
)
from clusterctl.spec.images import base_image, image_versions, same_release
from clusterctl.spec.models import JobSpec, OpenRLHFWorkload, VerlWorkload
from clusterctl.spec.presets import PRESETS, RAY_HIP_SWITCH, parse_version
from clusterctl.spec.resume import OPENRLHF_DOTTED_SINCE
from clusterctl.spec.secrets import literal_secrets

Findings = Iterator[tuple[FieldPath, str]]
VERL_TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"
VERL_MEM = "actor_rollout_ref.rollout.gpu_memory_utilization"
# The budget is that of PPO's placement (train_ppo_ray.py); serve_rm, train_sft ... place
# nothing through Ray.
OPENRLHF_PPO = "openrlhf.cli.train_ppo_ray"


def _vendor(spec: JobSpec) -> str:
    return PRESETS[spec.hardware.preset].vendor


def _env(spec: JobSpec) -> dict[str, tuple[FieldPath, str]]:
    """Every literal variable the containers get, with where it was set."""
    out: dict[str, tuple[FieldPath, str]] = {}
    for name, value in spec.network.nccl_env.items():
        out[name] = (("network", "nccl_env", name), str(value))
    for name, value in spec.container.env.items():
        out[name] = (("container", "env", name), str(value))
    return out


def _allocated_gpus(spec: JobSpec) -> int:
    return spec.slurm.nodes * (spec.slurm.gpus_per_node or 0)


# What a built image keeps of its base: the system's ROCm/CUDA and Python (its pip set may
# replace the base's vLLM or verl, so the base tag's word on those is not the image's).
BASE_KEEPS = ("rocm", "cuda", "python")


def _stated(spec: JobSpec) -> dict[str, tuple[str, FieldPath]]:
    """Versions the image's tag states, else (for what a build keeps) its base image's tag."""
    image: FieldPath = ("container", "image")
    out: dict[str, tuple[str, FieldPath]] = {
        k: (v, image) for k, v in image_versions(spec.container.image).items()
    }
    build = spec.container.build
    if build is not None:
        for field, version in image_versions(base_image(build)).items():
            if field in BASE_KEEPS:
                out.setdefault(field, (version, ("container", "build", "base_image")))
    return out


def _version(spec: JobSpec, field: str) -> tuple[str | None, FieldPath]:
    """A version as the spec declares it, else as the image's (or its base's) tag states it,
    and where: every rule reads a version through here."""
    declared = getattr(spec.versions, field)
    if declared:
        return declared, ("versions", field)
    return _stated(spec).get(field) or (None, ("container", "image"))


def _ray(spec: JobSpec) -> Version:
    return parse_version(spec.versions.ray) or Version("0")


# ---- GPU arithmetic -------------------------------------------------------------------------


@rule(
    "openrlhf-gpu-budget",
    "error",
    "OpenRLHF places more GPUs than the allocation has",
    "lower the role sizes or vLLM engines x tensor parallel, or raise slurm.nodes",
    "openrlhf/cli/train_ppo_ray.py; research/launch-anchors.md 'How many GPUs a config needs'",
)
def _openrlhf_budget(spec: JobSpec) -> Findings:
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload) and wl.entrypoint == OPENRLHF_PPO:
        need, parts = openrlhf_gpu_budget(wl)
        have = _allocated_gpus(spec)
        if need > have:
            yield (
                ("workload", "args"),
                (
                    f"needs {need} GPUs ({' + '.join(parts)}) but the job has {have} "
                    f"({spec.slurm.nodes} nodes x {spec.slurm.gpus_per_node}); placement groups "
                    "would stay pending forever"
                ),
            )


@rule(
    "openrlhf-gpus-idle",
    "warning",
    "OpenRLHF uses fewer GPUs than the allocation has",
    "grow the roles or vLLM engines, or ask SLURM for fewer nodes",
    "openrlhf/cli/train_ppo_ray.py",
)
def _openrlhf_idle(spec: JobSpec) -> Findings:
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload) and wl.entrypoint == OPENRLHF_PPO:
        need, parts = openrlhf_gpu_budget(wl)
        have = _allocated_gpus(spec)
        if 0 < need < have:
            yield (
                ("workload", "args"),
                (f"places {need} GPUs ({' + '.join(parts)}); {have - need} of {have} stay idle"),
            )


@rule(
    "openrlhf-colocation",
    "error",
    "colocated OpenRLHF roles must have equal sizes",
    "make the colocated roles' nodes x GPUs equal (OpenRLHF asserts it at start-up)",
    "openrlhf/cli/train_ppo_ray.py assertions; research/launch-anchors.md",
)
def _openrlhf_colocation(spec: JobSpec) -> Findings:
    wl = spec.workload
    if not isinstance(wl, OpenRLHFWorkload):
        return
    pairs = [("colocate_actor_ref", "actor", "ref"), ("colocate_critic_reward", "critic", "reward")]
    for flag, a, b in pairs:
        setting = openrlhf(wl, flag)
        if truthy(setting.value):
            size_a, size_b = role_shape(wl, a), role_shape(wl, b)
            if size_a != size_b:
                yield (
                    setting.path("args"),
                    (
                        f"{setting.key} needs {a} and {b} the same size: {a} {size_a[0]}x"
                        f"{size_a[1]}, {b} {size_b[0]}x{size_b[1]}"
                    ),
                )
    colocate_all = openrlhf(wl, "colocate_all")
    if truthy(colocate_all.value) and not truthy(openrlhf(wl, "async_train").value):
        nodes, gpus = role_shape(wl, "actor")
        actor = nodes * gpus
        engines, tp = vllm_shape(wl)
        vllm = engines * tp
        if engines and actor != vllm:
            yield (
                colocate_all.path("args"),
                (
                    f"{colocate_all.key} needs actor GPUs ({actor}) = vLLM engines x tensor "
                    f"parallel ({vllm})"
                ),
            )


@rule(
    "openrlhf-prompt-data",
    "error",
    "OpenRLHF PPO without a prompt dataset",
    "set data.prompt_dataset (flat before 0.10.2: prompt_data) to a dataset path or HF name",
    "openrlhf/trainer/ppo_trainer.py prepare_datasets: blending_datasets(args.data."
    "prompt_dataset, ...) splits it at start-up (0.9.10: args.prompt_data); the default is None",
)
def _openrlhf_prompts(spec: JobSpec) -> Findings:
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload) and wl.entrypoint == "openrlhf.cli.train_ppo_ray":
        setting = openrlhf(wl, "prompt_data")
        if not setting.value or setting.value is True:
            yield setting.path("args"), "no prompt dataset: OpenRLHF fails preparing its data"


@rule(
    "trainer-needs-gpus",
    "error",
    "verl and OpenRLHF train on GPUs; the spec gives them none",
    "choose a GPU hardware.preset (or slurm.gpus_per_node > 0)",
    "verl resource pool [n_gpus_per_node] * nnodes; OpenRLHF {'GPU': 1} bundles",
)
def _trainer_gpus(spec: JobSpec) -> Findings:
    wl = spec.workload
    if isinstance(wl, (VerlWorkload, OpenRLHFWorkload)) and not spec.slurm.gpus_per_node:
        yield (
            ("slurm", "gpus_per_node"),
            (f"{wl.framework} with 0 GPUs per node cannot place its workers"),
        )


@rule(
    "rollout-tp-divides-node",
    "error",
    "rollout tensor parallel size must divide the GPUs per node",
    "pick a tensor parallel size that divides slurm.gpus_per_node",
    "verl #4373, OpenRLHF #758 and #865: TP groups that straddle nodes hang",
)
def _tp_divides(spec: JobSpec) -> Findings:
    gpus = spec.slurm.gpus_per_node or 0
    for tp, path, label in _rollout_tp(spec):
        if gpus and tp <= gpus and gpus % tp:
            yield path, f"{label}={tp} does not divide {gpus} GPUs per node"


@rule(
    "rollout-tp-spans-nodes",
    "warning",
    "rollout tensor parallel group larger than a node",
    "make sure the rollout engine's cross-node start works on this cluster (the self-test "
    "places it), or keep tensor parallel within a node",
    "verl #4373 (DistStoreError with TP=16 across nodes), OpenRLHF #758; verl runs one "
    "replica across nodes in its own examples (tuning/70b: vLLM TP 16 on 32 H800, verl "
    "@b178a3c), so it is a hazard to check, not a refusal",
)
def _tp_spans(spec: JobSpec) -> Findings:
    gpus = spec.slurm.gpus_per_node or 0
    for tp, path, label in _rollout_tp(spec):
        if gpus and tp > gpus:
            yield path, f"{label}={tp} spans nodes ({gpus} GPUs per node)"


def _rollout_tp(spec: JobSpec) -> Iterator[tuple[int, FieldPath, str]]:
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        setting = verl(wl, VERL_TP)
        if setting.key:
            yield as_int(setting.value, 1), setting.path("overrides"), "rollout TP"
    elif isinstance(wl, OpenRLHFWorkload):
        setting = openrlhf(wl, "vllm_tp")
        if setting.key:
            yield as_int(setting.value, 1), setting.path("args"), "vLLM TP"


@rule(
    "verl-cpus-per-gpu",
    "error",
    "Ray offers fewer than 3 CPUs per GPU, which verl's placement bundles need",
    "raise ray.num_cpus / slurm.cpus_per_task to at least 3 x GPUs per node",
    "verl #2596, #1182, PR #6663 (pending STRICT_PACK placement groups)",
)
def _verl_cpus(spec: JobSpec) -> Findings:
    gpus = spec.ray.num_gpus or 0
    cpus = spec.ray.num_cpus
    if isinstance(spec.workload, VerlWorkload) and gpus and cpus is not None and cpus < 3 * gpus:
        yield ("ray", "num_cpus"), f"{cpus} CPUs for {gpus} GPUs per node (needs {3 * gpus})"


@rule(
    "openrlhf-flag-generation",
    "error",
    "OpenRLHF flags spelled for the other generation of its parser",
    "OpenRLHF >= 0.10.2 takes dotted flags (--actor.num_nodes); older ones take flat flags "
    "(--actor_num_nodes): write the spelling of versions.openrlhf",
    "OpenRLHF 0.10.2 argument parser rename (commit ed62d0e2)",
)
def _openrlhf_generation(spec: JobSpec) -> Findings:
    wl = spec.workload
    version = parse_version(spec.versions.openrlhf)
    if not isinstance(wl, OpenRLHFWorkload) or version is None:
        return
    dotted_era = version >= OPENRLHF_DOTTED_SINCE
    for flat, dotted in OPENRLHF_FLAGS.values():
        if flat == dotted:
            continue
        wrong, right = (flat, dotted) if dotted_era else (dotted, flat)
        for written in (wrong, f"--{wrong}"):
            if written in wl.args:
                yield (
                    ("workload", "args", written),
                    (
                        f"{wrong} is not an argument of OpenRLHF {spec.versions.openrlhf}; "
                        f"it is spelled {right}"
                    ),
                )


# ---- GPU visibility on AMD ------------------------------------------------------------------


@rule(
    "amd-visibility-conflict",
    "error",
    "ROCR_VISIBLE_DEVICES set together with HIP/CUDA_VISIBLE_DEVICES",
    "set none of them and let Ray assign GPUs (clusterctl sets the NOSET switch)",
    "verl worker.py ('Please don't set ROCR_VISIBLE_DEVICES...'), verl #1399, ray#53737",
)
def _amd_visibility(spec: JobSpec) -> Findings:
    env = _env(spec)
    present = [name for name in PRESETS[spec.hardware.preset].visibility_vars if name in env]
    if _vendor(spec) == "amd" and len(present) > 1:
        path = env[present[-1]][0]
        yield path, f"{' and '.join(present)} set together (seed guide: HIP_ERROR_INVALID_VALUE)"


@rule(
    "ray-noset-visibility",
    "error",
    "the RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES switch does not match the Ray version",
    "remove it from the spec: clusterctl sets the right one for versions.ray before ray start",
    "verl #1471/#1575, PR #1465: Ray 2.45 moved AMD masking from ROCR to HIP",
)
def _noset(spec: JobSpec) -> Findings:
    env = _env(spec)
    hip_era = _ray(spec) >= RAY_HIP_SWITCH
    for name, (path, value) in env.items():
        if not name.startswith("RAY_EXPERIMENTAL_NOSET_"):
            continue
        if value != "1":
            yield path, f"{name}={value!r}: Ray only reads the value 1"
        elif _vendor(spec) == "amd" and hip_era and "ROCR" in name:
            yield path, f"{name} is ignored by Ray {spec.versions.ray}; it reads the HIP switch"
        elif _vendor(spec) == "amd" and not hip_era and "HIP" in name:
            yield path, f"{name} needs Ray >= 2.45; Ray {spec.versions.ray} reads the ROCR switch"


# ---- versions -------------------------------------------------------------------------------


@rule(
    "ray-2.12-rocm",
    "error",
    "Ray 2.12.0 fails on ROCm with 'tuple index out of range'",
    "use Ray >= 2.45 (or 2.9.3)",
    "seeds: OpenRLHF on MI300X; OpenRLHF #667",
)
def _ray_212(spec: JobSpec) -> Findings:
    if _vendor(spec) == "amd" and _ray(spec).release[:2] == (2, 12):
        yield ("versions", "ray"), f"Ray {spec.versions.ray} on {spec.hardware.preset}"


@rule(
    "ray-unauthenticated",
    "warning",
    "Ray before 2.52 has no token authentication: the job's head is open to the cluster network",
    "use Ray >= 2.52 (job.sbatch turns its token authentication on for every job), or keep "
    "the head's ports closed to everyone but the job's nodes",
    "docs.ray.io ray-security/token-auth.html (token auth from Ray 2.52.0); the Ray 2.52 "
    "advisory: unauthenticated dashboard and Jobs API run arbitrary code",
)
def _ray_unauthenticated(spec: JobSpec) -> Findings:
    version, path = _version(spec, "ray")
    parsed = parse_version(version)
    if parsed is not None and parsed < Version("2.52"):
        yield (
            path,
            f"Ray {version}: anyone who reaches the head's GCS, dashboard or Jobs API runs "
            "code there",
        )


@rule(
    "verl-min-ray",
    "error",
    "verl needs ray[default] >= 2.41",
    "set versions.ray to 2.41 or newer (and use it in the image)",
    "verl setup.py: ray[default]>=2.41.0; seeds: below 2.40 `ray job submit` fails",
)
def _verl_ray(spec: JobSpec) -> Findings:
    if isinstance(spec.workload, VerlWorkload) and _ray(spec) < Version("2.41"):
        yield ("versions", "ray"), f"Ray {spec.versions.ray} is older than verl supports"


@rule(
    "vllm-weight-sync-bug",
    "error",
    "vLLM 0.4.3 breaks OpenRLHF's weight sync",
    "use vLLM 0.4.2 or a current release",
    "seeds: OpenRLHF NCCL weight sync on 2 x H800",
)
def _vllm_sync(spec: JobSpec) -> Findings:
    vllm, path = _version(spec, "vllm")
    version = parse_version(vllm)
    if version is None or version.release[:3] != (0, 4, 3):
        return
    wl = spec.workload
    if isinstance(wl, OpenRLHFWorkload) and openrlhf_weight_sync(wl) in ("cuda-ipc", "none"):
        return  # no trainer -> engine group: the bug's path is not taken
    yield path, "vLLM 0.4.3 has the known weight-sync bug"


@rule(
    "image-versions",
    "error",
    "versions: contradicts what the image's tag states",
    "make versions: say what the image holds, or name the image that holds those versions",
    "image tag grammars of rocm/verl, rocm/vllm and verlai/verl (clusterctl/spec/images.py)",
)
def _image_versions(spec: JobSpec) -> Findings:
    for field, (version, where) in _stated(spec).items():
        declared = getattr(spec.versions, field)
        if declared and not same_release(declared, version):
            image = spec.container.image if where == ("container", "image") else "its base image"
            yield (("versions", field), f"{field} {declared}, but {image} says {version}")


@rule(
    "rocm-min-mi300",
    "error",
    "the preset's GPUs need a newer ROCm: MI300X 6.2, MI325X 6.3.1, MI355X 7.0",
    "use an image built on the ROCm the preset needs",
    "seeds: verl on AMD guide (MI300X: NCCL failures, HIP kernel launch timeouts below 6.2); "
    "ROCm 6.3.1 release notes (MI325X); vLLM's ROCm install docs (MI350 requires ROCm 7.0)",
)
def _rocm_min(spec: JobSpec) -> Findings:
    preset = PRESETS[spec.hardware.preset]
    text, path = _version(spec, "rocm")
    rocm = parse_version(text)
    if preset.min_rocm and rocm and rocm < preset.min_rocm:
        yield path, f"ROCm {text} on {preset.name}, which needs ROCm >= {preset.min_rocm}"


@rule(
    "amd-needs-rocm-image",
    "warning",
    "an AMD preset with a CUDA or CPU image build",
    "use container.build.dockerfile: rocm (or the preset's default)",
    "the preset decides the Dockerfile flavour",
)
def _amd_image(spec: JobSpec) -> Findings:
    build = spec.container.build
    vendor = _vendor(spec)
    expected = {"amd": "rocm", "nvidia": "cuda"}.get(vendor)
    if build is not None and expected and build.dockerfile != expected:
        yield (
            ("container", "build", "dockerfile"),
            (f"{build.dockerfile} image for a {spec.hardware.preset} node"),
        )


# ---- numerics and compilation on ROCm -------------------------------------------------------


@rule(
    "fp16-on-mi300",
    "warning",
    "fp16 is unstable on MI300; prefer bf16",
    "use bf16 (dtype: bfloat16)",
    "seeds: verl on AMD guide, 'FP16 on MI300 is unstable, use BF16'",
)
def _fp16(spec: JobSpec) -> Findings:
    if _vendor(spec) != "amd":
        return
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        for key, value in wl.overrides.items():
            if key.endswith("dtype") and str(value).lower() in ("fp16", "float16", "half"):
                yield ("workload", "overrides", key), f"{key}={value}"
    elif isinstance(wl, OpenRLHFWorkload):
        flag, dtype = openrlhf(wl, "fp16"), openrlhf(wl, "param_dtype")
        if truthy(flag.value):
            yield flag.path("args"), f"--{flag.key} on {spec.hardware.preset}"
        if str(dtype.value).lower() in ("fp16", "float16"):
            yield dtype.path("args"), f"--{dtype.key}={dtype.value} on {spec.hardware.preset}"


@rule(
    "torch-compile-rocm62",
    "warning",
    "torch.compile max-autotune crashes kernels on ROCm 6.2",
    "drop max-autotune (TORCHINDUCTOR_MAX_AUTOTUNE=0) on ROCm 6.2",
    "seeds: verl on AMD guide",
)
def _compile(spec: JobSpec) -> Findings:
    rocm, _ = _version(spec, "rocm")
    version = parse_version(rocm)
    if _vendor(spec) != "amd" or version is None or version.release[:2] != (6, 2):
        return
    for name, (path, text) in _env(spec).items():
        if name.startswith("TORCHINDUCTOR_MAX_AUTOTUNE") and text not in ("0", "false"):
            yield path, f"{name}={text} on ROCm {rocm}"
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        for key, value in wl.overrides.items():
            if "max-autotune" in str(value):
                yield ("workload", "overrides", key), f"{key}={value} on ROCm {rocm}"


# ---- weight sync and communication ----------------------------------------------------------


@rule(
    "rocm-weight-sync",
    "error",
    "OpenRLHF's weight sync runs over RCCL on ROCm without P2P/SHM disabled",
    "set vllm.sync_with_ray: true with vllm.sync_backend: gloo (flat: vllm_sync_with_ray, "
    "vllm_sync_backend) to sync over a Ray gloo group (Ray 2.48's gloo needs pygloo in the "
    "image, 2.55's runs on torch.distributed; the self-test checks it), or set network.nccl_env "
    "NCCL_P2P_LEVEL=LOC and NCCL_SHM_DISABLE=1; sync_backend gloo alone still syncs over "
    "NCCL in OpenRLHF 0.9.10-0.11.2",
    "seeds: OpenRLHF on ROCm (RCCL path selection), OpenRLHF #667; the sync path read from "
    "openrlhf/trainer/ray/ppo_actor.py 0.9.10, 0.10.2, 0.11.2",
)
def _rocm_sync(spec: JobSpec) -> Findings:
    wl = spec.workload
    if _vendor(spec) != "amd" or not isinstance(wl, OpenRLHFWorkload):
        return
    path = openrlhf_weight_sync(wl)
    if path not in ("pynccl", "ray-nccl"):
        return
    env = _env(spec)
    safe = (
        env.get("NCCL_P2P_LEVEL", ((), ""))[1] == "LOC"
        and env.get("NCCL_SHM_DISABLE", ((), ""))[1] == "1"
    )
    if not safe:
        backend = openrlhf(wl, "sync_backend")
        how = (
            "a Ray collective group on nccl"
            if path == "ray-nccl"
            else f"vLLM's PyNccl group (sync_backend {backend.value} only picks CUDA IPC vs "
            "broadcast)"
        )
        yield (
            backend.path("args"),
            f"weights go over {how} on ROCm without NCCL_P2P_LEVEL=LOC and NCCL_SHM_DISABLE=1",
        )


@rule(
    "gpu-memory-utilization",
    "warning",
    "vLLM gpu_memory_utilization outside the safe range 0.3-0.92",
    "0.85-0.92 on MI300X when vLLM has the GPU to itself; ~0.5 when colocated with training",
    "seeds (verl on AMD: 0.85-0.92); verl #302, #2245; OpenRLHF default 0.95 OOMs colocated",
)
def _gpu_mem(spec: JobSpec) -> Findings:
    wl = spec.workload
    if isinstance(wl, VerlWorkload):
        setting, section = verl(wl, VERL_MEM), "overrides"
    elif isinstance(wl, OpenRLHFWorkload):
        setting, section = openrlhf(wl, "vllm_mem"), "args"
        pinned = parse_version(spec.versions.openrlhf)
        # the flag and its default (0.9, then 0.95) exist since OpenRLHF 0.5.8 (commit c10f02bd,
        # train_ppo_ray.py); an older release has no such setting to judge
        if setting.key is None and (
            vllm_shape(wl)[0] == 0 or (pinned and pinned < Version("0.5.8"))
        ):
            return
    else:
        return
    value = as_float(setting.value)
    if value is not None and not 0.3 <= value <= 0.92:
        written = setting.key or "vllm_gpu_memory_utilization (default)"
        yield setting.path(section), f"{written}={value:g}"


@rule(
    "nccl-socket-ifname",
    "warning",
    "no socket interface for NCCL/gloo bootstrap on a multi-node job",
    "set network.socket_ifname to the interface the nodes reach each other on",
    "verl #108/#3818/#726 (connect to 169.254.x), OpenRLHF #492/#1040",
)
def _ifname(spec: JobSpec) -> Findings:
    if spec.slurm.nodes > 1 and not spec.network.socket_ifname:
        yield ("network", "socket_ifname"), "NCCL may bootstrap over docker0 or a link-local NIC"


@rule(
    "ib-hca-names",
    "warning",
    "HCA names that do not look like RDMA devices",
    "list RDMA devices as ibv_devices / ibdev2netdev show them (mlx5_0, bnxt_re0, ...)",
    "seeds: verl on AMD guide ('mlx5_*, not rdma0/rdma1'); verl #1516 (bnxt)",
)
def _hca_names(spec: JobSpec) -> Findings:
    # NCCL_IB_HCA names devices by prefix unless '=' asks for exact names: `mlx5` selects
    # every mlx5_N (NCCL docs, env.html#nccl-ib-hca, NCCL 2.x)
    pattern = re.compile(
        r"^\^?=?(mlx[45](_\d+)?|mlx5_bond(_\d+)?|bnxt_re\d*|irdma\d*|ionic(_\d+)?|"
        r"qedr\d*|efa(_\d+)?|hfi1(_\d+)?|rocep\w*|ibp\w*)(:\d+)?$"
    )
    for i, hca in enumerate(spec.network.hcas):
        if not pattern.match(hca):
            yield ("network", "hcas", i), f"{hca!r} is not an RDMA device name"


@rule(
    "roce-gid-index",
    "warning",
    "RoCE without a GID index",
    "set network.gid_index (3 for RoCEv2 on most clusters; check show_gids)",
    "seeds: verl on AMD guide (NCCL_IB_GID_INDEX=3); verl #1516",
)
def _gid(spec: JobSpec) -> Findings:
    if spec.network.fabric == "roce" and spec.network.gid_index is None:
        yield ("network", "gid_index"), "RoCE needs NCCL_IB_GID_INDEX"


# Fastest bring-up measured on the dev cluster (docs/benchmarks.md: 13.6-22.7 s from job start
# to the workload at 2-4 nodes): a time limit must leave at least this after the grace period.
MIN_BRING_UP_SECONDS = 60


def slurm_seconds(text: str) -> int | None:
    """sbatch --time in seconds (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]); None when unlimited."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes, secs = [*parts, 0, 0][:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + secs
    if len(parts) == 3:
        return (parts[0] * 60 + parts[1]) * 60 + parts[2]
    return parts[0] * 60 + (parts[1] if len(parts) == 2 else 0)


@rule(
    "time-limit-too-short",
    "error",
    "the time limit leaves no room for bring-up before the grace signal",
    "raise slurm.time, or lower slurm.signal_grace",
    "sbatch --signal=B:USR1@signal_grace fires signal_grace seconds before the limit "
    "(slurm 22.05 sbatch(1)); issue 9: time 00:02:00 with grace 120 never ran its workload",
)
def _time_limit(spec: JobSpec) -> Findings:
    limit = slurm_seconds(spec.slurm.time)
    grace = spec.slurm.signal_grace
    if limit is not None and limit - grace < MIN_BRING_UP_SECONDS:
        yield (
            ("slurm", "time"),
            f"{spec.slurm.time} is {limit}s; the grace signal comes at {max(limit - grace, 0)}s, "
            f"before the {MIN_BRING_UP_SECONDS}s a bring-up needs at the least",
        )


@rule(
    "nccl-debug-trace",
    "warning",
    "NCCL_DEBUG=TRACE floods the logs of every rank",
    "use NCCL_DEBUG=INFO (or WARN) unless you are debugging NCCL itself",
    "verl AMD docs script (NCCL_DEBUG=TRACE); research/launch-anchors.md weaknesses",
)
def _nccl_trace(spec: JobSpec) -> Findings:
    for name, (path, value) in _env(spec).items():
        if name == "NCCL_DEBUG" and value.upper() == "TRACE":
            yield path, "NCCL_DEBUG=TRACE"


# ---- Ray placement --------------------------------------------------------------------------


@rule(
    "ray-temp-dir-shared",
    "error",
    "Ray's temp dir is on a shared file system",
    "keep ray.temp_dir node-local (the default /tmp/ray)",
    "verl #158, ray#54067 (raylet socket errors)",
)
def _temp_dir(spec: JobSpec) -> Findings:
    temp = spec.ray.temp_dir.rstrip("/") + "/"
    for mount in spec.container.mounts:
        target = mount.target.rstrip("/") + "/"
        if temp.startswith(target):
            yield ("ray", "temp_dir"), f"{spec.ray.temp_dir} lies in the mount of {mount.source}"


@rule(
    "loopback-head",
    "error",
    "node addresses on loopback: other nodes cannot reach the Ray head",
    "use a real interface in network.socket_ifname; allow this rule only on a one-host "
    "dev cluster where every SLURM node is the same machine",
    "OpenRLHF #339/#1236 (0.0.0.0 / loopback head address)",
)
def _loopback(spec: JobSpec) -> Findings:
    net = spec.network
    if spec.slurm.nodes > 1 and (net.allow_loopback or net.socket_ifname == "lo"):
        field = "allow_loopback" if net.allow_loopback else "socket_ifname"
        yield (
            ("network", field),
            f"{spec.slurm.nodes} nodes would reach the head on a loopback address",
        )


# ---- secrets --------------------------------------------------------------------------------


@rule(
    "literal-secret",
    "error",
    "a secret written into the spec (and so into job.sbatch, the resolved spec or an argv)",
    "list its name in container.env_passthrough and export it before sbatch; this rule "
    "cannot be allowed",
    "research/launch-anchors.md (printenv leaking secrets into logs)",
    allowable=False,
)
def _secret(spec: JobSpec) -> Findings:
    yield from literal_secrets(spec)


# ---- checkpoints ----------------------------------------------------------------------------

# Host paths that are each node's own: a checkpoint there is not where the next run (on other
# nodes) looks for it.
NODE_LOCAL = re.compile(r"^/(tmp|var/tmp|dev/shm|run|local|scratch/local|mnt/local|nvme|raid)(/|$)")


@rule(
    "checkpoint-on-shared-storage",
    "error",
    "resume.checkpoint_dir must be on storage every node shares",
    "mount a shared file system (container.mounts) and put resume.checkpoint_dir inside it",
    "a continuation or requeued run starts on other nodes: checkpoints in the container's own "
    "file system are removed with it, node-local disks are not where the next run looks "
    "(verl default_local_dir / OpenRLHF ckpt path; issue 12)",
)
def _checkpoint_storage(spec: JobSpec) -> Findings:
    target = spec.resume.checkpoint_dir
    if target is None:
        return
    path = ("resume", "checkpoint_dir")
    inside = target.rstrip("/") + "/"
    mounts = [m for m in spec.container.mounts if inside.startswith(m.target.rstrip("/") + "/")]
    if not mounts:
        yield path, f"{target} is in the container's own file system: it goes with the container"
        return
    mount = max(mounts, key=lambda m: len(m.target))
    if NODE_LOCAL.match(mount.source):
        yield path, f"{target} is on {mount.source}, a node-local path of each host"
    elif mount.read_only:
        yield path, f"{target} is in a read-only mount ({mount.source})"
