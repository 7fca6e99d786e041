"""``clusterctl init``: a commented starter spec that validates and renders as written."""

from __future__ import annotations

from clusterctl.spec.presets import PRESETS

_WORKLOADS = {
    "verl": """\
workload:
  framework: verl
  entrypoint: verl.trainer.main_ppo
  # Hydra overrides. trainer.nnodes and trainer.n_gpus_per_node come from the slurm section.
  overrides:
    data.train_files: /data/gsm8k/train.parquet
    data.val_files: /data/gsm8k/test.parquet
    actor_rollout_ref.model.path: Qwen/Qwen2-7B-Instruct
    actor_rollout_ref.rollout.name: vllm
    actor_rollout_ref.rollout.tensor_model_parallel_size: 2
    actor_rollout_ref.rollout.gpu_memory_utilization: 0.8
    critic.model.path: Qwen/Qwen2-7B-Instruct
    # verl's validate_config requires a micro batch size per role unless use_dynamic_bsz
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu: 4
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu: 8
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu: 8
    critic.ppo_micro_batch_size_per_gpu: 4
    trainer.total_epochs: 15
""",
    "openrlhf": """\
workload:
  framework: openrlhf
  entrypoint: openrlhf.cli.train_ppo_ray
  # Arguments as name: value; true adds a bare flag, false leaves it out. OpenRLHF >= 0.10.2
  # spells them with dots. Every model is colocated on all {gpus} GPUs of the job.
  args:
    actor.model_name_or_path: /models/Llama-3-8B-Instruct
    reward.model_name_or_path: /models/Llama-3-8B-RM
    actor.num_nodes: {nodes}
    actor.num_gpus_per_node: {per_node}
    ref.num_nodes: {nodes}
    ref.num_gpus_per_node: {per_node}
    critic.num_nodes: {nodes}
    critic.num_gpus_per_node: {per_node}
    reward.num_nodes: {nodes}
    reward.num_gpus_per_node: {per_node}
    train.colocate_all: true
    vllm.num_engines: {engines}
    vllm.tensor_parallel_size: 2
    vllm.gpu_memory_utilization: 0.5
{sync}    data.prompt_dataset: /data/prompts.jsonl   # required: OpenRLHF splits it at start-up
    data.input_key: prompt
    ds.param_dtype: bf16
  runtime_env:
    working_dir: /workspace
""",
    "command": """\
workload:
  framework: command
  # Runs in the head container once every node has joined Ray.
  command: python3 -c "import ray; ray.init(); print(ray.cluster_resources())"
""",
}


def starter_spec(preset: str, framework: str, nodes: int) -> str:
    """A spec text for the preset and framework, with the choices explained."""
    info = PRESETS[preset]
    gpu_line = f"  gpus_per_node: {info.gpus_per_node}\n" if info.gpus_per_node else ""
    cpus = 8 * info.gpus_per_node if info.gpus_per_node else 2
    per_node = info.gpus_per_node
    workload = _WORKLOADS[framework].format(
        nodes=nodes,
        per_node=per_node,
        gpus=nodes * per_node,
        engines=nodes * per_node // 2,
        sync=(
            "    vllm.sync_backend: gloo      # ROCm: a Ray gloo group instead of RCCL; gloo\n"
            "    vllm.sync_with_ray: true     # alone would still sync over NCCL\n"
            if info.vendor == "amd"
            else "    vllm.sync_backend: nccl      # all colocated: CUDA IPC, no NCCL group\n"
        ),
    )
    versions = 'versions:\n  openrlhf: "0.11.2"\n\n' if framework == "openrlhf" else ""
    image = {
        "amd": "rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev",
        "nvidia": "verlai/verl:latest",
        "none": "clusterctl/dev:latest",
    }[info.vendor]
    return f"""\
# clusterctl job spec ({preset}, {framework}). Check it: clusterctl validate THIS_FILE
# Every key is documented in docs/reference.md; `clusterctl schema` prints the
# JSON Schema for editors.
slurm:
  job_name: {framework}-{preset}
  nodes: {nodes}
{gpu_line}  cpus_per_task: {cpus}
  time: "04:00:00"
  # partition: gpu
  # account: my-account

hardware:
  preset: {preset}          # decides devices, GPU visibility and NCCL/RCCL defaults

{versions}
container:
  image: {image}
  pull: if-missing          # always | if-missing | never | load (with load_from)
  env_passthrough: []       # e.g. [WANDB_API_KEY, HF_TOKEN]: never written into files

network:
  fabric: {info.default_fabric}             # ib | roce | ethernet
  # socket_ifname: ib0      # interface for NCCL/GLOO bootstrap and Ray node addresses
  # hcas: [mlx5_0, mlx5_1]  # RDMA devices for NCCL_IB_HCA

{workload}"""
