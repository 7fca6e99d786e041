"""doctor: every signature on a realistic log excerpt, and a real clean job with no finding."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from clusterctl.doctor.components import COMPONENTS
from clusterctl.doctor.scan import scan_files
from clusterctl.doctor.signatures import SIGNATURES
from tests.conftest import ROOT, run_cli

FIXTURES = ROOT / "tests" / "fixtures" / "doctor"
IDS = [sig.id for sig in SIGNATURES]


def test_there_are_at_least_25_signatures_each_with_an_excerpt() -> None:
    assert len(SIGNATURES) >= 25
    assert len(set(IDS)) == len(IDS)
    excerpts = {p.stem for p in (FIXTURES / "signatures").glob("*.log")}
    assert excerpts == set(IDS)


@pytest.mark.parametrize("sig_id", IDS)
def test_signature_is_found_in_its_excerpt(sig_id: str) -> None:
    hits = scan_files([FIXTURES / "signatures" / f"{sig_id}.log"])
    assert sig_id in {h.signature.id for h in hits}
    hit = next(h for h in hits if h.signature.id == sig_id)
    d = hit.as_dict()
    assert d["meaning"] and d["cause"] and d["fix"] and d["prevention"] and d["source"]
    assert "{" not in str(d["meaning"]) + str(d["cause"])  # placeholders were filled


def test_which_excerpts_are_real_lines() -> None:
    """The excerpts copied from real failure logs (signatures/README.md) are byte for byte a
    log of the corpus, whose source is cited; the others are written lines (issue 28)."""
    corpus = {
        p.read_bytes()
        for d in ("corpus", "real", "threads", "mined-lines")
        for p in (FIXTURES / d).glob("*.log")
    }
    real = {p.stem for p in (FIXTURES / "signatures").glob("*.log") if p.read_bytes() in corpus}
    from_threads = {p.stem for p in (FIXTURES / "threads").glob("*.log")}  # threads/README.md
    mined = {p.stem for p in (FIXTURES / "mined-lines").glob("*.log")}
    assert len(from_threads) == 25 and from_threads <= real
    assert real - from_threads == {
        "container-killed",  # real/README.md: captured on the dev cluster
        "vllm-tp-exceeds-ray-gpus",
        "cuda-oom",
        "shm-bus-error",
        "nccl-remote-error",
        "extension-built-for-other-torch",
        "pip-dependency-conflict",
        "transformers-newer-than-vllm",
        "nccl-shm-exhausted",
        "nccl-ib-completion-error",
        "ib-memlock",
        "nccl-no-socket-interface",
        "gloo-connect-full-mesh",
        "vllm-built-for-other-torch",
        "amd-visibility-mismatch",
        "ray-infeasible-request",
        "rendezvous-unreachable",
        "resume-world-size",
        "vllm-no-device",
        "ray-oom-kill",
        "nccl-watchdog-timeout",
        "clusterctl-fail",  # real/README.md: captured on the dev cluster, as the next three
        "port-in-use",
        "ray-version-mismatch",
        "slurm-cancelled",
        "slurm-time-limit",
        "rocr-with-hip",  # verl 0.5.0's own worker code, run here
        "rdma-provider-glibc",  # rdma-core's own libibverbs on an older glibc, run here
        "amd-sleep-mode",  # vLLM 0.7.3's own ModelConfig, run here
        *mined,  # mined-lines/README.md: one line of a thread each (issue 45)
    }
    assert real == set(IDS)  # no excerpt is written by hand


def test_excerpts_do_not_cross_trigger_many_signatures() -> None:
    for path in sorted((FIXTURES / "signatures").glob("*.log")):
        found = {h.signature.id for h in scan_files([path])}
        assert len(found) <= 3, (path.name, found)


def test_real_clean_job_has_no_finding() -> None:
    files = sorted(p for p in (FIXTURES / "clean-job").rglob("*") if p.is_file())
    assert len(files) >= 6
    assert scan_files(files) == []


def test_benign_ray_lines_are_not_failures() -> None:
    lines = [
        ("gcs_server.out", 1, "- Scheduling pending placement group count: 0"),
        (
            "dashboard_agent.log",
            2,
            "WARNING http_server_agent.py:79 -- Failed to bind to "
            "port 52365 (attempt 1/6). Retrying in 0.19s. Error: address already in use",
        ),
    ]
    from clusterctl.doctor.scan import scan_lines

    assert scan_lines(lines) == []


def test_clusterctl_fail_line_names_node_and_cause() -> None:
    hits = {
        h.signature.id: h for h in scan_files([FIXTURES / "signatures" / "clusterctl-fail.log"])
    }
    said = hits["clusterctl-fail"].as_dict()
    assert said["meaning"] == "clusterctl stopped the job: node2 failed in phase container"
    assert said["cause"].startswith("container cc-617-node2 exited while the job was running")
    assert said["node"] == "node2"


def test_cli_exit_status_and_json(tmp_path: Path) -> None:
    bad = run_cli("doctor", "--json", str(FIXTURES / "signatures" / "tuple-index-rocm.log"))
    assert bad.returncode == 1
    (finding,) = json.loads(bad.stdout)
    assert finding["id"] == "tuple-index-rocm" and finding["line"] == 4
    assert finding["prevention"] == "rule ray-2.12-rocm"
    clean = run_cli("doctor", str(FIXTURES / "clean-job"))
    assert clean.returncode == 0 and "no known failure signature" in clean.stdout
    table = run_cli("doctor", str(FIXTURES / "signatures" / "hip-oom.log"))
    assert table.returncode == 1 and "hip-oom" in table.stdout
    usage = run_cli("doctor")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_cli_reads_a_job_log_directory(tmp_path: Path) -> None:
    job_dir = tmp_path / "clusterctl-logs" / "verl-gsm8k-4242"
    shutil.copytree(FIXTURES / "clean-job", job_dir)
    (job_dir / "nodes" / "gpu-1" / "ray").mkdir(parents=True)
    shutil.copy(
        FIXTURES / "signatures" / "ray-version-mismatch.log",
        job_dir / "nodes" / "gpu-1" / "ray" / "raylet.err",
    )
    result = run_cli("doctor", "--job", "4242", "--json", cwd=tmp_path)
    assert result.returncode == 1
    assert [f["id"] for f in json.loads(result.stdout)] == ["ray-version-mismatch"]
    missing = run_cli("doctor", "--job", "999", cwd=tmp_path)
    assert missing.returncode == 2 and "no log directory for job 999" in missing.stderr


def test_real_ray_log_of_a_port_collision_is_found() -> None:
    """Captured on the dev cluster: a worker's dashboard agent could not bind 52365 because
    the head's agent on the same host holds it (several Ray nodes share one host there)."""
    hits = scan_files([FIXTURES / "real" / "worker-dashboard-agent-port-collision.log"])
    assert [h.signature.id for h in hits] == ["port-in-use"]
    assert hits[0].count >= 1 and "52365" in hits[0].line


