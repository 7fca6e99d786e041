"""The scale benchmark's growth fit (benchmarks/scale.py): the growth it names for a phase is
what the README's table claims, so it must tell the growths apart on five sizes."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.scale import GROWTHS, fit_growth, phase_cpu

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
