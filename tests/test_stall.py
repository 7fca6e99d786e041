"""doctor's reading of a stalled job's stack dumps, on evidence a real job captured."""

from __future__ import annotations

import shutil
from pathlib import Path

from clusterctl.doctor.scan import scan_files
from clusterctl.doctor.stall import explain, explain_directory, gpu_use, parse_evidence

CAPTURED = Path(__file__).parent / "fixtures" / "stall" / "gloo-odd-rank"


def test_the_rank_outside_the_collective_names_its_node() -> None:
    found = explain_directory(CAPTURED)
    assert found is not None
    assert found.suspects == ("node3",)
    assert found.meaning.startswith("2 of 3 ranks wait in all_reduce; 1 is elsewhere: node3 pid ")
    assert "(ray::Rank.step) in hang_in_data_loader (hang.py:9)" in found.meaning
    assert found.fix == "read the full dump in stall/node3.txt; fix or drain node3"


def test_services_idle_workers_and_the_blocked_driver_are_not_ranks() -> None:
    stacks = parse_evidence("node1", (CAPTURED / "node1.txt").read_text())
    kinds = {s.command.split()[0]: s.kind() for s in stacks}
    assert kinds["ray::DashboardAgent"] == "service"
    assert kinds["ray::RuntimeEnvAgent"] == "service"
    assert kinds["ray::Rank.step"] == "collective"
    assert kinds["python3"] == "ray-wait"  # the workload's driver, in ray.get


def test_when_every_rank_in_the_dumps_waits_the_peer_is_missing(tmp_path: Path) -> None:
    for name in ("node1.txt", "node2.txt"):
        shutil.copy(CAPTURED / name, tmp_path / name)
    found = explain_directory(tmp_path)
    assert found is not None and found.suspects == ("node1", "node2")
    assert found.meaning == "every rank in the dumps (2, on node1, node2) waits in all_reduce"
    assert found.cause.startswith("the peer they wait for is not among them")


def test_an_image_without_py_spy_is_said(tmp_path: Path) -> None:
    (tmp_path / "node1.txt").write_text("@@ evidence node1 now\n@@ py-spy is not in the image\n")
    found = explain_directory(tmp_path)
    assert found is not None
    assert found.meaning == "no stack dumps: py-spy is not in the image (node1)"
    assert "pip_packages: [py-spy]" in found.fix
    lone = explain(parse_evidence("n", "@@ evidence n now\n@@ pid 7: ray::IDLE\n"))
    assert lone is not None and lone.meaning == "no process held a stack"


def test_doctor_puts_the_stall_explanation_first(tmp_path: Path) -> None:
    stall = tmp_path / "stall"
    shutil.copytree(CAPTURED, stall)
    hits = scan_files(sorted(stall.iterdir()))
    first = hits[0].as_dict()
    assert first["id"] == "stall-evidence"
    assert str(first["meaning"]).startswith("the workload stalled: 2 of 3 ranks wait in all_reduce")


def test_a_qualified_name_in_a_collective_file_is_a_collective() -> None:
    """py-spy names PyNcclCommunicator.broadcast so on Python >= 3.11 (issue 29 item 3)."""
    text = (CAPTURED.parent / "pynccl-qualified" / "node2.txt").read_text()
    (stack,) = parse_evidence("node2", text)
    assert stack.frames[0][0] == "PyNcclCommunicator.broadcast"
    assert stack.state == "S (sleeping)"
    assert (stack.kind(), stack.collective()) == ("collective", "broadcast")


def test_a_stopped_verl_rank_is_named_by_its_state() -> None:
    """Real evidence of verl 0.5.0 with node3's worker stopped (fixtures/stall/README.md)."""
    found = explain_directory(CAPTURED.parent / "verl-stopped-rank")
    assert found is not None and found.suspects == ("node3",)
    assert found.meaning == (
        "node3 pid 148 (ray::WorkerDict.actor_rollout_generate_sequences) is stopped (SIGSTOP or "
        "job control); the others wait in all_gather_single"
    )
    assert found.fix == "continue it (kill -CONT) or resubmit without node3"


VERIFY = Path(__file__).parent / "fixtures" / "verify"


def with_gpu_output(tmp_path: Path, tool_output: str) -> Path:
    """The captured evidence, its "@@ gpus" section holding a GPU tool's real output (the job
    that captured it ran on CPU, where the section says there is no GPU tool)."""
    for node in ("node1", "node2", "node3"):
        text = (CAPTURED / f"{node}.txt").read_text()
        assert "\n@@ gpus\nno GPU tool on this node\n" in text
        text = text.replace("no GPU tool on this node\n", tool_output)
        (tmp_path / f"{node}.txt").write_text(text)
    return tmp_path


def test_rocm_smi_use_is_read_from_its_use_column_never_gfx_activity(tmp_path: Path) -> None:
    # rocm-smi's own CLI code printed these (fixtures/verify/README.md): GFX Activity is a
    # cumulative counter (203885505 on an idle card), "GPU use (%)" the percentage
    for state, use in (("idle", "0"), ("busy", "100")):
        out = VERIFY / f"rocm-smi-4.0.0-showuse-showpower-showmemuse-csv-8xmi300x-{state}.csv"
        assert out.read_text().startswith("device,Current Socket Graphics Package Power (W),GPU")
        found = explain_directory(with_gpu_output(tmp_path, out.read_text()))
        assert found is not None and found.suspects == ("node3",)  # the stacks still decide
        assert found.meaning.endswith(
            "; GPU use when caught: "
            + "; ".join(f"node{i} {','.join([use] * 8)} %" for i in (1, 2, 3))
        ), found.meaning
    idle = (VERIFY / "rocm-smi-4.0.0-showuse-csv-8xmi300x-idle.csv").read_text()
    assert idle.splitlines()[:2] == ["device,GPU use (%),GFX Activity", "card0,0,203885505"]
    assert gpu_use("@@ evidence n t\n@@ gpus\n" + idle + "@@ ray logs\n") == ["0"] * 8


def test_nvidia_smi_and_amd_smi_use_are_read_and_an_unknown_tool_is_none() -> None:
    h100 = "nvidia-smi-590.48.01-h100-80gb-hbm3-query-gpu-all-fields-csv-load.csv"
    text = "@@ evidence n t\n@@ gpus\n" + (VERIFY / "real" / h100).read_text() + "@@ dmesg\n"
    assert gpu_use(text) == ["100"]  # a real H100 under load, "100 %" in the tool's CSV
    amd = (VERIFY / "real" / "amd-smi-metric-usage-json-list-w7700-partial.txt").read_text()
    assert gpu_use(f"@@ evidence n t\n@@ gpus\n{amd}\n") == ["42"]  # gfx_activity, a percentage
    assert gpu_use("@@ evidence n t\n@@ gpus\nno GPU tool on this node\n@@ dmesg\n") is None
