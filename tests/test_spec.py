"""The spec: defaults, resolution, and every kind of bad input reported once with its line."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest
import yaml
from packaging.version import Version
from pydantic import BaseModel

from clusterctl.errors import SpecError
from clusterctl.spec import load_spec_text
from clusterctl.spec.loader import apply_overrides
from clusterctl.spec.messages import PATTERN_WORDS
from clusterctl.spec.models import JobSpec
from clusterctl.spec.profiles import ProfilesFile
from tests.conftest import ROOT, run_cli

MINIMAL = """\
container:
  image: clusterctl/dev:latest
workload:
  framework: command
  command: hostname
"""


def problems(text: str, *overrides: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec_text(textwrap.dedent(text), "job.yaml", overrides)
    return [str(p) for p in info.value.problems]


def test_minimal_cpu_spec_resolves_every_default() -> None:
    spec = load_spec_text(MINIMAL).spec
    assert spec.slurm.nodes == 1
    assert spec.slurm.gpus_per_node == 0
    assert spec.ray.num_gpus == 0
    assert spec.network.fabric == "ethernet"
    assert spec.container.devices == []
    assert spec.container.shm_size == "2g"


def test_mi300x_preset_fills_devices_groups_and_gpus() -> None:
    spec = load_spec_text(MINIMAL + "hardware: {preset: mi300x}\nslurm: {nodes: 2}\n").spec
    assert spec.slurm.gpus_per_node == 8
    assert spec.ray.num_gpus == 8
    assert spec.container.devices == ["/dev/kfd", "/dev/dri", "/dev/infiniband"]
    assert spec.container.group_add == ["video"]
    assert spec.network.fabric == "ib"


def test_ethernet_fabric_drops_infiniband_device() -> None:
    spec = load_spec_text(MINIMAL + "hardware: {preset: h100}\nnetwork: {fabric: ethernet}\n").spec
    assert spec.container.devices == []


def test_explicit_values_win_over_preset() -> None:
    spec = load_spec_text(
        MINIMAL + "hardware: {preset: mi300x}\nslurm: {gpus_per_node: 4}\n"
        "ray: {num_gpus: 2, num_cpus: 12}\n"
    ).spec
    assert (spec.slurm.gpus_per_node, spec.ray.num_gpus, spec.ray.num_cpus) == (4, 2, 12)


def test_cpus_per_task_becomes_ray_cpus() -> None:
    spec = load_spec_text(MINIMAL + "slurm: {cpus_per_task: 7}\n").spec
    assert spec.ray.num_cpus == 7


def test_malformed_yaml_names_the_line() -> None:
    found = problems("container:\n  image: [unclosed\nworkload: {}\n")
    assert len(found) == 1
    assert found[0].startswith("job.yaml:3:") and "malformed YAML" in found[0]


@pytest.mark.parametrize(
    "text, kind", [("- a\n- b\n", "list"), ("just text\n", "str"), ("", "empty")]
)
def test_document_must_be_a_mapping(text: str, kind: str) -> None:
    found = problems(text)
    assert len(found) == 1 and f"must be a YAML mapping, got {kind}" in found[0]


def test_unknown_key_suggests_the_right_one() -> None:
    found = problems(MINIMAL + "slurm:\n  nodez: 2\n")
    assert found == ["job.yaml:7: slurm.nodez: unknown key; did you mean 'nodes'?"]


def test_unknown_key_inside_workload_variant() -> None:
    found = problems(MINIMAL.replace("command: hostname", "command: hostname\n  entrypont: x"))
    assert len(found) == 1 and "workload.entrypont" in found[0]


def test_unknown_top_level_section() -> None:
    found = problems(MINIMAL + "netwrok: {}\n")
    assert found == ["job.yaml:6: netwrok: unknown key; did you mean 'network'?"]


def test_wrong_type_and_out_of_range_each_once() -> None:
    found = problems(MINIMAL + "slurm:\n  nodes: zero\n  cpus_per_task: 0\n")
    assert len(found) == 2
    assert found[0].startswith("job.yaml:7: slurm.nodes:") and "'zero'" in found[0]
    assert found[1] == "job.yaml:8: slurm.cpus_per_task: must be at least 1 (got 0)"


def test_union_field_reports_once() -> None:
    found = problems(MINIMAL.replace("command: hostname", "command: {a: 1}"))
    assert len(found) == 1 and found[0].startswith("job.yaml:5: workload.command:")


def test_missing_required_field() -> None:
    found = problems("workload: {framework: command, command: x}\n")
    assert found == ["job.yaml:1: container: required field is missing"]


def test_duplicate_keys_are_errors() -> None:
    found = problems(MINIMAL + "slurm:\n  nodes: 1\n  nodes: 2\n")
    assert found == ["job.yaml:8: slurm.nodes: duplicate key"]


def test_sbatch_value_with_space_or_newline_is_refused() -> None:
    found = problems(MINIMAL + "slurm:\n  partition: 'gpu --wrap=x'\n")
    assert len(found) == 1 and "slurm.partition" in found[0]


@pytest.mark.parametrize(
    "section, expected",
    [
        (
            "slurm: {nodes: 2}\nworkload:\n  framework: verl\n  overrides: {trainer.nnodes: 4}\n"
            "hardware: {preset: h100}\n",
            'workload.overrides["trainer.nnodes"]: trainer.nnodes=4 is more than the allocation',
        ),
        ("ray: {num_gpus: 4}\n", "ray.num_gpus: Ray would offer 4 GPUs per node but the job asks"),
        ("container: {image: x, pull: load}\n", "container.load_from: pull: load needs"),
        ("container: {image: x, load_via: sbcast}\n", "container.load_via: sbcast copies"),
        ("hardware: {preset: none}\nslurm: {gpus_per_node: 2}\n", "slurm.gpus_per_node: 2 GPUs"),
        ("network: {fabric: ethernet, hcas: [mlx5_0]}\n", "network.hcas: HCAs listed"),
        (
            "ray: {head_port: 6379, dashboard_port: 6379}\n",
            "ray.dashboard_port: port 6379 is also ray.head_port",
        ),
        (
            "ray: {head_port: 20001}\n",
            "ray.head_port: port 20001 lies in ray.port_range 20000-29999",
        ),
        ("ray: {port_range: 20000-20010}\n", "ray.port_range: the range must hold at least 16"),
        ('ray: {port_range: "6379"}\n', "ray.port_range: write LOW-HIGH"),
        ("slurm: {extra: ['--nodes=3']}\n", "slurm.extra[0]: --nodes is set by clusterctl"),
        ("slurm: {extra: ['-N3']}\n", "slurm.extra[0]: --nodes is set by clusterctl"),
        (
            "container: {image: x, extra_args: ['--network=bridge']}\n",
            "container.extra_args[0]: docker run --network is controlled by clusterctl",
        ),
        (
            "container: {image: x, extra_args: ['-dit']}\n",
            "container.extra_args[0]: docker run --detach is controlled",
        ),
        (
            "container: {image: x, env: {A: '1'}, env_passthrough: [A]}\n",
            "container.env.A: also listed in container.env_passthrough",
        ),
        ("ray: {min_worker_port: 20000}\n", "ray.max_worker_port: set min_worker_port and max"),
        # issue 21 item 6: one reading of each fact (network: and the environment)
        (
            "container: {image: x, env: {NCCL_SOCKET_IFNAME: ib0}}\n",
            "container.env.NCCL_SOCKET_IFNAME: NCCL_SOCKET_IFNAME is written by clusterctl from "
            "network.socket_ifname: set that instead",
        ),
        (
            "network: {nccl_env: {NCCL_IB_HCA: mlx5_0}}\n",
            "network.nccl_env.NCCL_IB_HCA: NCCL_IB_HCA is written by clusterctl from network.hcas",
        ),
        (
            "container: {image: x, env: {RAY_ADDRESS: '10.0.0.1:6379'}}\n",
            "container.env.RAY_ADDRESS: RAY_ADDRESS is set by clusterctl",
        ),
        (
            "watch: {first_progress_seconds: 600}\n",
            "watch: watch.first_progress_seconds needs watch.stall_seconds",
        ),
    ],
)
def test_contradictions_between_sections(section: str, expected: str) -> None:
    base = MINIMAL
    if section.startswith("container:"):
        base = base.replace("container:\n  image: clusterctl/dev:latest\n", "")
    if "workload:" in section:
        base = base.split("workload:")[0]
    found = problems(base + section)
    assert len(found) == 1, found
    assert expected in found[0]
    assert found[0].startswith("job.yaml:")


def test_allowed_docker_extra_args_pass() -> None:
    spec = load_spec_text(
        MINIMAL.replace(
            "  image: clusterctl/dev:latest",
            "  image: clusterctl/dev:latest\n  extra_args: [--cap-add, SYS_ADMIN, --privileged]",
        )
    ).spec
    assert spec.container.extra_args == ["--cap-add", "SYS_ADMIN", "--privileged"]


def test_set_overrides_values_and_reports_set_as_source() -> None:
    spec = load_spec_text(MINIMAL, "job.yaml", ["slurm.nodes=4", "ray.join_deadline=30"]).spec
    assert spec.slurm.nodes == 4 and spec.ray.join_deadline == 30
    found = problems(MINIMAL, "slurm.nodes=0")
    assert found == ["--set: slurm.nodes: must be at least 1 (got 0)"]


def test_set_keeps_dotted_keys_inside_free_form_mappings() -> None:
    data = {"workload": {"framework": "verl", "overrides": {}}}
    apply_overrides(
        data, ["workload.overrides.trainer.total_epochs=3", "container.env.HF_HOME=/cache"]
    )
    assert data["workload"]["overrides"] == {"trainer.total_epochs": 3}
    assert data["container"] == {"env": {"HF_HOME": "/cache"}}


def test_set_without_equals_is_an_error() -> None:
    found = problems(MINIMAL, "slurm.nodes")
    assert found == ["--set: --set 'slurm.nodes': expected KEY.PATH=VALUE"]


def test_slurm_minutes_and_memory_may_be_plain_numbers() -> None:
    spec = load_spec_text(MINIMAL + "slurm:\n  time: 30\n  mem: 0\n").spec
    assert (spec.slurm.time, spec.slurm.mem) == ("30", "0")


def test_a_checkpoint_window_must_fit_before_the_limit_with_the_cleanup() -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(MINIMAL, "job.yaml", ["slurm.checkpoint_grace=90"])
    [problem] = caught.value.problems
    assert problem.path == "slurm.checkpoint_grace"
    assert "90s to checkpoint + 60s of cleanup (container.cleanup_deadline) + 10s do not fit" in (
        problem.message
    )
    assert "raise signal_grace to 160" in problem.message
    fits = ["slurm.checkpoint_grace=90", "slurm.signal_grace=160"]
    assert load_spec_text(MINIMAL, "job.yaml", fits).spec.slurm.checkpoint_grace == 90


def test_time_limit_warning_requeue_and_the_stop_wait_reach_the_job() -> None:
    from clusterctl.render.plan import build_plan

    spec = load_spec_text(
        MINIMAL,
        "job.yaml",
        ["slurm.requeue=true", "slurm.signal_grace=200", "slurm.checkpoint_grace=120"],
    ).spec
    directives = build_plan(spec).sbatch_directives
    assert "--signal=B:USR1@200" in directives and "--requeue" in directives
    openrlhf = load_spec_text(
        MINIMAL.replace("framework: command", "framework: openrlhf").replace(
            "command: hostname", "args: {pretrain: /m}"
        ),
        "job.yaml",
        ["slurm.signal_grace=200", "slurm.checkpoint_grace=120"],
    ).spec
    submit = build_plan(openrlhf).job_submit_args
    assert submit is not None
    assert '"RAY_JOB_STOP_WAIT_TIME_S": "120"' in submit[1]


@pytest.mark.parametrize("option", ["--requeue", "--no-requeue", "--dependency=afterok:1"])
def test_requeue_and_dependencies_are_clusterctls(option: str) -> None:
    with pytest.raises(SpecError, match=r"slurm\.extra"):
        load_spec_text(MINIMAL, "job.yaml", [f"slurm.extra=[{option}]"])


# issue 20: the Ray token is the job's own; no spec can set or pass it
@pytest.mark.parametrize(
    "assignment",
    ["container.env.RAY_AUTH_MODE=disabled", "network.nccl_env.RAY_AUTH_TOKEN=x",
     "container.env_passthrough=[RAY_AUTH_TOKEN]"],
)  # fmt: skip
def test_ray_token_settings_belong_to_the_job(assignment: str) -> None:
    result = run_cli(
        "validate", str(ROOT / "examples" / "cpu-dev-cluster.yaml"), "--set", assignment
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is set by clusterctl: each job gets its own Ray token" in result.stderr


# pydantic's own wordings: none of them may reach a user
PYDANTIC_WORDS = ("Input should", "String should", "Field required", "Value error", "valid ")
HOSTILE = ["not a number", -5, 10**9, [1, 2], {"a": 1}, True, 1.5, "", "a b\nc", "x" * 300]


def _fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, field in model.model_fields.items():
        out.append((*prefix, name))
        for kind in (*getattr(field.annotation, "__args__", ()), field.annotation):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out += _fields(kind, (*prefix, name))
    return out


@pytest.mark.parametrize("section", ["slurm", "container", "hardware", "network", "ray", "watch"])
def test_every_field_refuses_hostile_values_in_the_projects_words(section: str) -> None:
    """Each field of the section given each kind of wrong value: a message of ours, naming the
    field with its line, never pydantic's sentence."""
    seen = 0
    for path in (p for p in _fields(JobSpec) if p[0] == section):
        for value in HOSTILE:
            data: dict[str, Any] = yaml.safe_load(MINIMAL)
            node = data
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
            try:
                load_spec_text(yaml.safe_dump(data), "job.yaml")
            except SpecError as exc:
                for problem in map(str, exc.problems):
                    seen += 1
                    assert problem.startswith("job.yaml:"), problem
                    assert not any(w in problem for w in PYDANTIC_WORDS), problem
    assert seen > 20  # the sweep reached the validators


