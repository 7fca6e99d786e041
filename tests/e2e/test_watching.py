"""Watching a job while it starts (issue 44): `submit --wait` on the real dev cluster shows the
phases, the nodes through the preflight and Ray, and the self-test's parts as they come,
one plain line per change in a pipe and a live panel on a terminal (tmux's, its screens
captured), then the line `status` would say."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.test_jobs import CPU_EXAMPLE

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("dev_cluster")]


def test_submit_wait_in_a_pipe_prints_a_line_per_change(tmp_path: Path) -> None:
    ran = run_cli(
        "submit", str(CPU_EXAMPLE), "--wait", "-o", str(tmp_path / "b"),
        "--set", "workload.command=bash -c 'exit 3'", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    lines = ran.stdout.splitlines()
    job = re.fullmatch(r"submitted job (\d+) \(.*\)", lines[0])
    assert job, lines[0]
    said = "\n".join(lines)
    for phase in ("setup", "preflight", "containers", "ray-head", "selftest", "workload"):
        assert re.search(rf"^phase: {phase} \(\+\d+\.\ds\)$", said, re.M), (phase, said)
    assert "ray: 3/3 nodes alive" in lines
    assert any(line.startswith("selftest: gloo all-reduce 16 MB over 3 ranks") for line in lines)
    # phases in the order they came, each once
    phases = [line.split()[1] for line in lines if line.startswith("phase: ")]
    assert phases.index("preflight") < phases.index("selftest") < phases.index("workload")
    assert len(phases) == len(set(phases))
    assert lines[-2] == (
        f"job {job.group(1)} failed with status 3: node node1: the command workload exited "
        f"with status 3; see ./clusterctl-logs/cpu-smoke-{job.group(1)}/workload.log"
    )
    page = tmp_path / "clusterctl-logs" / f"cpu-smoke-{job.group(1)}" / "report.html"
    assert lines[-1] == f"report: {page.relative_to(tmp_path)}"
    seen_in_chromium(page, tmp_path, failed="node1")


def seen_in_chromium(page: Path, tmp_path: Path, failed: str | None) -> None:
    """The job's page as headless Chromium renders it: every part there, in its DOM and on
    the screenshot (the failed node's red mark drawn at the end of its row)."""
    from PIL import Image

    chromium = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"file://{page}"]
    dom = subprocess.run(
        [*chromium[:-1], "--dump-dom", chromium[-1]], capture_output=True, text=True, timeout=120
    ).stdout
    for part in ("outcome", "to-workload", "phases", "preflight-table", "pairs", "figures",
                 "doctor", *(["failed-node", "failed-mark"] if failed else [])):  # fmt: skip
        assert f'id="{part}"' in dom, part
    if failed:
        assert f'<b id="failed-node">{failed}</b>' in dom
    else:
        assert '<span class="ok" id="outcome">succeeded</span>' in dom
        assert 'id="failed-mark"' not in dom
    assert "<script" not in dom  # a record's text is never markup
    shot = tmp_path / "report.png"
    subprocess.run(
        [*chromium[:-1], f"--screenshot={shot}", "--window-size=1000,900", chromium[-1]],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    colours = dict((c, n) for n, c in Image.open(shot).convert("RGB").getcolors(1 << 24) or [])
    assert (colours.get((255, 0, 0), 0) > 50) == bool(failed)  # the failed node's mark
    assert colours.get((0x4E, 0x79, 0xA7), 0) > 10  # the first phase's colour


def test_submit_wait_on_a_terminal_shows_a_live_panel(tmp_path: Path) -> None:
    session = f"cc-{uuid.uuid4().hex[:8]}"
    command = f"clusterctl submit {CPU_EXAMPLE} --wait -o {tmp_path / 'b'}; echo exit=$?; sleep 60"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "30", "-c", str(tmp_path),
         command],
        check=True,
    )  # fmt: skip
    screens: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout
            screens.append(screen)
            if "exit=" in screen:
                break
            time.sleep(0.3)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    (tmp_path / "screens.txt").write_text("\n----\n".join(screens))
    last = screens[-1]
    shown = re.search(r"job \d+ succeeded\nreport: (\S+report\.html)\nexit=0", last)
    assert shown, last
    seen_in_chromium(tmp_path / shown.group(1), tmp_path, failed=None)
    live = [s for s in screens if re.search(r"^phase\s+\S+ for \d+s", s, re.M)]
    assert live, "no live panel seen"
    assert any(re.search(r"^ray\s+\d/3 nodes alive", s, re.M) for s in live)
    assert any(re.search(r"^selftest\s+", s, re.M) for s in live)
    # the panel goes when the job ends (transient): no panel row left above the last line
    assert not re.search(r"^phase\s+", last, re.M)
