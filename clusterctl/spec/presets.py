"""GPU presets: what a kind of node implies for devices, visibility and collective settings.

A preset is the single place where vendor knowledge lives, in the spirit of TorchX's
``DEVICES`` table: the spec names a preset, the renderer asks it for device nodes,
groups, docker flags and environment defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from packaging.version import InvalidVersion, Version

Vendor = Literal["amd", "nvidia", "none"]
PresetName = Literal[
    "mi300x", "mi325x", "mi355x", "mi250x", "h100", "h800", "h200", "h20", "b200", "a100", "none"
]

# Ray moved AMD GPU masking from ROCR_VISIBLE_DEVICES to HIP_VISIBLE_DEVICES in 2.45
# (ray-project/ray#53737, verl #1399/#1471): the "do not touch visibility" switch follows it.
RAY_HIP_SWITCH = Version("2.45")

# Environment every container of an AMD node gets. Each value: its upstream source and the
# versions it applies to. Not set (current upstream says to avoid them globally):
# - NCCL_CUMEM_ENABLE=0: OpenRLHF sets it itself only for vLLM < 0.16, since it "causes
#   ncclCommInitRank to fail ... under NCCL 2.27+" (OpenRLHF commit 39c78469, 2026-03-05);
#   verl sets it on rollout workers only (verl #5522, 0.9.x).
# - CUDA_DEVICE_MAX_CONNECTIONS=1: verl sets it for Megatron on Hopper/Ampere only and FSDP2
#   must not have it (verl #6976, trainer/constants_ppo.py in 0.9.1).
_AMD_COLLECTIVE_ENV = {
    # All six: the AMD multi-node script in verl's docs/start/multinode.rst (verl main,
    # checked 2026-11, for AMD's rocm/verl images on ROCm 6.2-7.x, MI300X); the first four
    # are also in the seeds' verl-on-AMD guide (ROCm 6.2). Left out of that script's list:
    # NCCL_IB_HCA and NCCL_IB_GID_INDEX (per cluster: network.hcas, network.gid_index),
    # NCCL_CROSS_NIC=0 and NCCL_PROTO=Simple (tuning for that cluster's fabric: nccl_env).
    "HSA_NO_SCRATCH_RECLAIM": "1",
    "RCCL_MSCCL_ENABLE": "0",
    "TORCH_NCCL_HIGH_PRIORITY": "1",
    "GPU_MAX_HW_QUEUES": "2",
    "NCCL_CHECKS_DISABLE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_NVIDIA_COLLECTIVE_ENV: dict[str, str] = {}

# docker run --ulimit values for GPU nodes: memlock unlimited (RDMA registers pinned memory)
# and a 64 MiB stack. AMD: verl docs/amd_tutorial/amd_quick_start.rst and AMD's ROCm docs
# 26.06/26.09 training containers; NVIDIA: the NGC PyTorch container's start-up notice
# (nvcr.io/nvidia/pytorch 23.xx-26.xx) asks for the same two.
GPU_ULIMITS = ("memlock=-1", "stack=67108864")


@dataclass(frozen=True)
class BusbwFloor:
    """A public acceptance figure: an all-reduce over the 8 GPUs of one node reaches at least
    GBPS bus bandwidth (nccl-tests' busbw) at a message of SIZE_MB."""

    gbps: float
    size_mb: int
    source: str


# Per-preset floors, each with where it comes from and what it applies to. Only single-node
# figures exist publicly for whole presets: multi-node floors depend on the NICs (the CVS and
# GCP figures in ../shared/research/health-check-anchors.md are per NIC model), so none is a
# default across nodes.
MI300X_FLOORS = (
    # AMD's Primus preflight smoke floor for MI3xx nodes, rccl_gbs_min at 64 MB
    # (ROCm/cvs README_preflight_config.md, checked 2026-11; ROCm 6.x-7.x)
    BusbwFloor(100.0, 64, "AMD Primus preflight rccl_gbs_min (ROCm/cvs, MI3xx node-local)"),
    # Azure HPC health checks, ND MI300X v5 (8x MI300X, XGMI): `check_rccl_allreduce 314 1 16G`
    # (Azure/azurehpc-health-checks conf/nd96isr_mi300x_v5.conf, main as of 2026-11)
    BusbwFloor(314.0, 16384, "Azure azurehpc-health-checks nd96isr_mi300x_v5.conf"),
)
H100_FLOORS = (
    # Azure HPC health checks, ND H100 v5 (8x H100 SXM, NVLink): `check_nccl_allreduce 460.0 1
    # 16G` (Azure/azurehpc-health-checks conf/nd96isr_h100_v5.conf, main as of 2026-11)
    BusbwFloor(460.0, 16384, "Azure azurehpc-health-checks nd96isr_h100_v5.conf"),
)
H200_FLOORS = (
    # Azure HPC health checks, ND H200 v5 (8x H200, NVLink): `check_nccl_allreduce 431.0 1 16G`
    # (Azure/azurehpc-health-checks@0e0a1ac conf/nd96isr_h200_v5.conf line 53, last changed
    # 2025-08-20; nd96is_h200_v5 and nd96isrf_h200_v5 say 432.0)
    BusbwFloor(431.0, 16384, "Azure azurehpc-health-checks nd96isr_h200_v5.conf"),
)
B200_FLOORS = (
    # OCI's node health check, BM.GPU.B200.8: `"threshold": 440` on the average bus bandwidth
    # of `all_reduce_perf -b 1G -e 16G` over 8 GPUs (oracle-quickstart/oci-hpc@b5285a6
    # playbooks/roles/healthchecks/files/active_healthcheck.py, 2026-05-19): a node that passes
    # it reaches at least that at 16 GB, the largest size it averages
    BusbwFloor(440.0, 16384, "OCI oci-hpc active_healthcheck.py BM.GPU.B200.8 (1-16 GB average)"),
)
MI355X_FLOORS = (
    # OCI's node health check, BM.GPU.MI355X.8 with rccl-tests: `"threshold": 310` on the
    # average bus bandwidth of `all_reduce_perf -b 1G -e 16G -g 8` (oci-hpc@b5285a6
    # active_healthcheck.py run_local_rccl_test, 2026-05-19); the same as its MI300X figure
    BusbwFloor(310.0, 16384, "OCI oci-hpc active_healthcheck.py BM.GPU.MI355X.8 rccl-tests"),
)


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory as PyTorch sees it, and where that figure was printed."""

    gib: float
    source: str


HOPPER_80GB_MEMORY = GpuMemory(
    79.11,
    "'GPU 0 has a total capacity of 79.11 GiB' (H800 80GB, torch OOM message): "
    "https://github.com/verl-project/verl/issues/2828; another 80 GB Hopper part printed "
    "79.10 GiB: https://github.com/rllm-org/rllm/issues/93",
)
A100_MEMORY = GpuMemory(
    79.15,
    "'79.15 GiB total capacity' (A100-80GB, torch OOM message): "
    "https://github.com/huggingface/accelerate/issues/1864; the 40GB A100 needs its own",
)
H200_MEMORY = GpuMemory(
    139.80,
    "'GPU 0 has a total capacity of 139.80 GiB' (H200 node, torch OOM message): "
    "stas00/ml-engineering@744d01e debug/pytorch.md line 834; a real H200 here measured the "
    "same card (../shared/captures/nvidia-h200-2026-11-28, 143771 MiB in nvidia-smi)",
)
B200_MEMORY = GpuMemory(
    178.35,
    "'GPU 0 has a total capacity of 178.35 GiB' (B200, torch OOM message): "
    "stas00/ml-engineering@744d01e debug/pytorch.md line 636",
)
MI325X_MEMORY = GpuMemory(
    255.98,
    "'GPU 0 has a total capacity of 255.98 GiB' (8x MI325X, HIP OOM message): "
    "https://github.com/vllm-project/vllm/issues/41962",
)
# Not found in a public report: the H20's (nvidia-smi 97871 MiB; no OOM line names the GPU) and
# the MI355X's (287.98 GiB appears only in copies whose source is not named): the plan says it
# cannot judge them rather than guess.
MI300X_MEMORY = GpuMemory(
    191.45,
    "'GPU 4 has a total capacity of 191.45 GiB' (MI300X, torch HIP OOM message): "
    "https://github.com/verl-project/verl/issues/2848",
)


@dataclass(frozen=True)
class Preset:
    """Facts about one kind of GPU node."""

    name: PresetName
    vendor: Vendor
    gpus_per_node: int
    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    docker_gpu_flags: tuple[str, ...] = ()
    ulimits: tuple[str, ...] = ()
    dockerfile: Literal["rocm", "cuda", "cpu"] = "cpu"
    default_fabric: Literal["ib", "roce", "ethernet"] = "ethernet"
    shm_size: str = "2g"
    collective_env: dict[str, str] = field(default_factory=dict)
    visibility_vars: tuple[str, ...] = ()
    min_rocm: Version | None = None
    busbw_floors: tuple[BusbwFloor, ...] = ()
    # Memory of one GPU as PyTorch reports it ("total capacity" in its out-of-memory message),
    # with the report it comes from; None where no such report was found.
    gpu_memory: GpuMemory | None = None

    def ray_noset_var(self, ray_version: Version | None) -> str | None:
        """The RAY_EXPERIMENTAL_NOSET_* variable that keeps Ray from rewriting GPU visibility."""
        if self.vendor == "nvidia":
            return "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"
        if self.vendor == "amd":
            if ray_version is not None and ray_version < RAY_HIP_SWITCH:
                return "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"
            return "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"
        return None


_AMD = {
    "vendor": "amd",
    "devices": ("/dev/kfd", "/dev/dri"),
    "group_add": ("video",),
    "dockerfile": "rocm",
    "default_fabric": "ib",
    "shm_size": "128g",
    "collective_env": _AMD_COLLECTIVE_ENV,
    "ulimits": GPU_ULIMITS,
    "visibility_vars": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
}
_NVIDIA = {
    "vendor": "nvidia",
    "docker_gpu_flags": ("--gpus", "all"),
    "dockerfile": "cuda",
    "default_fabric": "ib",
    "shm_size": "64g",
    "collective_env": _NVIDIA_COLLECTIVE_ENV,
    "ulimits": GPU_ULIMITS,
    "visibility_vars": ("CUDA_VISIBLE_DEVICES",),
}

PRESETS: dict[str, Preset] = {
    "mi300x": Preset(
        name="mi300x",
        gpus_per_node=8,
        min_rocm=Version("6.2"),
        busbw_floors=MI300X_FLOORS,
        gpu_memory=MI300X_MEMORY,
        **_AMD,  # type: ignore[arg-type]
    ),
    # 8 GPUs a platform (AMD MxGPU GIM 8.5.0.K release notes: "between 8 GPUs" for MI325X,
    # MI350X and MI355X). MI325X is gfx942 like MI300X; ROCm 6.3.1 "enables support for AMD
    # Instinct MI325X" (ROCm/ROCm rocm-6.3.3 tools/autotag/templates/support/6.3.1.md). MI355X
    # is gfx950 (CDNA 4): "MI350 requires ROCm 7.0 or above" (vLLM docs, gpu.rocm.inc.md), and
    # images built for gfx950 (SGLang's -mi35x tags, rocm/vllm gfx950 or cdna tags).
    "mi325x": Preset(
        name="mi325x",
        gpus_per_node=8,
        min_rocm=Version("6.3.1"),
        gpu_memory=MI325X_MEMORY,
        **_AMD,  # type: ignore[arg-type]
    ),
    "mi355x": Preset(
        name="mi355x",
        gpus_per_node=8,
        min_rocm=Version("7.0"),
        busbw_floors=MI355X_FLOORS,
        **_AMD,  # type: ignore[arg-type]
    ),
    "mi250x": Preset(name="mi250x", gpus_per_node=8, **_AMD),  # type: ignore[arg-type]
    "h100": Preset(
        name="h100",
        gpus_per_node=8,
        busbw_floors=H100_FLOORS,
        gpu_memory=HOPPER_80GB_MEMORY,
        **_NVIDIA,  # type: ignore[arg-type]
    ),
    "h800": Preset(name="h800", gpus_per_node=8, gpu_memory=HOPPER_80GB_MEMORY, **_NVIDIA),  # type: ignore[arg-type]
    # 8 GPUs a node: NVIDIA HGX H200 and HGX H20 (Hopper, the same container runtime, NCCL and
    # visibility settings as H100), DGX B200 (Blackwell; x86_64 hosts). GB200 NVL72 is not a
    # preset: 4 GPUs a compute tray on Grace (aarch64) hosts, which needs arm64 images.
    # (MLCommons H200-SXM-141GBx8 and nebius_b200_n1 system files: accelerators_per_node 8;
    # HGX B200 needs driver 570.133.20 or later, NVIDIA/cloud-native-docs PR #184.)
    "h200": Preset(
        name="h200",
        gpus_per_node=8,
        busbw_floors=H200_FLOORS,
        gpu_memory=H200_MEMORY,
        **_NVIDIA,  # type: ignore[arg-type]
    ),
    "h20": Preset(name="h20", gpus_per_node=8, **_NVIDIA),  # type: ignore[arg-type]
    "b200": Preset(
        name="b200",
        gpus_per_node=8,
        busbw_floors=B200_FLOORS,
        gpu_memory=B200_MEMORY,
        **_NVIDIA,  # type: ignore[arg-type]
    ),
    "a100": Preset(name="a100", gpus_per_node=8, gpu_memory=A100_MEMORY, **_NVIDIA),  # type: ignore[arg-type]
    "none": Preset(name="none", vendor="none", gpus_per_node=0),
}

INFINIBAND_DEVICE = "/dev/infiniband"


def busbw_floor(
    preset: Preset, nodes: int, ranks_per_node: int, size_mb: int
) -> tuple[BusbwFloor | None, str]:
    """The preset's public floor that this self-test's all-reduce is comparable with (one node,
    every GPU a rank, a message at least the figure's size), or None and why none applies."""
    if not preset.busbw_floors:
        return None, ""
    known = "; ".join(
        f">= {f.gbps:g} GB/s at {f.size_mb} MB ({f.source})" for f in preset.busbw_floors
    )
    if nodes != 1 or ranks_per_node != preset.gpus_per_node:
        why = f"those figures are for the {preset.gpus_per_node} GPUs of one node"
    else:
        fitting = [f for f in preset.busbw_floors if size_mb >= f.size_mb]
        if fitting:
            return max(fitting, key=lambda f: f.size_mb), ""
        why = f"this all-reduce is {size_mb} MB (selftest.size_mb)"
    return None, f"{preset.name}'s public floors, {known}, not applied: {why}"


def parse_version(text: str | None) -> Version | None:
    """A version as pip reads it (PEP 440, packaging): 'v2.45.0', '0.6.4.post1' and
    '6.2.0-rc1' are versions, a pre-release sorts before its release ('2.41.0rc1' < '2.41'),
    '0.6' equals '0.6.0'; None for text that is no version."""
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def same_version(a: str, b: str) -> bool:
    """The same release as pip sees it ('0.6' is '0.6.0'); text that is no version: equal text."""
    va, vb = parse_version(a), parse_version(b)
    return va == vb if va is not None and vb is not None else a == b