def test_every_pattern_of_the_models_has_words() -> None:
    patterns: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.add(node["pattern"])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(JobSpec.model_json_schema())
    collect(ProfilesFile.model_json_schema())
    assert len(patterns) > 15
    assert sorted(patterns - set(PATTERN_WORDS)) == []


def test_init_offers_every_preset_the_schema_accepts_each_with_its_sources() -> None:
    """Issue 43: the hardware of 2026. init offers every preset; a preset's memory figure and
    all-reduce floor each name where they were printed (the plan judges only with one)."""
    from typing import get_args

    from clusterctl.spec.presets import PRESETS, PresetName

    shown = run_cli("init", "--help").stdout
    offered = re.search(r"--preset \[([^\]]+)\]", " ".join(shown.split()))
    assert offered and set(offered.group(1).split("|")) == set(get_args(PresetName))
    assert set(PRESETS) == set(get_args(PresetName))
    for name in ("h200", "b200", "mi325x", "mi300x", "h100"):
        memory = PRESETS[name].gpu_memory
        assert memory is not None and ("github.com" in memory.source or "@" in memory.source)
    for name in ("h200", "b200", "mi355x", "mi300x", "h100"):
        assert PRESETS[name].busbw_floors and all(f.source for f in PRESETS[name].busbw_floors)
    assert PRESETS["mi355x"].min_rocm == Version("7.0")
    assert PRESETS["mi325x"].min_rocm == Version("6.3.1")