def test_an_unmatched_traceback_is_unrecognised_never_silence(tmp_path: Path) -> None:
    """issue 28 item 4: the real verl failure of this project's first CPU run (verl 0.5.0 on the
    dev cluster before the gloo patch, tests/fixtures/doctor/real/README.md), its cause
    unknown to every signature: said as unrecognised, with NCCL's warnings of the file."""
    log = FIXTURES / "real" / "verl-no-nccl-backend-on-cpu.log"
    (hit,) = scan_files([log])
    d = hit.as_dict()
    assert d["id"] == "unrecognised"
    assert d["meaning"] == "an error no signature knows: RuntimeError"
    assert d["cause"] == "No available nccl backend found on device type cpu."
    # a known cause in the same log wins: the unrecognised line is not added
    known = tmp_path / "both.log"
    known.write_bytes(
        log.read_bytes() + (FIXTURES / "signatures" / "nccl-shm-exhausted.log").read_bytes()
    )
    assert [h.signature.id for h in scan_files([known])] == ["nccl-shm-exhausted"]


# issue 28 item 3: a whole run, the first failure in time first, with its node and rank
def test_a_run_directory_names_the_node_and_puts_the_specific_cause_first() -> None:
    # a real run: node2's container killed mid-workload (fixtures/doctor/node-killed-job)
    run = FIXTURES / "node-killed-job"
    hits = scan_files(sorted(p for p in run.rglob("*") if p.is_file()))
    assert [h.signature.id for h in hits] == ["container-killed", "clusterctl-fail"]
    first = hits[0].as_dict()
    assert first["node"] == "node2" and first["time"] is None
    # its FAIL line has no stamp of its own: it was written after the last one above it,
    # the workload's Ray start-up line (dated by the run's timeline for clusterctl's own)
    assert first["not_before"] == "2026-11-24 14:19:05.973000"


