"""import's dry run: bash runs the script in a bubblewrap sandbox, every external command a
stand-in (clusterctl/importer/dryrun.py). Each script below is a habit users' own launch
scripts have (issue 41); the sandbox itself is real, nothing is mocked."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.cli import main
from clusterctl.importer import dryrun
from clusterctl.importer.convert import Imported, import_script, to_yaml
from clusterctl.spec.loader import load_spec_text


def run(tmp_path: Path, text: str, **kwargs: object) -> Imported:
    script = tmp_path / "run.sh"
    script.write_text(text)
    return import_script(
        script.read_bytes(),
        name=script.name,
        base=tmp_path,
        path=script,
        **kwargs,  # type: ignore[arg-type]
    )


def overrides(imported: Imported) -> dict[str, object]:
    return dict(imported.get(("workload", "overrides")) or {})


def test_the_sandbox_is_available_here() -> None:
    # scripts/test.sh installs bubblewrap; without it import parses and says so
    assert dryrun.sandbox_problem() is None


def test_python_behind_a_variable_and_a_background_server(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "CONDA_BIN_PATH=/opt/conda/bin/\n"
        "python3 -m sglang_router.launch_server --port 30000 &\n"
        '"${CONDA_BIN_PATH}python" -m recipe.dapo.main_dapo data.train_batch_size=32 \\\n'
        "  trainer.total_epochs=2\n",
    )
    assert imported.get(("workload", "entrypoint")) == "recipe.dapo.main_dapo"
    assert overrides(imported) == {"data.train_batch_size": 32, "trainer.total_epochs": 2}
    assert any("background" in why for line, why in imported.unmapped if line == 2)
    assert imported.read_by.startswith("run by bash in a bubblewrap sandbox")


def test_a_server_piped_to_tee_and_sent_off_is_never_the_trainer(tmp_path: Path) -> None:
    """bash gives a pipeline sent to the background no /dev/null stdin (unlike `cmd &`): the
    script's own `&`, as bash parses it, tells (an EasyR1 fork's launch_cluster.sh)."""
    imported = run(
        tmp_path,
        "for i in 0 1; do\n"
        "  python -m verl.workers.rollout.launch_server --port $((8000 + i)) \\\n"
        '    --n 5 2>&1 | tee "server_$i.log" &\n'
        "done\n"
        "python3 -m verl.trainer.main_ppo data.train_batch_size=32\n",
    )
    assert imported.get(("workload", "entrypoint")) == "verl.trainer.main_ppo"
    assert overrides(imported) == {"data.train_batch_size": 32}
    assert any("background" in why for line, why in imported.unmapped if line in (2, 3))


def test_hydras_config_dir_in_either_spelling_reaches_the_job(tmp_path: Path) -> None:
    """`--config-dir $(pwd)/configs --config-name X` (a lab's apptainer script): Hydra's own
    parser reads both spellings, and the job passes the directory on."""
    imported = run(
        tmp_path,
        "python -m verl.trainer.main_ppo --config-dir /work/configs --config-name nano_8b \\\n"
        "  trainer.experiment_name=run-1\n",
    )
    assert imported.get(("workload", "config_dir")) == "/work/configs"
    assert imported.get(("workload", "config_name")) == "nano_8b"
    spec = load_spec_text(to_yaml(imported, "run.sh"), "run.sh").spec
    from clusterctl.render.plan import verl_argv

    argv = verl_argv(spec, spec.workload)  # type: ignore[arg-type]
    assert "--config-dir=/work/configs" in argv and "--config-name=nano_8b" in argv
    # a refusal by Hydra's parser says what it refused, on one line
    from clusterctl.importer.convert import ImportError_

    with pytest.raises(ImportError_, match=r"refuses the arguments: .*unrecognized arguments"):
        run(tmp_path, "python -m verl.trainer.main_ppo --config-nme x\n")


def test_a_labs_module_built_on_verl_keeps_its_arguments(tmp_path: Path) -> None:
    imported = run(tmp_path, "python3 -m verl_tool.trainer.main_ppo trainer.total_epochs=3\n")
    assert imported.get(("workload", "framework")) == "verl"
    assert imported.get(("workload", "entrypoint")) == "verl_tool.trainer.main_ppo"
    assert any("judged as verl" in why for _line, why in imported.unmapped)


def test_values_have_bashs_meaning(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "CKPT=/ckpt PROJECT=p EXP='my exp'\n"
        "DAY=$(date +%Y)\n"
        "python3 -m verl.trainer.main_ppo data.train_files=${HOME}/d.parquet \\\n"
        '  trainer.default_local_dir=$CKPT/$PROJECT/"$EXP" trainer.experiment_name=e$DAY \\\n',
        env={"HOME": "/home/u"},
    )
    got = overrides(imported)
    assert got["data.train_files"] == "/home/u/d.parquet"
    assert got["trainer.default_local_dir"] == "/ckpt/p/my exp"
    assert str(got["trainer.experiment_name"]).startswith("e20")  # the year, not $(date ...)
    assert any("date +%Y" in what for _line, what in imported.assumed)


def test_argument_parsing_and_a_device_probe_run_as_bash_runs_them(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "LR=1e-6\n"
        "while [[ $# -gt 0 ]]; do case $1 in --lr) LR=$2; shift 2;; *) shift;; esac; done\n"
        "DEVICE=$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)\n"
        'if [ "$DEVICE" = npu ]; then EXTRA="trainer.device=npu"; else EXTRA=""; fi\n'
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.optim.lr=$LR $EXTRA\n",
        args=["--lr", "3e-6"],
    )
    assert overrides(imported) == {"actor_rollout_ref.actor.optim.lr": 3e-6}


def test_counts_computed_on_the_node_become_the_fields_clusterctl_sets(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "#!/bin/bash\n#PBS -l select=2:ngpus=8\n#PBS -l walltime=04:00:00\n"
        "N_GPUS=$(nvidia-smi -L | wc -l)\n"
        "NODES=$(cat $PBS_NODEFILE | uniq | wc -l)\n"
        "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$N_GPUS trainer.nnodes=$NODES\n",
        preset="h100",
    )
    assert imported.get(("slurm", "nodes")) == 2
    assert imported.get(("slurm", "gpus_per_node")) == 8
    assert imported.get(("slurm", "time")) == "04:00:00"
    assert any("nvidia-smi -L" in what for _line, what in imported.assumed)
    load_spec_text(to_yaml(imported, "run.sh"), "run.sh")


def test_a_node_count_from_the_launchers_environment_is_never_silently_one(
    tmp_path: Path,
) -> None:
    text = "python3 -m verl.trainer.main_ppo trainer.nnodes=${NNODES:-1}\n"
    imported = run(tmp_path, text)
    assert any("give --nodes" in why for _line, why in imported.unmapped)
    assert run(tmp_path, text, nodes=4).get(("slurm", "nodes")) == 4


def test_an_amd_node_has_no_nvidia_smi(tmp_path: Path) -> None:
    text = "set -e\nN=$(nvidia-smi -L | wc -l)\npython3 -m verl.trainer.main_ppo a.b=$N\n"
    imported = run(tmp_path, text, preset="mi300x")
    # bash on an MI300X node: nvidia-smi is not found, the pipeline's count is 0
    assert overrides(imported) == {"a.b": 0}


def test_sbatch_options_import_writes_are_ones_validate_accepts(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --requeue\n#SBATCH --array=0-15\n"
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=1\n",
    )
    assert imported.get(("slurm", "requeue")) is True
    assert any("job array" in why for line, why in imported.unmapped if line == 4)
    load_spec_text(to_yaml(imported, "run.sh"), "run.sh")


def test_container_launchers_map_to_the_container_section(tmp_path: Path) -> None:
    pyxis = run(
        tmp_path,
        "srun --container-image=nvcr.io/nvidia/pytorch:24.05-py3 "
        "--container-mounts=/data:/data,/ckpt:/ckpt:ro --container-workdir=/w "
        "python3 -m verl.trainer.main_ppo a.b=1\n",
    )
    assert pyxis.get(("container", "image")) == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert pyxis.get(("container", "mounts")) == [
        {"source": "/data", "target": "/data"},
        {"source": "/ckpt", "target": "/ckpt", "read_only": True},
    ]
    assert pyxis.get(("container", "workdir")) == "/w"
    apptainer = run(
        tmp_path,
        'srun -N1 bash -c "apptainer exec --nv --bind /scratch:/scratch /img/verl.sif '
        'python3 -m verl.trainer.main_ppo a.b=2"\n',
    )
    assert apptainer.get(("container", "mounts")) == [{"source": "/scratch", "target": "/scratch"}]
    assert overrides(apptainer) == {"a.b": 2}
    assert any("verl.sif" in why for _line, why in apptainer.unmapped)


def test_a_script_bash_refuses_is_one_line_and_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("if then fi (\n")
    result = CliRunner().invoke(main, ["import", str(script)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_the_scripts_own_arguments_after_two_dashes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text('python3 -m verl.trainer.main_ppo trainer.total_epochs="$1"\n')
    result = CliRunner().invoke(main, ["import", str(script), "--", "7"])
    assert result.exit_code == 0, result.output
    assert "trainer.total_epochs: 7" in result.output


def test_the_sandbox_keeps_the_host_and_the_network_out_of_reach(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    marker = tmp_path / "written-by-the-script"
    imported = run(
        tmp_path,
        f"echo x > {marker}; echo y > /etc/clusterctl-test 2>/dev/null\n"
        f"if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then R=reached; else R=none; fi\n"
        "python3 -m verl.trainer.main_ppo network=$R leak=${AWS_SECRET_ACCESS_KEY:-unset}\n",
    )
    listener.close()
    assert not marker.exists() and not Path("/etc/clusterctl-test").exists()
    assert overrides(imported)["network"] == "none"
    assert overrides(imported)["leak"] == "unset"  # the importing user's env never reaches it


def test_a_script_that_never_ends_is_stopped_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dryrun, "WALL_SECONDS", 3)
    imported = run(
        tmp_path,
        "python3 -m verl.trainer.main_ppo a.b=1\nwhile true; do :; done\n",
    )
    assert overrides(imported) == {"a.b": 1}
    assert any("deadline" in why for _line, why in imported.unmapped)


def test_a_value_with_a_line_break_cannot_write_yaml_keys(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "cd $'/x\\nsidecars: [{name: evil, command: id}]\\n#'\n"
        "python3 -m verl.trainer.main_ppo a.b=1\n",
    )
    text = to_yaml(imported, "run.sh")
    loaded = load_spec_text(text, "run.sh")
    assert not loaded.spec.sidecars
    assert "\nsidecars:" not in text


# ---- wrappers, templates and the caller's environment (issue 41, second round) ------------


def test_a_wrapper_runs_its_sibling_by_a_path_of_the_clusters_copy(tmp_path: Path) -> None:
    """`cd /n/scratch/lab/verl/proj; bash scripts/run.sh`: the cd goes where only the cluster
    has the tree; the tree's own scripts/run.sh is run, and that is listed."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "proj" / "scripts").mkdir(parents=True)
    (tmp_path / "proj" / "scripts" / "run.sh").write_text(
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=4\n"
    )
    imported = run(tmp_path, "cd /n/scratch/lab/verl/proj\nbash scripts/run.sh\n")
    assert overrides(imported) == {"trainer.total_epochs": 4}
    assert any("run as" in what and "proj/scripts/run.sh" in what for _, what in imported.assumed)


def test_a_trainer_started_only_in_the_background_is_the_jobs(tmp_path: Path) -> None:
    (tmp_path / "train.sh").write_text(
        "/home/u/miniconda3/envs/rl/bin/python3 -m verl.trainer.main_ppo trainer.total_epochs=2\n"
    )
    imported = run(tmp_path, "export N_GPUS=2\nnohup bash ./train.sh &>./nohup.out &\n")
    assert overrides(imported) == {"trainer.total_epochs": 2}


def test_a_wrapper_that_submits_a_batch_script_imports_what_it_submits(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.sh").write_text(
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n#SBATCH --time=04:00:00\n"
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=$1 "
        "trainer.nnodes=$SLURM_NNODES trainer.n_gpus_per_node=$SLURM_GPUS_ON_NODE\n"
    )
    imported = run(
        tmp_path, "jid=$(sbatch --parsable --nodes=2 --account=lab jobs/train.sh 7)\necho $jid\n"
    )
    assert overrides(imported) == {"trainer.total_epochs": 7}
    assert imported.get(("slurm", "nodes")) == 2  # the wrapper's --nodes wins over the header
    assert imported.get(("slurm", "gpus_per_node")) == 4  # the submitted script's header
    assert imported.get(("slurm", "account")) == "lab"
    assert any("--parsable" in why for _, why in imported.unmapped)
    load_spec_text(to_yaml(imported, "run.sh"), "run.sh")


def test_a_variable_the_caller_must_set_is_a_listed_placeholder(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "MODEL_PATH=${MODEL_PATH:-}\n"
        'if [ -z "$MODEL_PATH" ]; then echo "MODEL_PATH is not set"; exit 1; fi\n'
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=$MODEL_PATH\n",
    )
    assert overrides(imported) == {"actor_rollout_ref.model.path": "__MODEL_PATH__"}
    assert any("give --env MODEL_PATH=" in what for _, what in imported.assumed)


def test_ray_start_options_map_to_ray_where_the_job_can_give_them(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n#SBATCH --cpus-per-task=32\n"
        "ray start --head --num-cpus=$SLURM_CPUS_PER_TASK --num-gpus 4 --temp-dir=/tmp/u/ray "
        "--min-worker-port=12000 --max-worker-port=12999 --port=6379\n"
        "ray start --num-cpus=64 --address=10.0.0.1:6379\n"
        "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=4\n",
    )
    assert imported.get(("ray",)) == {
        "num_cpus": 32,  # bash's value: the CPUs the header asks for
        "num_gpus": 4,
        "temp_dir": "/tmp/u/ray",
        "min_worker_port": 12000,
        "max_worker_port": 12999,
    }
    load_spec_text(to_yaml(imported, "run.sh"), "run.sh")
    too_many = run(
        tmp_path,
        "#SBATCH --cpus-per-task=16\nray start --head --num-cpus=64\n"
        "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8\n",
    )
    assert "ray" not in too_many.spec
    assert any("--num-cpus 64: more than the job asks" in why for _, why in too_many.unmapped)


def test_a_bare_srun_is_the_allocation_where_no_header_makes_one(tmp_path: Path) -> None:
    """Run from a login node, `srun -N 2 --gres=gpu:4 ...` makes the job's allocation: its
    options are the slurm section, and the dry run answers as 2 nodes of 4 GPUs."""
    imported = run(
        tmp_path,
        "srun -N 2 --ntasks-per-node=1 --gres=gpu:4 -t 2:00:00 -p gpu python3 -m "
        "verl.trainer.main_ppo trainer.nnodes=$SLURM_NNODES trainer.total_epochs=1\n",
    )
    slurm = imported.get(("slurm",))
    assert (slurm["nodes"], slurm["gpus_per_node"], slurm["partition"]) == (2, 4, "gpu")
    assert [why for _, why in imported.unmapped] == [
        "srun --ntasks-per-node: clusterctl places the trainer on the head node itself"
    ]
    # with a header of its own, the same srun's options are the step's, not the job's
    header = run(tmp_path, "#SBATCH --nodes=1\n" + (tmp_path / "run.sh").read_text())
    assert header.get(("slurm", "nodes")) == 1
    assert any(why.startswith("srun -N:") for _, why in header.unmapped)


def test_a_multi_node_script_that_waits_for_its_ray_cluster_reaches_its_trainer(
    tmp_path: Path,
) -> None:
    """verl-tool's SLURM scripts (TIGER-AI-Lab/verl-tool) start the head with `srun ... ray
    start --block &`, watch it with `kill -0 $!`, run a sidecar `while true; do sleep 60`,
    and wait until `ray status | grep worker_units | awk` counts every GPU: the stand-ins
    answer as a healthy cluster (a blocking ray start holds, a background sleep parks, ray
    status lists the nodes and the resources ray start declared), with the system's awk."""
    imported = run(
        tmp_path,
        "#SBATCH --nodes=2\n#SBATCH --gpus-per-node=4\n"
        'srun --nodes=1 bash -c \'ray start --head --resources="{\\"worker_units\\": 4}" '
        "--block' &\nHEAD=$!\n"
        "( while true; do sleep 60; done ) &\n"
        "until [[ $(ray status | grep worker_units | awk -F'[/. ]' '{print $4}') -eq 8 ]]; do\n"
        "  kill -0 $HEAD || exit 1\n  sleep 2\ndone\n"
        "python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=4\n",
    )
    assert imported.get(("workload", "entrypoint")) == "verl.trainer.main_ppo"
    assert imported.get(("slurm", "nodes")) == 2


def test_a_pyxis_image_file_is_named_not_taken_for_a_reference(tmp_path: Path) -> None:
    imported = run(
        tmp_path,
        "#SBATCH --nodes=1\nsrun --container-image=/lustre/images/rl.sqsh "
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=1\n",
    )
    assert imported.get(("container", "image")) == "verl:latest"  # the placeholder, marked
    assert any("an enroot image file" in why for _, why in imported.unmapped)
    ref = run(
        tmp_path,
        "#SBATCH --nodes=1\nsrun --container-image=nvcr.io#nvidia/pytorch:24.05-py3 "
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=1\n",
    )
    assert ref.get(("container", "image")) == "nvcr.io/nvidia/pytorch:24.05-py3"


def test_a_submitted_scripts_unreadable_header_line_is_left_out(tmp_path: Path) -> None:
    """An #SBATCH line whose quotes never close, in the batch script a wrapper submits, was a
    traceback (shlex's ValueError); it is left out and the rest of the header is read."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "t.sh").write_text(
        '#!/bin/bash\n#SBATCH --comment="unclosed\n#SBATCH --nodes=2\n'
        "python3 -m verl.trainer.main_ppo trainer.total_epochs=1\n"
    )
    imported = run(tmp_path, "sbatch jobs/t.sh\n")
    assert imported.get(("slurm", "nodes")) == 2
    assert overrides(imported) == {"trainer.total_epochs": 1}
