"""Online draft-length choice, break-even acceptance and the collapse guard.

With per-token acceptance probability ``a`` and draft length ``k``, one verification pass
yields ``(1 - a**(k+1)) / (1 - a)`` tokens on average (Leviathan et al. 2023). It costs
``k`` draft passes plus one target pass over ``k + 1`` tokens. Both costs are measured as
the run goes, so the controller adapts to the pair, the device and the prompt, instead of
being tuned to any one of them.

Speculation collapses in two ways: the draft disagrees (acceptance below break-even), or the
draft agrees but costs too much (a draft pass close to a target pass). The guard judges the
*whole* step — draft passes, catch-up, verification and host time — against target-only
decoding, and while it is paused nothing is paid for the draft: no pass, no catch-up. It
probes again after a number of tokens that doubles each time a probe fails.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.config import SpecConfig
from app.engine.events import GuardEvent, GuardReason
from app.engine.running_stats import Ema, FadingShare, RecentMedian
from app.engine.sequences import common_prefix_length
from app.engine.step_record import StepRecord


def judged(confidences: Sequence[float | None], accepted: int) -> Iterator[tuple[float, bool]]:
    """(confidence, accepted?) of each drafted token the target judged: the accepted prefix
    and the first it refused; tokens without a confidence (prompt lookup) are skipped."""
    for index, confidence in enumerate(confidences[: accepted + 1]):
        if confidence is not None:
            yield confidence, index < accepted


def expected_tokens(acceptance: float, k: int) -> float:
    a = min(max(acceptance, 0.0), 0.999)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


# Context depth changes a pass's cost: every token in the batch attends to every cached one.
DEPTH_SCALE = 4096.0  # features in units near the data: tokens/16, depth/4096
SIZE_SCALE = 16.0
MIN_DEPTH_SPREAD = 512  # tokens between the shallowest and deepest cells to fit a depth slope
MAX_CELLS = 64  # (size, depth range) cells kept, the least recently measured dropped first
REFIT_EVERY = 128  # observations between refits of the shape while no new cell appears
DERIVED_FOR = 32  # observations a break-even or "can it pay" is kept for, within a depth range
DERIVED_STEPS = 4  # steps the same is kept for


def depth_range(depth: int) -> int:
    """Start of the depth range a pass is filed under: 128 tokens wide up to 4,096, then
    1/32 to 1/16 of the depth, so each range holds passes of about one price."""
    width = max(128, 1 << max(depth.bit_length() - 5, 0))
    return depth // width * width


Coefficients = tuple[float, float, float, float, float]


def _features(n_tokens: int, depth: float) -> Coefficients:
    size, deep = n_tokens / SIZE_SCALE, depth / DEPTH_SCALE
    return (1.0, size, deep, size * deep, _batched(n_tokens))


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
    """argmin |A b - y|^2 over b >= 0 from A'A and A'y, on the given columns (others 0): the
    unconstrained solution when it is feasible, else the best feasible one over the subsets
    of columns (five at most, so thirty-one small solves)."""
    best, best_loss = np.zeros(len(moment)), 0.0  # all zero: loss |y|^2, taken as 0 here
    ridge = 1e-9 * max(float(gram.trace()), 1e-12)
    subsets = [columns] + [
        [c for bit, c in enumerate(columns) if mask >> bit & 1]
        for mask in range((1 << len(columns)) - 2, 0, -1)
    ]
    for subset in subsets:
        index = np.array(subset)
        sub = gram[np.ix_(index, index)] + ridge * np.eye(len(subset))
        try:
            solved = np.linalg.solve(sub, moment[index])
        except np.linalg.LinAlgError:
            continue
        if (solved < 0.0).any():
            continue
        # |A b - y|^2 - |y|^2 = b'A'Ab - 2 b'A'y
        loss = float(solved @ gram[np.ix_(index, index)] @ solved - 2.0 * solved @ moment[index])
        if loss < best_loss:
            best = np.zeros(len(moment))
            best[index] = solved
            best_loss = loss
            if subset is columns:
                break  # the unconstrained optimum is feasible: nothing can beat it
    return best


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
        a, b, c, e, j = self._fitted()
        size, deep = n_tokens / SIZE_SCALE, depth / DEPTH_SCALE
        return max(a + b * size + c * deep + e * size * deep + j * _batched(n_tokens), 1e-6)

    def ms(self, n_tokens: int, depth: int = 0) -> float | None:
        if not self._cells:
            return None
        self._fitted()  # before the anchors are read: a refit clears them
        by_range = self._anchors.get(n_tokens)
        if by_range is None:
            by_range = self._anchors[n_tokens] = {}
        if depth != self._last_depth:
            self._last_depth, self._last_span = depth, depth_range(depth)
        span = self._last_span
        anchor = by_range.get(span)
        if anchor is None:
            anchor = by_range[span] = self._anchor(n_tokens, depth, span)
        return anchor * self._shape(n_tokens, depth)

    def _anchor(self, n_tokens: int, depth: int, span: int) -> float:
        """The nearest cell of this size, as a multiple of the fit at its depth (1: none)."""
        nearest = self._cells.get((n_tokens, span))
        if nearest is None:
            same = self._by_size.get(n_tokens)
            if not same:
                return 1.0
            nearest = min(same, key=lambda c: abs(c.depth - depth))
        return (nearest.median.value or 0.0) / self._shape(n_tokens, nearest.depth)

    def marginal(self, depth: int = 0) -> float:
        """Extra time for one more token in the batch at this depth (the fit's slope)."""
        _, size, _, both, _ = self._fitted()
        return (size + both * depth / DEPTH_SCALE) / SIZE_SCALE

    def measured_near(self, n_tokens: int, depth: int) -> bool:
        """Whether a pass of this size was measured close enough to ``depth`` to price it
        there: within 256 tokens, or an eighth of the depth."""
        reach = max(256.0, depth / 8)
        return any(abs(c.depth - depth) <= reach for c in self._by_size.get(n_tokens, ()))

    def sizes_measured_near(self, depth: int) -> list[int]:
        return [n for n in self._by_size if self.measured_near(n, depth)]


class CostModel:
    """Measured per-pass costs of the target and the draft, each by batch size and depth.

    A property of the pair and the device, so the engine keeps one across requests. The
    draft's catch-up (the tokens the target produced since the draft last ran) is a draft
    pass over several tokens, measured as such, so a long catch-up after a pause or a new
    chat turn never inflates the cost of a single draft pass.

    Questions are about the depth of the step being decided (``at_depth``, set by the loop
    each step) unless they name one; so are observations. A single target pass is rarely
    measured while drafting, so the loop runs one step target-only where none was measured
    near the depth it has reached (``needs_single_pass``): that step costs what target-only
    decoding would, and every later judgement compares with a price of this depth.
    """

    def __init__(self) -> None:
        self.verify = PassCost()
        self.draft = PassCost()
        self.depth = 0
        # Break-even by draft length (a 30-step bisection) and whether any length can pay
        # (sixteen prices): asked several times per step, kept within one depth range for a
        # few observations, as medians move little from one pass to the next.
        self._break_even: dict[int, float] = {}
        self._can_pay: dict[int, bool] = {}
        self._derived_range = 0
        self._unseen = 0  # observations since the derived figures were computed
        self._steps = 0  # steps since then

    def at_depth(self, depth: int) -> None:
        """The context depth the next questions and observations are about (once a step)."""
        self.depth = depth
        self._steps += 1
        if depth_range(depth) != self._derived_range or self._steps >= DERIVED_STEPS:
            self._derived_range = depth_range(depth)
            self._forget_derived()

    def _at(self, depth: int | None) -> int:
        return self.depth if depth is None else depth

    def observe_draft_pass(self, n_tokens: int, ms: float, depth: int | None = None) -> None:
        self._observed(self.draft.observe(n_tokens, ms, self._at(depth)))

    def observe_verify(self, n_tokens: int, ms: float, depth: int | None = None) -> None:
        self._observed(self.verify.observe(n_tokens, ms, self._at(depth)))

    def _observed(self, new_cell: bool) -> None:
        self._unseen += 1
        if new_cell or self._unseen >= DERIVED_FOR:
            self._forget_derived()

    def _forget_derived(self) -> None:
        self._break_even.clear()
        self._can_pay.clear()
        self._unseen = self._steps = 0

    def verify_ms(self, n_tokens: int, depth: int | None = None) -> float | None:
        return self.verify.ms(n_tokens, self._at(depth))

    def draft_ms(self, n_tokens: int = 1, depth: int | None = None) -> float | None:
        return self.draft.ms(n_tokens, self._at(depth))

    def marginal_verify_ms(self, depth: int | None = None) -> float:
        return self.verify.marginal(self._at(depth)) if self.verify.ready else 0.0

    def ready(self) -> bool:
        return self.draft.ready and self.verify.ready

    def needs_single_pass(self, depth: int | None = None) -> bool:
        """No single target pass was measured near this depth: run one step target-only."""
        return self.verify.ready and not self.verify.measured_near(1, self._at(depth))

    def measured_for_drafting(self, depth: int | None = None) -> bool:
        """Whether a drafting step's parts were measured near ``depth`` (a single target pass,
        a single draft pass, a verification of several tokens), not only extrapolated."""
        at = self._at(depth)
        verified = self.verify.sizes_measured_near(at)
        return self.draft.measured_near(1, at) and 1 in verified and len(verified) > 1

    def draft_cost_fraction(self, depth: int | None = None) -> float | None:
        """A single draft pass as a fraction of a single target pass."""
        single, draft = self.verify_ms(1, depth), self.draft_ms(1, depth)
        if single is None or draft is None or single <= 0:
            return None
        return draft / single

    def keep_drafting_threshold(self) -> float:
        """Paying one more draft pass is worth it while P(all accepted so far) exceeds this.

        An accepted token saves one single-token target pass; drafting it costs one draft
        pass plus its share of the verification batch.
        """
        single, draft = self.verify_ms(1), self.draft_ms(1)
        if single is None or draft is None:
            return 0.0
        return min((draft + self.marginal_verify_ms()) / single, 1.0)

    def include_threshold(self) -> float:
        """A token already drafted is worth verifying while P(all accepted) exceeds this."""
        single = self.verify_ms(1)
        if single is None:
            return 0.0
        return min(self.marginal_verify_ms() / single, 1.0)

    def step_ms(self, k: int, depth: int | None = None) -> float | None:
        """One drafting step at length k: k draft passes and one verification of k + 1."""
        step, draft = self.verify_ms(k + 1, depth), self.draft_ms(1, depth)
        if step is None or draft is None:
            return None
        return k * draft + step

    def speedup(self, acceptance: float, k: int, depth: int | None = None) -> float:
        """Expected tokens/sec of speculation with draft length k over target-only decoding."""
        single, cost = self.verify_ms(1, depth), self.step_ms(k, depth)
        if single is None or cost is None:
            return 1.0
        return expected_tokens(acceptance, k) * single / cost

    def best_speedup(self, acceptance: float, k_max: int) -> float:
        return max((self.speedup(acceptance, k) for k in range(1, max(k_max, 1) + 1)), default=1)

    def can_ever_pay(self, k_max: int) -> bool:
        """Whether any draft length up to ``k_max`` could beat the target alone even if every
        drafted token were accepted (a draft as slow as its target never can)."""
        known = self._can_pay.get(k_max)
        if known is None:
            known = self._can_pay[k_max] = self.best_speedup(0.999, k_max) >= 1.0
        return known

    def break_even(self, k: int) -> float:
        """Smallest per-token acceptance at which draft length k beats the target alone."""
        if not self.ready() or k <= 0:
            return 0.0
        known = self._break_even.get(k)
        if known is None:
            known = self._break_even[k] = self._bisect_break_even(k)
        return known

    def _bisect_break_even(self, k: int) -> float:
        single, cost = self.verify_ms(1), self.step_ms(k)
        if single is None or cost is None:
            return 0.0
        if single <= 0.0:
            return 1.0
        # speedup(a, k) >= 1  <=>  expected_tokens(a, k) >= cost / single; the ratio is
        # fixed for the bisection, so each of its 30 steps is one power, not a cost lookup
        needed = cost / single
        low, high = 0.0, 0.999
        if expected_tokens(high, k) < needed:
            return 1.0
        for _ in range(30):
            mid = (low + high) / 2
            if expected_tokens(mid, k) >= needed:
                high = mid
            else:
                low = mid
        return high


Promise = tuple[int, float]  # a length to verify, and the lookup tokens it is expected to yield


class LookupGate:
    """How many tokens of a prompt-lookup match to verify, if any, judged by the whole step.

    A lookup costs no draft pass, but verification does: on a CPU three thousand tokens
    deep, verifying 17 tokens costs four single target passes, so a lookup that is mostly
    refused (4 % of 412 tokens on a paraphrase) ran at 0.68x. Each length k is priced with
    the cost model at this depth: the tokens it is expected to yield, times a single target
    pass, against verifying k + 1 tokens; the best is verified only when it beats the
    target alone.

    A lookup is right or wrong as a whole more than token by token: where its first token
    is accepted, a copied run usually goes on. So it is judged by two rates, how often a
    match's first token is accepted and how often a token after an accepted one is: a match
    right half the time is still worth verifying long on a copy (each right one yields a
    whole block), and one right a few times in a hundred is not worth a single token.

    A match held back is not wasted: what the target writes next says whether it would
    have been accepted, so both rates keep learning for free, and lookups resume where the
    answer starts copying again. A held match whose first token was right is followed
    until the target leaves it: in a math answer a repeated number is matched often and
    the words after it seldom, and a rate learned only from verified matches kept its
    prior of nine in ten there, so three-token lookups were verified at a fifth accepted
    (SmolLM2 F16 + Q4_1: 0.89x of target-only, where a two-token verification costs two
    single passes).

    The first-token rate is kept twice, by what the last judged match did: one that agreed
    as far as it was judged says the answer is copying, and the next match usually is
    right too; one refused says the answer left the text (an edit, new prose), and the
    next match, found on a suffix that includes the new tokens, usually is a coincidence.
    One rate over both averaged a copied function body with the docstring before it, and
    the model kept drafting the body at 30 ms a token that lookups copy for free.

    Rates learned from held matches still over-promise where verification follows a streak:
    a rate that jumps after two agreeing matches is highest just before the streak ends. So
    each verified match's promise is set against what it delivered, and the promise of the
    next is scaled by the share kept (math-1, SmolLM2 F16 + Q4_1: 51 lookup tokens verified,
    7 accepted, 0.88x).
    """

    FIRST_RATE = 0.25  # a match's first token: recent matches count most
    # Before any evidence a match's first token is presumed right one time in four: outside
    # copies most matches are coincidences, and a held match learns from what the target
    # writes at no cost, so a copy shows itself within a match or two. (At 0.5, chat and
    # math answers on a pair whose 5-token verification costs two single passes verified
    # their first lookups and ran at 0.86-0.92x.)
    FIRST_PRIOR = 0.25
    # A length is verified only where its expected gain beats the target alone by a tenth:
    # the cost model prices the passes, not the host's work on each verified row nor the
    # draft model's catch-up after a lookup step.
    MIN_GAIN = 1.1
    CONTINUED_MEMORY = 64.0  # tokens after an accepted first one: older evidence fades
    # the share of its promised lookup tokens verification delivers starts at one, worth two
    # tokens of evidence; older promises fade past 32 tokens promised
    KEPT_PRIOR = 2.0
    KEPT_MEMORY = 32.0
    KEPT_RANGE = (0.1, 1.5)

    def __init__(self, costs: CostModel) -> None:
        self.costs = costs
        # a match's first token: after a match that agreed (True), after a refusal or at the
        # start (False); the first copy starts from what every match so far showed
        self._first = {
            False: Ema(value=self.FIRST_PRIOR, alpha=self.FIRST_RATE),
            True: Ema(alpha=self.FIRST_RATE),
        }
        self.copying = False  # the last judged match agreed as far as it was judged
        # tokens kept of those judged after an accepted one: a prior of 0.9 worth ten tokens
        self._continued = FadingShare(9.0, 10.0, self.CONTINUED_MEMORY)
        # (position, tokens, what verifying it would have promised) of a match held back
        self._held: tuple[int, list[int], Promise | None] | None = None
        # lookup tokens accepted, and promised, over the matches judged to the end
        self._kept = FadingShare(self.KEPT_PRIOR, self.KEPT_PRIOR, self.KEPT_MEMORY)
        self._pending: Promise | None = None  # the match being verified
        self._would: Promise | None = None  # the best length of the match last priced
        # a held match whose first tokens were right: (position, tokens, judged so far,
        # its promise while not yet judged to the promised length)
        self._followed: tuple[int, list[int], int, Promise | None] | None = None

    @property
    def first(self) -> Ema:
        """The first-token rate that judges the next match: the one for the present state."""
        return self._first[self.copying]

    @property
    def continued(self) -> float:
        """P(a token is accepted | the tokens before it in the match were)."""
        return min(self._continued.share, 0.995)

    @property
    def kept(self) -> float:
        """The share of the lookup tokens promised that verification delivered."""
        low, high = self.KEPT_RANGE
        return min(max(self._kept.share, low), high)

    def _promised(self, k: int) -> float:
        first, c = self.first.value or 0.0, self.continued
        return first * (1.0 - c**k) / (1.0 - c)

    def expected_tokens(self, k: int) -> float:
        """Tokens one verification of a k-token match yields, the target's own included."""
        return 1.0 + self.kept * self._promised(k)

    def length(self, available: int, k_max: int) -> int:
        """The length to verify of a match of ``available`` tokens; 0 holds it back."""
        single = self.costs.verify_ms(1)
        if single is None:
            return min(available, k_max)
        best_k, best = 0, 0.0
        for k in range(1, min(available, k_max) + 1):
            verify = self.costs.verify_ms(k + 1) or single
            gain = self.expected_tokens(k) * single / verify
            if gain > best * 1.005:  # shorter on (near) ties: a refusal then costs less
                best_k, best = k, gain
        self._would = (best_k, self._promised(best_k)) if best_k else None
        if best <= self.MIN_GAIN:
            return 0
        self._pending = self._would
        return best_k

    def best_rate(self, k_max: int) -> float | None:
        """Tokens per ms of verification expected of the best length up to ``k_max`` (None
        while a verification cost is unknown): what a lookup promises beside a model."""
        best = None
        for k in range(1, k_max + 1):
            verify = self.costs.verify_ms(k + 1)
            if verify is None or verify <= 0:
                return None
            rate = self.expected_tokens(k) / verify
            best = rate if best is None or rate > best else best
        return best

    def observe(self, proposed: int, accepted: int) -> None:
        """A match of ``proposed`` tokens of which the first ``accepted`` were accepted (all
        judged: a refusal after them, or none proposed past them)."""
        if proposed <= 0:
            return
        self._followed = None  # the verified match judges those positions itself
        self._judge(proposed, accepted)
        if self._pending is not None and self._pending[0] == proposed:
            self._kept.add(accepted, self._pending[1])
        self._pending = None

    def _judge(self, proposed: int, accepted: int) -> None:
        """A match of ``proposed`` tokens (at least one), the first ``accepted`` right."""
        self.first.update(1.0 if accepted else 0.0)
        self.copying = accepted >= proposed
        if self.copying and self._first[True].value is None:
            self._first[True].value = self._first[False].value
        if not accepted:
            return
        # after the first: the accepted ones, and the refused one if there was one
        judged = accepted if accepted < proposed else proposed - 1
        self._continue(accepted - 1, judged)

    def _continue(self, kept: int, judged: int) -> None:
        """``judged`` tokens that followed accepted ones in a match, ``kept`` of them right."""
        if judged > 0:
            self._continued.add(kept, judged)

    def hold(self, position: int, tokens: list[int], *, priced: bool = False) -> None:
        """A match not verified, proposed for the tokens from ``position`` on; ``priced``:
        the last ``length`` priced it, and what it would have delivered is judged too."""
        promise = self._would if priced else None
        self._pending = self._would = None
        if tokens:
            self._held = (position, list(tokens), promise)

    def judge_held(self, committed: Sequence[int]) -> None:
        """Compare the match held back with what the target wrote in its place."""
        self._follow(committed)
        if self._held is None:
            return
        position, tokens, promise = self._held
        written = committed[position : position + len(tokens)]
        if not written:
            return
        self._held = None
        accepted = common_prefix_length(tokens, written)
        following = self._followed is not None
        if accepted < len(written):
            self._judge(len(tokens), accepted)  # refused at ``accepted``
            if promise is not None and not following:
                self._kept.add(min(accepted, promise[0]), promise[1])
            return
        self._judge(accepted, accepted)  # all that was written so far agreed
        if following:
            return  # one match at a time: the next usually continues the followed one
        if promise is not None and accepted >= promise[0]:
            self._kept.add(promise[0], promise[1])
            promise = None
        if accepted < len(tokens):
            self._followed = (position, tokens, accepted, promise)

    def _follow(self, committed: Sequence[int]) -> None:
        """Judge the followed match's tokens the target has written since the last step."""
        if self._followed is None:
            return
        position, tokens, judged, promise = self._followed
        written = committed[position : position + len(tokens)]
        if len(written) <= judged:
            return
        agreed = judged + common_prefix_length(tokens[judged:], written[judged:])
        refused = agreed < len(written)
        self._continue(agreed - judged, agreed - judged + refused)
        done = refused or agreed == len(tokens)
        if promise is not None and (done or agreed >= promise[0]):
            self._kept.add(min(agreed, promise[0]), promise[1])
            promise = None
        self._followed = None if done else (position, tokens, agreed, promise)


class AnswerBias:
    """This answer's correction to the pair's calibration: a shift in log-odds, learned
    online from the tokens the target judges (the bias term of online Platt scaling).

    The calibration is learned over everything the pair has drafted, but acceptance at a
    given confidence depends on the text: in a story the draft's distribution is spread
    over words that the target happens to pick as well, in code a low confidence means
    a real fork. The shift starts at zero for each answer and follows what this answer's
    tokens show, so drafting lengthens where spread-but-right drafts keep being accepted
    and shortens where confident drafts keep failing.
    """

    RATE = 0.1  # log-odds moved per judged token, times its surprise
    LIMIT = 3.0

    def __init__(self) -> None:
        self.shift = 0.0

    def adjust(self, acceptance: float) -> float:
        a = min(max(acceptance, 1e-3), 1.0 - 1e-3)
        z = math.log(a / (1.0 - a)) + self.shift
        return 1.0 / (1.0 + math.exp(-z))

    def observe(self, predicted: float, accepted: bool) -> None:
        surprise = (1.0 if accepted else 0.0) - self.adjust(predicted)
        self.shift = min(max(self.shift + self.RATE * surprise, -self.LIMIT), self.LIMIT)


# Upper edges of the draft-confidence bins the calibration learns acceptance for.
_CONFIDENCE_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, 1.01)
_PRIOR_WEIGHT = 2.0  # pseudo-observations at the bin's own confidence before evidence
_BIN_MEMORY = 400.0  # older evidence fades once a bin has seen this many tokens


