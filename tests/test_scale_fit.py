"""The scale benchmark's growth fit (benchmarks/scale.py): the growth it names for a phase is
what the README's table claims, so it must tell the growths apart on five sizes."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.scale import (
    GROWTHS,
    failures,
    fit_growth,
    head_process_cpu,
    phase_cpu,
    process_kind,
    table,
)

SIZES = [2.0, 4.0, 8.0, 16.0, 32.0]


@pytest.mark.parametrize("growth", list(GROWTHS))
def test_the_fit_names_the_growth_behind_noisy_points(growth: str) -> None:
    rng = random.Random(growth)
    truth = GROWTHS[growth]
    ys = [3.0 + 0.5 * truth(n) + rng.uniform(-0.05, 0.05) for n in SIZES]
    fit = fit_growth(SIZES, ys)
    assert fit.growth == growth
    assert math.isclose(fit.at(1024), 3.0 + 0.5 * truth(1024), rel_tol=0.1, abs_tol=0.2)


def test_a_falling_phase_is_fitted_as_a_constant() -> None:
    fit = fit_growth(SIZES, [9.0, 8.0, 7.5, 7.0, 6.0])
    assert fit.growth == "constant" or fit.b == 0
    assert fit.at(1024) == pytest.approx(sum([9.0, 8.0, 7.5, 7.0, 6.0]) / 5)


def test_each_phase_gets_the_cpu_its_nodes_spent_within_it() -> None:
    timeline = [
        {"phase": "containers", "t": 10.0},
        {"phase": "ray-head", "t": 11.0},
        {"phase": "cluster-ready", "t": 20.0},
    ]
    samples = [
        (10.5, {"node1": 1.0}),
        (11.0, {"node1": 1.5, "node2": 0.25}),
        (15.0, {"node1": 3.0, "node2": 2.0, "node3": 1.0}),
        (19.5, {"node1": 4.5, "node2": 2.25}),  # node3's container already gone: carried
        (25.0, {"node1": 9.0, "node2": 9.0, "node3": 9.0}),  # after the phase: not counted
    ]
    spent = phase_cpu(samples, timeline, head="node1")
    assert spent["ray-head"] == {"head": 3.0, "busiest worker": 2.0, "all nodes": 6.0}
    assert spent["containers"] == {"head": 1.5, "busiest worker": 0.25, "all nodes": 1.75}
    assert "cluster-ready" not in spent  # the last mark opens no timed phase


def test_the_heads_cpu_is_split_by_the_process_that_spent_it() -> None:
    # command lines as `ps` shows them in a dev head container (Ray 2.x, clusterctl's waiter)
    assert (
        process_kind(
            "/usr/local/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp"
        )
        == "Ray GCS"
    )
    assert (
        process_kind(
            "python3 -c import hashlib, sys; ...; exec(compile(source.decode(), "
            '"clusterctl-ray-wait.py", "exec")) 9210:ab12 --selftest'
        )
        == "clusterctl waiter"
    )
    assert process_kind("ray::Probe.collective") == "Ray workers (probes, ranks)"
    assert (
        process_kind("/usr/bin/python3 .../ray/dashboard/agent.py --node-ip-address=127.0.1.1")
        == "dashboard agent"
    )
    assert process_kind("bash -c sleep infinity") == "other"
    timeline = [{"phase": "ray-head", "t": 0.0}, {"phase": "selftest", "t": 10.0},
                {"phase": "cluster-ready", "t": 20.0}]  # fmt: skip
    samples = [
        (0.0, {"10 Ray GCS": 1.0, "11 raylet": 0.5}),
        (9.0, {"10 Ray GCS": 4.0, "11 raylet": 1.5, "40 Ray workers (probes, ranks)": 1.0}),
        # worker 40 ended: it keeps its 1.0 s; worker 41 started in the self-test
        (19.0, {"10 Ray GCS": 5.0, "11 raylet": 2.0, "41 Ray workers (probes, ranks)": 3.0}),
    ]
    spent = head_process_cpu(samples, timeline)
    assert spent["ray-head"] == {"Ray GCS": 3.0, "raylet": 1.0, "Ray workers (probes, ranks)": 1.0}
    assert spent["selftest"] == {"Ray workers (probes, ranks)": 3.0, "Ray GCS": 1.0, "raylet": 0.5}


def test_a_failed_run_is_listed_not_fitted() -> None:
    def run(nodes: int, status: int, seconds: float) -> dict[str, object]:
        return {
            "nodes": nodes, "status": status, "cause": "" if status == 0 else "node9 left",
            "phases": {"ray-head": seconds}, "batch_cpu_s": 1.0, "batch_peak_rss_mib": 80.0,
            "script_bytes": 1000,
        }  # fmt: skip

    runs = [run(2, 0, 2.0), run(4, 0, 4.0), run(8, 0, 8.0), run(16, 1, 0.0)]
    printed = table(runs)
    assert "N=16" not in printed
    assert "| Ray head + every node joined | 2 | 4 | 8 |" in printed
    assert failures(runs) == "N=16: failed (status 1): node9 left"
