"""The scale benchmark's growth fit (benchmarks/scale.py): the growth it names for a phase is
what the README's table claims, so it must tell the growths apart on five sizes."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.scale import GROWTHS, fit_growth

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
