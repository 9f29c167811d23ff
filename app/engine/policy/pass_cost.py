"""Milliseconds of one pass by batch size and context depth: medians of recent passes
filed in (size, depth range) cells, and the shape between them from a least-squares fit
with no coefficient below zero (a hand-written non-negative least squares)."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from app.engine.running_stats import RecentMedian

# Context depth changes a pass's cost: every token in the batch attends to every cached one.
DEPTH_SCALE = 4096.0  # features in units near the data: tokens/16, depth/4096
SIZE_SCALE = 16.0
MIN_DEPTH_SPREAD = 512  # tokens between the shallowest and deepest cells to fit a depth slope
MAX_CELLS = 64  # (size, depth range) cells kept, the least recently measured dropped first
REFIT_EVERY = 128  # observations between refits of the shape while no new cell appears


def depth_range(depth: int) -> int:
    """Start of the depth range a pass is filed under: 128 tokens wide up to 4,096, then
    1/32 to 1/16 of the depth, so each range holds passes of about one price."""
    width = max(128, 1 << max(depth.bit_length() - 5, 0))
    return depth // width * width


Coefficients = tuple[float, float, float, float, float]


def _features(n_tokens: int, depth: float) -> Coefficients:
    size, deep = n_tokens / SIZE_SCALE, depth / DEPTH_SCALE
    return (1.0, size, deep, size * deep, _batched(n_tokens))


def _shape_of(coef: Coefficients, n_tokens: int, deep: float) -> float:
    """The fit's price of a pass over ``n_tokens`` at ``deep`` (depth / DEPTH_SCALE)."""
    a, b, c, e, j = coef
    size = n_tokens / SIZE_SCALE
    return max(a + b * size + c * deep + e * size * deep + j * _batched(n_tokens), 1e-6)


def _reach(depth: int) -> float:
    """How far from ``depth`` a pass still prices one there: 256 tokens, or an eighth of it."""
    return max(256.0, depth / 8)


def _batched(n_tokens: int) -> float:
    """1 for a pass over several tokens: on a CPU llama.cpp leaves its one-token kernel
    there, and two tokens cost twice one (SmolLM2 F16: 11.4 ms, 21 ms, then 24 ms for five
    and 31 ms for nine), a step no line through the sizes can follow."""
    return 1.0 if n_tokens > 1 else 0.0


@dataclass
class _Cell:
    size: int
    depth: float  # the depth of its first pass: all of its passes lie within one range
    weight: float  # 1 / (first ms)^2: each cell counts by its relative error
    median: RecentMedian


def _nonnegative_least_squares(
    gram: np.ndarray, moment: np.ndarray, columns: list[int]
) -> np.ndarray:
    """argmin |A b - y|^2 over b >= 0 from A'A and A'y, on the given columns (others 0).

    The unconstrained solution where it is feasible; else Lawson and Hanson's active set
    method: a column joins the solution while the loss still falls along it, and the
    unconstrained solution on the columns in it is taken as far as it stays feasible,
    dropping a column that reaches zero. The optimum is the unconstrained solution on its
    own columns, solved as a search over every subset of them solves it (their order, the
    small ridge), in a few solves instead of up to thirty-one."""
    solution = np.zeros(len(moment))
    if not (np.isfinite(gram).all() and np.isfinite(moment).all()):
        return solution
    ridge = 1e-9 * max(float(gram.trace()), 1e-12)
    # a column joins only where the loss falls by more than rounding along it
    tolerance = 1e-12 * max(float(np.abs(moment).max(initial=0.0)), 1e-300)
    chosen: list[int] = []
    left = sorted(columns)
    if left:  # most refits: the unconstrained solution is feasible, and so the optimum
        trial = _solved_on(gram, moment, left, ridge)
        if trial is not None and (trial[left] >= 0.0).all():
            return trial
    for _ in range(3 * len(columns) + 1):  # a few more than the columns: rounding may cycle
        descent = moment - gram @ solution  # minus half the loss's gradient
        joining = [c for c in left if descent[c] > tolerance]
        if not joining:
            break
        best = max(joining, key=lambda c: descent[c])
        chosen, left = sorted([*chosen, best]), [c for c in left if c != best]
        while chosen:
            trial = _solved_on(gram, moment, chosen, ridge)
            if trial is None:  # singular: the last feasible solution stands
                return solution
            if (trial[chosen] > 0.0).all():
                solution = trial
                break
            # toward the trial as far as every coefficient stays feasible; the ones it
            # brings to zero leave
            reach = {c: _share_to_zero(solution[c], trial[c]) for c in chosen if trial[c] <= 0.0}
            first = min(reach, key=lambda c: reach[c])
            solution = solution + reach[first] * (trial - solution)
            solution[first] = 0.0
            leaving = [c for c in chosen if solution[c] <= 0.0]
            solution[leaving] = 0.0
            chosen = [c for c in chosen if c not in leaving]
            left = sorted([*left, *leaving])
    return solution