class ConfidenceCalibration:
    """P(a draft token is accepted | the draft's confidence in it), learned per pair.

    A draft's top probability is not its acceptance rate: a quantized copy of the target is
    often right with a spread distribution (accepted at confidence 0.4), a foreign draft can
    be confidently wrong. Each bin starts at its own confidence and moves to what is
    observed, so drafting is neither timid where the draft is right nor bold where it is not.
    """

    def __init__(self) -> None:
        self._accepted = [0.0] * len(_CONFIDENCE_EDGES)
        self._judged = [0.0] * len(_CONFIDENCE_EDGES)

    @staticmethod
    def _bin(confidence: float) -> int:
        for index, edge in enumerate(_CONFIDENCE_EDGES):
            if confidence < edge:
                return index
        return len(_CONFIDENCE_EDGES) - 1

    @staticmethod
    def _centre(index: int) -> float:
        low = _CONFIDENCE_EDGES[index - 1] if index else 0.0
        return min((low + _CONFIDENCE_EDGES[index]) / 2, 0.99)

    def observe(self, confidence: float, accepted: bool) -> None:
        index = self._bin(confidence)
        if self._judged[index] >= _BIN_MEMORY:
            self._judged[index] /= 2
            self._accepted[index] /= 2
        self._judged[index] += 1.0
        self._accepted[index] += 1.0 if accepted else 0.0

    def acceptance(self, confidence: float) -> float:
        index = self._bin(confidence)
        prior = self._centre(index)
        hits = self._accepted[index] + _PRIOR_WEIGHT * prior
        return hits / (self._judged[index] + _PRIOR_WEIGHT)

    @property
    def evidence(self) -> float:
        return sum(self._judged)


