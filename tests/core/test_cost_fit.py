"""The shape of pass prices: a least-squares fit with no coefficient below zero, found by an
active set method and checked here against the search over every subset of columns that it
replaced. Synthetic cells only: no timing, no model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.engine.policy.pass_cost import PassCost, _features, _nonnegative_least_squares

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def every_subset(gram: np.ndarray, moment: np.ndarray, columns: list[int]) -> np.ndarray:
    """The slow reference: the unconstrained solution on each subset of the columns, the
    feasible one of least loss (all zero where none beats it)."""
    best, best_loss = np.zeros(len(moment)), 0.0
    ridge = 1e-9 * max(float(gram.trace()), 1e-12)
    for size in range(len(columns), 0, -1):
        for subset in itertools.combinations(sorted(columns), size):
            index = np.array(subset)
            sub = gram[np.ix_(index, index)]
            solved = np.linalg.solve(sub + ridge * np.eye(len(subset)), moment[index])
            if (solved < 0.0).any():
                continue
            loss = float(solved @ sub @ solved - 2.0 * solved @ moment[index])
            if loss < best_loss - 1e-12 * abs(best_loss):
                best, best_loss = np.zeros(len(moment)), loss
                best[index] = solved
    return best


def cells(rng: np.random.Generator, truth: tuple[float, ...], noise: float, count: int):
    """Passes of sizes 1-17 at depths up to 4,000, a single pass among them (the warm-up's),
    priced by ``truth`` (the fit's five coefficients, any sign) with relative noise."""
    sizes = rng.integers(1, 18, count)
    sizes[0] = 1
    depths = rng.integers(0, 4000, count).astype(float)
    design = np.array([_features(int(n), d) for n, d in zip(sizes, depths, strict=True)])
    ms = np.maximum(design @ np.array(truth), 0.05) * (1.0 + noise * rng.standard_normal(count))
    root = 1.0 / np.abs(ms)
    weighted = design * root[:, None]
    return weighted.T @ weighted, weighted.T @ (ms * root)


@pytest.mark.parametrize("seed", range(6))
def test_the_fit_is_the_best_feasible_one_over_every_subset_of_columns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    infeasible = 0
    for trial in range(60):
        # a CPU's shape, or one whose depth or size terms went negative in the noise
        truth = (2.0, 1.5, 0.8, 0.3, 0.4) if trial % 2 else tuple(rng.normal(0.5, 1.0, 5))
        gram, moment = cells(rng, truth, noise=0.05 + 0.3 * rng.random(), count=8 + trial % 20)
        columns = [0, *(c for c in (1, 2, 3, 4) if rng.random() < 0.85)]
        fitted = _nonnegative_least_squares(gram, moment, columns)
        expected = every_subset(gram, moment, columns)
        np.testing.assert_allclose(fitted, expected, rtol=1e-9, atol=1e-12)
        assert (fitted >= 0.0).all() and not fitted[[c for c in range(5) if c not in columns]].any()
        index = np.array(columns)
        unconstrained = np.linalg.solve(gram[np.ix_(index, index)], moment[index])
        infeasible += bool((unconstrained < 0.0).any())
    assert infeasible >= 10  # the constraint was active in many of them


def test_data_that_cannot_be_fitted_leaves_the_shape_flat() -> None:
    gram, moment = np.full((5, 5), np.nan), np.ones(5)
    assert not _nonnegative_least_squares(gram, moment, [0, 1, 2]).any()
    # prices that fall as batches grow: no size term, the intercept carries them
    costs = PassCost()
    for n, ms in ((1, 9.0), (4, 8.0), (9, 7.0), (16, 6.5)):
        for _ in range(3):
            costs.observe(n, ms, depth=0)
    assert costs.marginal(0) == 0.0
    assert costs.ms(16, 0) == pytest.approx(6.5, rel=0.05)