def test_findings_across_logs_are_ordered_by_their_stamps() -> None:
    # two real logs: sglang#3226 (2025-01-30, torch's [rank10] prefix) and MM-EUREKA#54
    # (2025-07-23); the earlier failure comes first whatever the order of the files
    corpus = FIXTURES / "corpus"
    later = corpus / "gcs__mm-eureka-54-empty-master-addr.log"
    earlier = corpus / "gloo__sglang-3226-connectfullmesh-multinode.log"
    hits = scan_files([later, earlier])
    assert [Path(h.file).name for h in hits][:1] == [earlier.name]
    assert hits[0].rank == "10" and hits[0].as_dict()["not_before"] == "2025-01-30 18:11:28"
    assert hits[-1].file == str(later) and hits[-1].time is not None
    assert hits[-1].time.date().isoformat() == "2025-07-23"


def test_docs_list_every_signature_with_its_source() -> None:
    from clusterctl.doctor.signatures import signatures_markdown

    docs = ROOT / "docs" / "doctor.md"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        docs.write_text(signatures_markdown())
    assert docs.read_text() == signatures_markdown(), "stale: UPDATE_GOLDEN=1 pytest"
    assert all(f"| `{sig.id}` |" in docs.read_text() for sig in SIGNATURES)


# issue 20 item 11: what a log says is never read as rich markup
def test_log_text_that_looks_like_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("RuntimeError: [/bold] broke on [rank3] and [red]\n")
    table = run_cli("doctor", str(log))
    assert table.returncode == 1 and "Traceback" not in table.stderr, table.stderr
    assert "[/bold] broke on [rank3] and [red]" in table.stdout.replace("\n", "")


def test_a_log_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("doctor", str(tmp_path / "nope.log"))
    assert result.returncode == 2 and f"no such file: {tmp_path / 'nope.log'}" in result.stderr


# ---- issue 45: how sure, set aside on contradiction, a triage for every log ----------------


def test_every_finding_names_its_component_certainty_and_a_command_to_confirm() -> None:
    for sig_id in ("bf16-needs-ampere", "nccl-system-error", "gpu-xid"):
        (hit,) = [h for h in scan_files([FIXTURES / "signatures" / f"{sig_id}.log"])]
        d = hit.as_dict()
        assert d["component"] and d["confirm"] and d["why"]
    bf16 = scan_files([FIXTURES / "signatures" / "bf16-needs-ampere.log"])[0].as_dict()
    assert (
        bf16["certainty"] == "certain" and bf16["component"] == "CUDA / HIP driver and GPU hardware"
    )
    # one line, several causes: said as likely, and the shared-memory cause is among them
    system = scan_files([FIXTURES / "signatures" / "nccl-system-error.log"])[0].as_dict()
    assert system["certainty"] == "likely" and "/dev/shm" in str(system["cause"])
    xid = scan_files([FIXTURES / "signatures" / "gpu-xid.log"])[0].as_dict()
    assert xid["meaning"] == "the NVIDIA driver logged Xid 48 on this node"


def test_a_cause_another_line_contradicts_is_set_aside(tmp_path: Path) -> None:
    """ROCm's "No HIP GPUs are available" reads as Ray's masking, unless the log also shows
    /dev/kfd never reached the container: then that cause is set aside, the other stated."""
    log = tmp_path / "amd.log"
    log.write_bytes(
        (FIXTURES / "mined-lines" / "kfd-not-in-container.log").read_bytes()
        + (FIXTURES / "signatures" / "no-hip-gpus.log").read_bytes()
    )
    said = {h.signature.id: h.as_dict() for h in scan_files([log])}
    assert said["kfd-not-in-container"]["certainty"] == "certain"
    assert said["no-hip-gpus"]["certainty"] == "set aside"
    assert said["no-hip-gpus"]["cause"] == "not known"
    assert "Unable to open /dev/kfd" in str(said["no-hip-gpus"]["why"])
    alone = scan_files([FIXTURES / "signatures" / "no-hip-gpus.log"])[0].as_dict()
    assert alone["certainty"] == "likely" and "Ray masked" in str(alone["cause"])