class Economics:
    """Realised speed of drafting steps against target-only decoding at the same depths.

    Each drafting step is compared with what target-only decoding costs where it ran: a
    single target pass priced at its depth plus a target-only step's own overhead (the
    part outside the pass). A base measured early in a long answer would flatter every
    drafting step after it, since every step costs more as the context grows.
    """

    def __init__(self, window: int) -> None:
        # (tokens, ms, target-only ms per token at that step's depth)
        self._spec: deque[tuple[int, float, float]] = deque(maxlen=window)
        self.base_ms = Ema(alpha=0.1)  # one target-only token, whole step
        self.overhead_ms = Ema(alpha=0.1)  # of it, the time beyond its target pass
        self.host_ms = Ema(alpha=0.1)  # a step's time outside llama_decode

    def observe_speculative(self, tokens: int, ms: float, base_ms: float | None) -> None:
        if base_ms is not None:
            self._spec.append((tokens, ms, base_ms))

    def observe_target_only(self, ms: float, single_ms: float | None = None) -> None:
        self.base_ms.update(ms)
        if single_ms is not None:
            self.overhead_ms.update(max(ms - single_ms, 0.0))

    def target_only_ms(self, single_ms: float | None) -> float | None:
        """One target-only token where a single target pass costs ``single_ms``."""
        if single_ms is None:
            return self.base_ms.value
        if self.overhead_ms.value is not None:
            return single_ms + self.overhead_ms.value
        if self.base_ms.value is not None:
            return self.base_ms.value
        return single_ms + (self.host_ms.value or 0.0)

    def clear(self) -> None:
        self._spec.clear()

    @property
    def steps(self) -> int:
        return len(self._spec)

    def ratio(self) -> float | None:
        """Measured speed of drafting steps over target-only decoding (1.0 = break-even)."""
        ms = sum(m for _, m, _ in self._spec)
        if ms <= 0:
            return None
        return sum(t * base for t, _, base in self._spec) / ms