def _solved_on(
    gram: np.ndarray, moment: np.ndarray, chosen: list[int], ridge: float
) -> np.ndarray | None:
    """The unconstrained solution on the ``chosen`` columns (in order), the others 0; None
    where their system is singular."""
    index = np.array(chosen)
    trial = np.zeros(len(moment))
    try:
        trial[index] = np.linalg.solve(
            gram[np.ix_(index, index)] + ridge * np.eye(len(chosen)), moment[index]
        )
    except np.linalg.LinAlgError:
        return None
    return trial


def _share_to_zero(now: float, trial: float) -> float:
    """How far from ``now`` (at least 0) toward ``trial`` (at most 0) a coefficient reaches 0."""
    gap = now - trial
    return now / gap if gap > 0.0 else 0.0


class PassCost:
    """Milliseconds of one pass over ``n`` tokens at context depth ``d``.

    A target pass over a short prompt and the same pass 3,000 tokens deep are different
    prices (70 and 247 ms on a CPU: every token attends to every cached one), and so is
    verifying 17 tokens (160 and 995 ms). Passes are filed in cells by size and depth range,
    each keeping the median of its recent passes (one slowed by a scheduler hiccup moves it
    not at all). A least-squares fit of ms = a + b n + c d + e n d + j [n > 1] over the
    cells (each by its relative error, no coefficient below zero) gives the shape: what one
    more token, or a deeper context, adds. A price is the nearest cell of the asked size
    moved to the asked depth along the fit, or the fit alone where no pass of that size was
    measured. Refitted when a cell appears and every few observations: the cells carry the
    level, the fit only the shape.
    """

    def __init__(self) -> None:
        self._cells: OrderedDict[tuple[int, int], _Cell] = OrderedDict()
        self._by_size: dict[int, list[_Cell]] = {}
        self._coef: Coefficients | None = None
        self._since_fit = 0
        # by size, then depth range: the nearest cell's median over the fit there, so a
        # price is one product (asked for every length, every step)
        self._anchors: dict[int, dict[int, float]] = {}
        self._fitted_sizes: set[int] = set()
        self._last_depth, self._last_span = 0, 0
        self._fitted_depths = (0.0, 0.0)
        # by size, the cell that last answered ``measured_near``: asked every step, and the
        # same cell answers while the depth stays within its reach
        self._near: dict[int, _Cell] = {}

    def observe(self, n_tokens: int, ms: float, depth: int = 0) -> bool:
        """File one pass; True when it opened a new cell (something new was learned)."""
        if n_tokens <= 0 or not math.isfinite(ms) or ms < 0:
            return False
        depth = max(depth, 0)
        key = (n_tokens, depth_range(depth))
        cell = self._cells.get(key)
        created = cell is None
        if cell is None:
            cell = _Cell(n_tokens, float(depth), 1.0 / max(ms, 1e-3) ** 2, RecentMedian())
            self._cells[key] = cell
            self._by_size.setdefault(n_tokens, []).append(cell)
            if len(self._cells) > MAX_CELLS:
                _, dropped = self._cells.popitem(last=False)
                self._by_size[dropped.size].remove(dropped)
                if self._near.get(dropped.size) is dropped:
                    del self._near[dropped.size]
            if self._widens_fit(n_tokens, depth):
                self._coef = None  # a new size, or depth beyond the fitted span: refit now
        else:
            self._cells.move_to_end(key)
        self._since_fit += 1
        if self._since_fit >= REFIT_EVERY:
            self._coef = None
        self._anchors.pop(n_tokens, None)
        cell.median.update(ms)
        return created

    @property
    def ready(self) -> bool:
        return bool(self._cells)

    def _widens_fit(self, n_tokens: int, depth: int) -> bool:
        low, high = self._fitted_depths
        return n_tokens not in self._fitted_sizes or not low * 0.8 <= depth <= high * 1.25 + 256

    def _fitted(self) -> Coefficients:
        if self._coef is None:
            a, b, c, e, j = (float(x) for x in self._fit())
            self._coef = (a, b, c, e, j)
            self._since_fit = 0
            self._anchors.clear()
            self._fitted_sizes = set(self._by_size)
            depths = [c.depth for c in self._cells.values()]
            self._fitted_depths = (min(depths), max(depths))
        return self._coef

    def _fit(self) -> np.ndarray:
        cells = list(self._cells.values())
        design = np.array([_features(c.size, c.depth) for c in cells])
        ms = np.array([c.median.value or 0.0 for c in cells])
        root = np.sqrt([c.weight for c in cells])[:, None]
        weighted = design * root
        gram, moment = weighted.T @ weighted, weighted.T @ (ms * root[:, 0])
        # a column the cells do not vary (one size, one depth) cannot be told from the
        # intercept: leave it out rather than split the intercept's share at random
        spread = design.max(axis=0) - design.min(axis=0) > 1e-9
        # nor can depth from noise while the cells lie within a few hundred tokens: a noisy
        # five-token pass at depth 47 beside the warm-up's at 0 priced a single pass 150
        # deep at twice what it cost
        spread[2] = design[:, 2].max() - design[:, 2].min() >= MIN_DEPTH_SPREAD / DEPTH_SCALE
        columns = [0] + [c for c in (1, 2) if spread[c]]
        if spread[1] and spread[2]:
            columns.append(3)
        if len({c.size for c in cells if c.size > 1}) >= 2:
            columns.append(4)  # a step at two tokens, told from the slope by two sizes above it
        return _nonnegative_least_squares(gram, moment, columns)

    def _shape(self, n_tokens: int, depth: float) -> float:
        return _shape_of(self._fitted(), n_tokens, depth / DEPTH_SCALE)

    def ms(self, n_tokens: int, depth: int = 0, *, fastest: bool = False) -> float | None:
        """The price of a pass; ``fastest``: from the cells' fastest recent passes instead of
        their medians (``RecentMedian.fast``), the price with nothing else on the cores."""
        if not self._cells:
            return None
        self._fitted()  # before the anchors are read: a refit clears them
        if fastest:  # the block thresholds' ratios and noisy pauses: not kept
            quiet = self._anchor(n_tokens, depth, depth_range(depth), fastest=True)
            return quiet * self._shape(n_tokens, depth)
        return self._kept_anchor(n_tokens, depth) * self._shape(n_tokens, depth)

    def prices(self, first: int, last: int, depth: int) -> list[float] | None:
        """``ms(n, depth)`` for every n from ``first`` to ``last`` in one call: the lookup
        gate prices each length of a match every step, and sixteen calls of ``ms`` were
        most of the host's time per token while the guard paused a draft and lookups went
        on (0.05 ms of a 0.07 ms step, tiny pair)."""
        if not self._cells:
            return None
        coef, deep = self._fitted(), depth / DEPTH_SCALE
        return [
            self._kept_anchor(n, depth) * _shape_of(coef, n, deep) for n in range(first, last + 1)
        ]

    def _kept_anchor(self, n_tokens: int, depth: int) -> float:
        """``_anchor`` at ``depth``'s range, kept until a pass of this size is filed."""
        by_range = self._anchors.get(n_tokens)
        if by_range is None:
            by_range = self._anchors[n_tokens] = {}
        if depth != self._last_depth:
            self._last_depth, self._last_span = depth, depth_range(depth)
        span = self._last_span
        anchor = by_range.get(span)
        if anchor is None:
            anchor = by_range[span] = self._anchor(n_tokens, depth, span)
        return anchor

    def _anchor(self, n_tokens: int, depth: int, span: int, *, fastest: bool = False) -> float:
        """The nearest cell of this size, as a multiple of the fit at its depth (1: none)."""
        nearest = self._cells.get((n_tokens, span))
        if nearest is None:
            same = self._by_size.get(n_tokens)
            if not same:
                return 1.0
            nearest = min(same, key=lambda c: abs(c.depth - depth))
        level = nearest.median.fast if fastest else nearest.median.value
        return (level or 0.0) / self._shape(n_tokens, nearest.depth)

    def marginal(self, depth: int = 0) -> float:
        """Extra time for one more token in the batch at this depth (the fit's slope)."""
        _, size, _, both, _ = self._fitted()
        return (size + both * depth / DEPTH_SCALE) / SIZE_SCALE

    def spread_near(self, n_tokens: int, depth: int, *, samples: int = 3) -> float | None:
        """The recent spread (``RecentMedian.spread``) of the cell that prices a pass of this
        size at ``depth``, where it holds at least ``samples`` passes."""
        recent = self.recent_near(n_tokens, depth)
        return recent.spread if recent is not None and recent.count >= samples else None

    def recent_near(self, n_tokens: int, depth: int) -> RecentMedian | None:
        """The recent passes of the cell that prices a pass of this size at ``depth``."""
        cell = self._cells.get((n_tokens, depth_range(depth)))
        if cell is None:
            same = self._by_size.get(n_tokens)
            if not same:
                return None
            cell = min(same, key=lambda c: abs(c.depth - depth))
        return cell.median

    def measured_near(self, n_tokens: int, depth: int) -> bool:
        """Whether a pass of this size was measured close enough to ``depth`` to price it
        there: within 256 tokens, or an eighth of the depth."""
        reach = _reach(depth)
        near = self._near.get(n_tokens)
        if near is not None and abs(near.depth - depth) <= reach:
            return True
        for cell in self._by_size.get(n_tokens, ()):
            if abs(cell.depth - depth) <= reach:
                self._near[n_tokens] = cell
                return True
        return False

    def passes_near(self, depth: int, *, larger_than: int = 0, enough: int = 0) -> int:
        """The recent passes (each cell's ``RecentMedian.kept``) of more than
        ``larger_than`` tokens behind the prices near ``depth`` (``measured_near``'s reach);
        with ``enough``, counted only until they reach it (asked every step: the cells
        measured last, those near the step, are counted first)."""
        reach, total = _reach(depth), 0
        for cell in reversed(self._cells.values()):
            if cell.size > larger_than and abs(cell.depth - depth) <= reach:
                total += cell.median.kept
                if enough and total >= enough:
                    break
        return total

    def sizes_measured_near(self, depth: int) -> list[int]:
        return [n for n in self._by_size if self.measured_near(n, depth)]