def test_nodes_on_different_nccl_releases_set_aside_a_one_host_cause(tmp_path: Path) -> None:
    """Two real logs as two nodes of one job: NCCL 2.21.5 (whose bootstrap found no socket
    interface) and 2.9.6. The versions differ: that is the finding, and the interface cause
    the line alone would get is set aside."""
    corpus = FIXTURES / "corpus"
    for node, name in (
        ("node1", "iface__open-r1-multimodal-7-bootstrap-no-socket-interface.log"),
        ("node2", "clean__nccl-tests-82-broadcast-no-libibverbs-warn.log"),
    ):
        (tmp_path / "nodes" / node).mkdir(parents=True)
        shutil.copy(corpus / name, tmp_path / "nodes" / node / "workload.log")
    hits = scan_files(sorted(tmp_path.rglob("*.log")))
    said = {h.signature.id: h.as_dict() for h in hits}
    assert said["nccl-version-skew"]["meaning"] == (
        "the nodes run different NCCL releases: 2.21.5, 2.9.6"
    )
    assert said["nccl-no-socket-interface"]["certainty"] == "set aside"
    alone = scan_files([corpus / "iface__open-r1-multimodal-7-bootstrap-no-socket-interface.log"])
    assert all(h.as_dict()["certainty"] != "set aside" for h in alone)


def test_a_traceback_cut_off_before_its_exception_names_the_component_of_its_frames(
    tmp_path: Path,
) -> None:
    """A log that ends inside a traceback (a paste cut short, a rank stopped mid-call): its
    frames say where it failed. The real vLLM traceback (fixtures/doctor/real), its last two
    lines (the raise and the exception) left out."""
    real = (FIXTURES / "real" / "vllm-0.7.3-sleep-mode-without-cuda.log").read_text()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(real.splitlines()[:22]) + "\n")
    (hit,) = scan_files([cut])
    d = hit.as_dict()
    assert d["certainty"] == "not known" and d["component"] == "vLLM / SGLang engine"
    assert hit.line_no == 3 and "its exception line is not in the log" in str(d["why"])
    # whole, its own lines name the cause (a signature), as before
    (whole,) = scan_files([FIXTURES / "real" / "vllm-0.7.3-sleep-mode-without-cuda.log"])
    assert whole.signature.id == "amd-sleep-mode" and whole.line_no == 23


@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "triage-lines").glob("*.log")), ids=lambda p: p.stem
)
def test_the_triage_finds_real_failure_lines_no_signature_knows(path: Path) -> None:
    """A program refusing its options, an NCCL WARN that something failed or was not found,
    a driver module that does not build: found, and given the component in the file's name
    (fixtures/doctor/triage-lines/README.md names each line's thread)."""
    (hit,) = scan_files([path])
    assert hit.signature.id == "unrecognised"
    want = path.stem.split("--")[0]
    assert hit.as_dict()["component"] == COMPONENTS[want].name


def test_unrecognised_names_the_component_and_the_first_error_in_time(tmp_path: Path) -> None:
    """No signature knows verl's CPU failure (real, fixtures/doctor/real): the triage still
    names NCCL from the line's own words, with the command that confirms a cause there."""
    (hit,) = scan_files([FIXTURES / "real" / "verl-no-nccl-backend-on-cpu.log"])
    d = hit.as_dict()
    assert d["certainty"] == "not known" and d["component"] == "NCCL / RCCL"
    assert "NCCL_DEBUG=INFO" in str(d["confirm"]) and "the line says 'nccl'" in str(d["why"])
    # the first failure in time, not the last traceback: a stamped line of another log that
    # comes earlier is the one named, whatever the order the files are given in
    from clusterctl.doctor.scan import scan_lines

    def line(path: Path, number: int) -> tuple[str, int, str]:
        return str(path), number, path.read_text().splitlines()[number - 1]

    later = line(FIXTURES / "real" / "worker-dashboard-agent-port-collision.log", 23)  # 2026
    earlier = line(
        FIXTURES / "corpus" / "rendezvous__accelerate-2468-master-addr-wrong-interface.log", 10
    )
    (first,) = scan_lines([later, earlier])
    assert first.file == earlier[0] and first.line_no == 10
    # DeepSpeed's launcher line names no component: said so, not guessed
    assert "nothing in the line names a component" in str(first.as_dict()["why"])