MAX_PROBE_INTERVAL = 1024  # target-only tokens between two probes of a paused draft, at most
EXPENSIVE_DRAFT = 0.5  # a draft pass costing this fraction of a target pass or more


@dataclass(frozen=True)
class GuardMemory:
    """What a request leaves for the next one on the same pair: a pause for cost persists
    (the draft's price is a property of the pair), a pause for disagreement does not."""

    paused_for_cost: bool
    probe_in: int
    failed_probes: int
    acceptance: float | None


@dataclass(frozen=True)
class PauseDecision:
    reason: GuardReason  # disagreement or cost
    acceptance: float
    break_even: float
    speed_ratio: float | None
    draft_cost_fraction: float | None
    probe_in: int  # target-only tokens before the draft is probed again
    window: int = 0  # steps the agreement was measured over
    never_pays: bool = False  # the cost lines say no draft length can beat the target


class DraftController:
    """Chooses the next draft length and decides when speculation should pause."""

    def __init__(
        self,
        config: SpecConfig,
        costs: CostModel | None = None,
        calibration: ConfidenceCalibration | None = None,
    ) -> None:
        self.config = config
        self.costs = costs or CostModel()
        self.calibration = calibration or ConfidenceCalibration()
        self.acceptance = Ema(value=0.8, alpha=0.15)  # per drafted token, optimistic prior
        self._window: deque[tuple[int, int]] = deque(maxlen=config.guard_window)
        self._lookup_window: deque[tuple[int, int]] = deque(maxlen=config.guard_window)
        self._drafted: deque[int] = deque(maxlen=config.guard_window)  # block lengths drafted
        self.economics = Economics(config.guard_window)
        self.paused = False
        self._paused_tokens = 0
        self._failed_probes = 0
        self.probe_in = config.probe_every
        self.draft_len = config.draft_max
        self.last_pause: PauseDecision | None = None

    # --- what the draft said and what was accepted -----------------------------------------

    def observe(self, record: StepRecord) -> None:
        """Learn from one step: its whole cost, the draft's confidences and its agreement."""
        if not record.drafter:
            return
        if record.paid:
            # a long catch-up (after a pause or a new turn) is a one-off, not a step cost
            ms = record.step_ms - record.catch_up_ms + self._steady_catch_up_ms(record)
            self.observe_step_cost(
                paid_draft=True, tokens=record.verified, ms=ms, host_ms=record.host_ms
            )
        else:
            self.observe_step_cost(
                paid_draft=False, tokens=record.verified, ms=record.step_ms, host_ms=record.host_ms
            )
        if record.declined is not None:
            self.observe_declined(*record.declined)
        if record.proposed:
            lookup = record.draft_passes == 0
            self.observe_step(record.proposed, record.accepted, lookup=lookup)
            self.observe_confidences(list(record.confidences), record.accepted)

    def _steady_catch_up_ms(self, record: StepRecord) -> float:
        if record.catch_up <= 2:
            return record.catch_up_ms
        steady = self.costs.draft_ms(2)
        return record.catch_up_ms if steady is None else min(steady, record.catch_up_ms)

    def observe_confidences(self, confidences: list[float | None], accepted: int) -> None:
        """Record how the draft's own confidence compared with what was accepted."""
        for confidence, was_accepted in judged(confidences, accepted):
            self.calibration.observe(confidence, was_accepted)

    def observe_declined(self, confidence: float, would_be_accepted: bool) -> None:
        """A token the draft computed but did not propose, judged by the target's next token:
        free evidence that keeps a pessimistic calibration from starving itself."""
        self.calibration.observe(confidence, would_be_accepted)

    def observe_step(self, drafted: int, accepted: int, *, lookup: bool = False) -> None:
        """One verified block. A prompt lookup's block is judged apart: it paid no draft
        pass, and its own gate weighs it against the verification it costs
        (``LookupGate``); the agreement that pauses a draft model is the model's."""
        if drafted <= 0:
            return
        # a block cut short by a rejection says "accepted of accepted+1 tried"
        tried = accepted + 1 if accepted < drafted else drafted
        if lookup:
            self._lookup_window.append((accepted, tried))
            return
        self.acceptance.update(accepted / tried)
        self._window.append((accepted, tried))
        self._drafted.append(drafted)

    def observe_step_cost(
        self, *, paid_draft: bool, tokens: int, ms: float, host_ms: float
    ) -> None:
        """A whole step's wall time: drafting steps against target-only steps."""
        economics = self.economics
        economics.host_ms.update(host_ms)
        single = self.costs.verify_ms(1)
        if paid_draft:
            economics.observe_speculative(tokens, ms, economics.target_only_ms(single))
        else:
            economics.observe_target_only(ms / max(tokens, 1), single)

    @property
    def rolling_acceptance(self) -> float:
        """Per-token agreement over the recent window: accepted / tokens actually judged; the
        draft model's where it drafted, else the prompt lookup's."""
        window = self._window or self._lookup_window
        tried = sum(t for _, t in window)
        return sum(a for a, _ in window) / tried if tried else 0.0

    def _agreement_at_most(self, z: float = 1.0) -> float:
        """The window's agreement at its plausible best: the upper end of its Wilson score
        interval (one standard error), so that a few judged tokens pause nothing."""
        tried = sum(t for _, t in self._window)
        if not tried:
            return 1.0
        share = sum(a for a, _ in self._window) / tried
        z2 = z * z
        centre = share + z2 / (2 * tried)
        spread = z * math.sqrt(share * (1 - share) / tried + z2 / (4 * tried * tried))
        return (centre + spread) / (1 + z2 / tried)

    # --- drafting decisions ------------------------------------------------------------------

    def keep_drafting_threshold(self) -> float:
        """Cumulative-acceptance threshold for paying one more draft pass (adaptive only)."""
        return self.costs.keep_drafting_threshold() if self.config.adaptive else 0.0

    def include_threshold(self) -> float:
        return self.costs.include_threshold() if self.config.adaptive else 0.0

    def next_draft_len(self, *, confidence_driven: bool = False) -> int:
        """Draft length for the next block.

        A draft model reports its confidence per token, so adaptive drafting stops on the
        measured economics token by token and this only gives the ceiling. Prompt lookup has
        no confidence: the length maximising expected tokens per unit of measured cost is
        chosen instead.
        """
        cfg = self.config
        if not cfg.adaptive or not self.costs.ready() or confidence_driven:
            self.draft_len = cfg.draft_max
            return self.draft_len
        a = self.acceptance.value or 0.0
        best_k, best = cfg.draft_min, 0.0
        for k in range(cfg.draft_min, cfg.draft_max + 1):
            gain = self.costs.speedup(a, k)
            if gain > best * 1.005:  # prefer shorter blocks on (near) ties
                best_k, best = k, gain
        self.draft_len = best_k
        return best_k

    def break_even(self) -> float:
        """Break-even agreement for the blocks actually drafted lately (a confidence-driven
        draft stops early: its ceiling says nothing about the blocks it drafts)."""
        k = round(sum(self._drafted) / len(self._drafted)) if self._drafted else self.draft_len
        return self.costs.break_even(max(k, 1))

    def pause_threshold(self) -> float:
        """The agreement below which drafting pauses. A fixed length N is the person's choice:
        its own break-even. An adaptive length can shorten its blocks instead, so only an
        agreement at which no length pays (the shortest's break-even, the lowest) pauses it;
        a loss in wall time is caught by the measured step costs either way."""
        if not self.config.adaptive:
            return self.break_even()
        return min(self.break_even(), self.costs.break_even(max(self.config.draft_min, 1)))

    # --- the guard -----------------------------------------------------------------------------

    def _pause(self, reason: GuardReason, ratio: float | None) -> PauseDecision:
        self.paused = True
        self._paused_tokens = 0
        self.probe_in = min(self.config.probe_every * 2**self._failed_probes, MAX_PROBE_INTERVAL)
        self._failed_probes += 1
        self.last_pause = PauseDecision(
            reason,
            self.rolling_acceptance,
            self.pause_threshold(),
            ratio,
            self.costs.draft_cost_fraction(),
            self.probe_in,
            window=len(self._window),
            never_pays=not self.can_ever_pay(),
        )
        return self.last_pause

    def check_pause(self) -> PauseDecision | None:
        if not self.config.collapse_guard or self.paused or not self.costs.verify.ready:
            return None
        window = self._window.maxlen or 1
        ratio = self.economics.ratio()
        if self.economics.steps >= 2 and not self.can_ever_pay():
            return self._pause(GuardReason.COST, ratio)
        if len(self._window) >= window and self.rolling_acceptance < self.pause_threshold():
            return self._pause(self._reason(disagrees=True), ratio)
        if len(self._window) >= 3 and self._agreement_at_most() < self.pause_threshold():
            # deep in a context a draft may need 90 % agreement to pay: three steps at 60 %
            # already say it will not, and each further step is paid in full
            return self._pause(self._reason(disagrees=True), ratio)
        steps = self.economics.steps
        # A probe after a failed one is judged on fewer steps: drafting has already been seen
        # to lose on this pair, and every probing step it loses again is paid in full.
        judged_after = 3 if self._failed_probes else max(window, 3)
        # A fixed length that loses badly is paused at once; an adaptive one that starts with
        # long blocks on a hard prompt shortens them as its calibration learns, so it is
        # judged on a full window unless a probe has already failed.
        early = 3 if not self.config.adaptive or self._failed_probes else max(window, 3)
        if ratio is not None and (
            (steps >= early and ratio < 0.8) or (steps >= judged_after and ratio < 1.0)
        ):
            # slow because the draft disagrees, or because it costs too much while agreeing
            disagrees = bool(self._window) and self.rolling_acceptance < self.pause_threshold()
            return self._pause(self._reason(disagrees=disagrees), ratio)
        if steps >= max(window, 3):
            self._failed_probes = 0  # drafting pays: the next pause starts from a short probe
        return None

    def guard(self, record: StepRecord) -> GuardEvent | None:
        """After one step: pause drafting when it stops paying, or probe again when due."""
        if self.paused:
            # target-only steps, or prompt lookups that went on while the model was paused
            counted = record.drafter and not record.draft_passes
            if counted and self.tick_paused(max(record.verified, 1)):
                return GuardEvent(
                    False,
                    self.rolling_acceptance,
                    self.pause_threshold(),
                    record.step,
                    reason=GuardReason.PROBE,
                )
            return None
        if record.paid:
            decision = self.check_pause()
            return None if decision is None else self._paused_event(decision, record.step)
        return None

    def pause_if_never_pays(self, step: int) -> GuardEvent | None:
        """Before an answer drafts: where the costs measured near its depth say no draft
        length beats the target alone even with every drafted token accepted, pause now. The
        guard pauses such a draft after two steps paid in full, and a new answer starts
        unpaused when the last one ended on a probe: SmolLM2 F16 with its Q4_1 draft (a draft
        pass 90 % of a target pass) lost a tenth of a 9-token answer to two draft passes that
        way."""
        if (
            not self.config.collapse_guard
            or self.paused
            or not self.costs.measured_for_drafting()
            or self.can_ever_pay()
        ):
            return None
        return self._paused_event(self._pause(GuardReason.COST, self.economics.ratio()), step)

    def carried_pause(self, step: int) -> GuardEvent | None:
        """The pause for cost an earlier answer on this pair left (``restore``), said at the
        start of this one: an answer the target writes alone from its first token gets the
        reason too, not only "drafting paused for 49 of 49 tokens". (A served request is such
        an earlier answer: the chat message after it starts paused.)"""
        if not self.paused or self.last_pause is not None:
            return None
        self.last_pause = PauseDecision(
            GuardReason.COST,
            self.acceptance.value or 0.0,
            self.pause_threshold(),
            None,
            self.costs.draft_cost_fraction(),
            self.probe_in,
            never_pays=not self.can_ever_pay(),
        )
        return self._paused_event(self.last_pause, step)

    def _paused_event(self, decision: PauseDecision, step: int) -> GuardEvent:
        return GuardEvent(
            True,
            decision.acceptance,
            decision.break_even,
            step,
            reason=decision.reason,
            speed_ratio=decision.speed_ratio,
            draft_cost_fraction=decision.draft_cost_fraction,
            probe_in=decision.probe_in,
            window=decision.window,
            never_pays=decision.never_pays,
        )

    def snapshot(self) -> GuardMemory:
        # Only a draft that costs half a target pass or more is too expensive whatever the
        # prompt: its pause carries over. A pause for a hard prompt does not silence the next.
        last = self.last_pause
        cost = (
            self.paused
            and last is not None
            and last.reason is GuardReason.COST
            and (last.draft_cost_fraction or 0.0) >= EXPENSIVE_DRAFT
        )
        return GuardMemory(cost, self.probe_in, self._failed_probes, self.acceptance.value)

    def restore(self, memory: GuardMemory | None) -> None:
        if memory is None:
            return
        if memory.acceptance is not None:
            self.acceptance.value = memory.acceptance
        self._failed_probes = memory.failed_probes
        if memory.paused_for_cost and self.config.collapse_guard:
            self.paused = True
            self._paused_tokens = 0
            self.probe_in = memory.probe_in

    def _reason(self, *, disagrees: bool) -> GuardReason:
        """Why drafting stops paying. A draft costing half a target pass or more needs near-
        perfect agreement to pay: its break-even is high because of its price, so while it is
        mostly right the price is the reason given; a draft mostly wrong disagrees."""
        fraction = self.costs.draft_cost_fraction()
        mostly_right = not self._window or self.rolling_acceptance >= 0.5
        if fraction is not None and fraction >= EXPENSIVE_DRAFT and mostly_right:
            return GuardReason.COST
        return GuardReason.DISAGREEMENT if disagrees else GuardReason.COST

    def can_ever_pay(self) -> bool:
        """Whether any draft length could beat the target alone, by the measured costs."""
        return self.costs.can_ever_pay(max(self.config.draft_max, 1))

    def _probe_would_lose(self) -> bool:
        """By the costs at this depth, no draft length can pay whatever the agreement; or,
        once a probe has failed, none pays at the agreement the draft last showed. A probe
        pays a catch-up over every token written while paused and then its steps in full,
        which deep in a context on a CPU once came to about a second."""
        if not self.can_ever_pay():
            return True
        if self._failed_probes < 2:
            return False
        k_max = max(self.config.draft_max, 1)
        return self.costs.best_speedup(self.acceptance.value or 0.0, k_max) < 1.0

    def tick_paused(self, tokens: int = 1) -> bool:
        """Count tokens written while paused; True when it is time to probe again."""
        self._paused_tokens += tokens
        if self._paused_tokens >= self.probe_in:
            if self._failed_probes % 4 and self._probe_would_lose():
                # skip this probe (every fourth one still runs, in case the costs or the text
                # changed) and wait twice as long
                self._paused_tokens = 0
                self.probe_in = min(self.probe_in * 2, MAX_PROBE_INTERVAL)
                self._failed_probes += 1
                return False
            self.paused = False
            self._window.clear()
            self._lookup_window.clear()
            self._drafted.clear()
            self.economics.clear()
            return True
        return False
