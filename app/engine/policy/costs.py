"""The cost model of a pair: the target's and the draft's pass costs at the depth of the
step being decided, and what follows from them: the expected tokens of a block, the
speed-up of a draft length, the break-even agreement and whether any length can pay."""

from __future__ import annotations

from app.engine.policy.pass_cost import PassCost, depth_range


def expected_tokens(acceptance: float, k: int) -> float:
    """Tokens one verification of a k-token block yields on average at per-token acceptance
    ``a``: ``(1 - a**(k+1)) / (1 - a)`` (Leviathan et al. 2023), ``a`` kept below one."""
    a = min(max(acceptance, 0.0), 0.999)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


DERIVED_FOR = 32  # observations a break-even or "can it pay" is kept for, within a depth range
DERIVED_STEPS = 4  # steps the same is kept for
# verifications of several tokens, near the depth, before their prices decide a pause alone:
# one answer's first steps, or its first at a new depth, are priced on fewer
SETTLED_VERIFICATIONS = 8


class CostModel:
    """Measured per-pass costs of the target and the draft, each by batch size and depth.

    A property of the pair and the device, so the engine keeps one across requests. The
    draft's catch-up (the tokens the target produced since the draft last ran) is a draft
    pass over several tokens, measured as such, so a long catch-up after a pause or a new
    chat turn never inflates the cost of a single draft pass.

    Every question and observation names the context depth it is about (the step's). A
    single target pass is rarely
    measured while drafting, so the loop runs one step target-only where none was measured
    near the depth it has reached (``needs_single_pass``): that step costs what target-only
    decoding would, and every later judgement compares with a price of this depth.
    """

    def __init__(
        self,
        verify: PassCost | None = None,
        draft: PassCost | None = None,
        *,
        fastest: bool = False,
    ) -> None:
        self.verify = PassCost() if verify is None else verify
        self.draft = PassCost() if draft is None else draft
        self._fastest = fastest  # priced from the fastest recent passes (``priced_quiet``)
        # Break-even by draft length (a 30-step bisection) and whether any length can pay
        # (sixteen prices): asked several times per step, kept within one depth range for a
        # few observations and steps (verifications), as medians move little from one pass
        # to the next.
        self._break_even: dict[int, float] = {}
        self._can_pay: dict[int, bool] = {}
        self._derived_range = 0
        self._unseen = 0  # observations since the derived figures were computed
        self._steps = 0  # steps since then

    def observe_draft_pass(self, n_tokens: int, ms: float, depth: int) -> None:
        self._observed(self.draft.observe(n_tokens, ms, depth))

    def observe_verify(self, n_tokens: int, ms: float, depth: int) -> None:
        """One target pass: a step's verification (a new step for the derived figures)."""
        self._steps += 1
        self._observed(self.verify.observe(n_tokens, ms, depth))
        if self._steps >= DERIVED_STEPS:
            self._forget_derived()

    def _derived_at(self, depth: int) -> None:
        """The derived figures kept are those of ``depth``'s range: forget them elsewhere."""
        if depth_range(depth) != self._derived_range:
            self._derived_range = depth_range(depth)
            self._forget_derived()

    def _observed(self, new_cell: bool) -> None:
        self._unseen += 1
        if new_cell or self._unseen >= DERIVED_FOR:
            self._forget_derived()

    def _forget_derived(self) -> None:
        self._break_even.clear()
        self._can_pay.clear()
        self._unseen = self._steps = 0

    def priced_quiet(self) -> CostModel:
        """The same passes, each priced at its cell's fastest recent ones rather than their
        median: what they cost while no other program had the cores. Other programs slow a
        draft pass and a target pass alike, but a burst lands on whichever cell is being
        measured at the time: the draft's, sampled every step, against a single target pass
        measured once in a few hundred tokens, priced a Q2_K draft at a whole target pass
        and paused one answer four times. A draft that cannot pay at these prices cannot
        pay on a quiet machine either. For questions only: it shares the passes, keeps no
        figures of its own between questions, and is asked where a pause for cost or a
        probe's skip is judged on noisy costs or on prices that rest on a few passes."""
        return CostModel(self.verify, self.draft, fastest=True)

    def verify_ms(self, n_tokens: int, depth: int) -> float | None:
        return self.verify.ms(n_tokens, depth, fastest=self._fastest)

    def verify_prices(self, first: int, last: int, depth: int) -> list[float | None]:
        """``verify_ms(n, depth)`` for n from ``first`` to ``last``, in one call."""
        if self._fastest:
            return [self.verify_ms(n, depth) for n in range(first, last + 1)]
        prices = self.verify.prices(first, last, depth)
        return [None] * (last - first + 1) if prices is None else list(prices)

    def draft_ms(self, n_tokens: int, depth: int) -> float | None:
        return self.draft.ms(n_tokens, depth, fastest=self._fastest)

    def marginal_verify_ms(self, depth: int) -> float:
        return self.verify.marginal(depth) if self.verify.ready else 0.0

    def ready(self) -> bool:
        return self.draft.ready and self.verify.ready

    def needs_single_pass(self, depth: int) -> bool:
        """No single target pass was measured near this depth: run one step target-only."""
        return self.verify.ready and not self.verify.measured_near(1, depth)

    def measured_for_drafting(self, depth: int) -> bool:
        """Whether a drafting step's parts were measured near ``depth`` (a single target pass,
        a single draft pass, a verification of several tokens), not only extrapolated."""
        verified = self.verify.sizes_measured_near(depth)
        return self.draft.measured_near(1, depth) and 1 in verified and len(verified) > 1

    def prices_inflated(self, depth: int, factor: float) -> bool:
        """Whether the passes behind a drafting step's price at ``depth`` (a single target
        pass, a single draft pass, the verifications measured there) mostly ran slowed: their
        recent median is more than ``factor`` times the fastest of them. A burst of other
        programs that outlasts a cell's few samples moves its median, so steps slowed by the
        same burst no longer look slow against it; the pause those prices decide is noisy
        (a Q2_K draft priced at 1.5 target passes under bursts had drafting paused for cost,
        not noisy, for the last 35 tokens of an answer)."""
        spreads = [self.draft.spread_near(1, depth)]
        spreads += [
            self.verify.spread_near(n, depth) for n in self.verify.sizes_measured_near(depth)
        ]
        return any(s is not None and s > factor for s in spreads)

    def prices_unsettled(self, depth: int) -> bool:
        """Whether the verifications of several tokens priced near ``depth`` rest on fewer
        than SETTLED_VERIFICATIONS passes in all: too few to tell a shape's price from its
        first runs (on a GPU, kernels loaded on a shape's first launch: the first check priced
        verifying 2 tokens at 7.7 single passes, 17 at 20) or from one slowed pass, and a
        paused draft is not priced again."""
        return self.verifications_near(depth) < SETTLED_VERIFICATIONS

    def verifications_near(self, depth: int) -> int:
        """The verifications of several tokens priced near ``depth``, counted up to
        SETTLED_VERIFICATIONS."""
        settled = SETTLED_VERIFICATIONS
        return self.verify.passes_near(depth, larger_than=1, enough=settled)

    def draft_cost_fraction(self, depth: int) -> float | None:
        """A single draft pass as a fraction of a single target pass."""
        single, draft = self.verify_ms(1, depth), self.draft_ms(1, depth)
        if single is None or draft is None or single <= 0:
            return None
        return draft / single

    def keep_drafting_threshold(self, depth: int) -> float:
        """Paying one more draft pass is worth it while P(all accepted so far) exceeds this.

        An accepted token saves one single-token target pass; drafting it costs one draft
        pass plus its share of the verification batch (the fitted slope of a verification
        over its size, ``marginal_verify_ms``: a shape fitted to the cells' medians, which
        a burst on several verifications in a row can still steepen). Both thresholds are
        ratios of passes' prices, so the single passes are priced at their fastest recent
        runs: other programs slow a draft pass and a target pass alike, but a burst lands on
        whichever is being timed. Under bursts a draft pass was priced at 95 ms against 31
        for the rest of an answer, the threshold was 1 and every later block one token
        long; and such blocks file no single draft pass again (their one pass reads two
        tokens after an acceptance), so that price stayed.
        """
        single, draft = (
            self.verify.ms(1, depth, fastest=True),
            self.draft.ms(1, depth, fastest=True),
        )
        if single is None or draft is None:
            return 0.0
        return min((draft + self.marginal_verify_ms(depth)) / single, 1.0)

    def include_threshold(self, depth: int) -> float:
        """A token already drafted is worth verifying while P(all accepted) exceeds this
        (a single target pass priced as in ``keep_drafting_threshold``)."""
        single = self.verify.ms(1, depth, fastest=True)
        if single is None:
            return 0.0
        return min(self.marginal_verify_ms(depth) / single, 1.0)

    def step_ms(self, k: int, depth: int) -> float | None:
        """One drafting step at length k: k draft passes and one verification of k + 1."""
        step, draft = self.verify_ms(k + 1, depth), self.draft_ms(1, depth)
        if step is None or draft is None:
            return None
        return k * draft + step

    def speedup(self, acceptance: float, k: int, depth: int) -> float:
        """Expected tokens/sec of speculation with draft length k over target-only decoding."""
        single, cost = self.verify_ms(1, depth), self.step_ms(k, depth)
        if single is None or cost is None:
            return 1.0
        return expected_tokens(acceptance, k) * single / cost

    def best_speedup(self, acceptance: float, k_max: int, depth: int) -> float:
        lengths = range(1, max(k_max, 1) + 1)
        return max((self.speedup(acceptance, k, depth) for k in lengths), default=1)

    def can_ever_pay(self, k_max: int, depth: int) -> bool:
        """Whether any draft length up to ``k_max`` could beat the target alone even if every
        drafted token were accepted (a draft as slow as its target never can)."""
        self._derived_at(depth)
        known = self._can_pay.get(k_max)
        if known is None:
            known = self._can_pay[k_max] = self.best_speedup(0.999, k_max, depth) >= 1.0
        return known

    def break_even(self, k: int, depth: int) -> float:
        """Smallest per-token acceptance at which draft length k beats the target alone."""
        if not self.ready() or k <= 0:
            return 0.0
        self._derived_at(depth)
        known = self._break_even.get(k)
        if known is None:
            known = self._break_even[k] = self._bisect_break_even(k, depth)
        return known

    def _bisect_break_even(self, k: int, depth: int) -> float:
        single, cost = self.verify_ms(1, depth), self.step_ms(k, depth)
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
