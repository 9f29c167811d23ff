"""Online draft-length choice, break-even acceptance and the collapse guard.

With per-token acceptance probability ``a`` and draft length ``k``, one verification pass
yields ``(1 - a**(k+1)) / (1 - a)`` tokens on average (Leviathan et al. 2023). It costs
``k`` draft passes plus one target pass over ``k + 1`` tokens. Both costs are measured as
the run goes, so the controller adapts to the pair, the device and the prompt, instead of
being tuned to any one of them.

Speculation collapses in two ways: the draft disagrees (acceptance below break-even), or the
draft agrees but costs too much (a draft pass close to a target pass). The guard judges the
*whole* step — draft passes, catch-up, verification and host time — against target-only
decoding, and while it is paused nothing is paid for the draft: no pass, no catch-up, no
head reading the target's rows (``DraftingTurn`` rests the drafter). It probes again after
a number of tokens that doubles each time a probe fails.

``DraftController`` is the hub: it owns the cost model (``costs.py``), the confidence
calibration (``calibration.py``) and the guard's measurements (``guard.py``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace

from app.engine.config import SpecConfig
from app.engine.events import GuardEvent, GuardReason
from app.engine.policy.calibration import ConfidenceCalibration, judged
from app.engine.policy.costs import CostModel
from app.engine.policy.guard import (
    EXPENSIVE_DRAFT,
    INTERFERED,
    MAX_PROBE_INTERVAL,
    NOISY_PROBE,
    Economics,
    GuardMemory,
    PauseDecision,
)
from app.engine.running_stats import Ema
from app.engine.step_record import StepRecord


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
        self._few_passes_at: int | None = None  # see ``few_passes``

    # --- what the draft said and what was accepted -----------------------------------------

    def observe(self, record: StepRecord) -> None:
        """Learn from one step: its whole cost, the draft's confidences and its agreement."""
        if not record.drafter:
            return
        if self.config.collapse_guard:  # a step's cost is the guard's evidence, read by no other
            self._observe_cost(record)
        if record.declined is not None:
            self.observe_declined(*record.declined)
        if record.proposed:
            lookup = record.draft_passes == 0
            self.observe_step(record.proposed, record.accepted, lookup=lookup)
            self.observe_confidences(list(record.confidences), record.accepted)

    def _observe_cost(self, record: StepRecord) -> None:
        """A step's whole cost, against target-only steps (``Economics``)."""
        if record.paid:
            # a long catch-up (after a pause or a new turn) is a one-off, not a step cost
            ms = record.step_ms - record.catch_up_ms + self._steady_catch_up_ms(record)
            self.observe_step_cost(
                paid_draft=True,
                tokens=record.verified,
                ms=ms,
                host_ms=record.host_ms,
                depth=record.depth,
                interfered=self._interfered(record),
                pass_ms=record.verify_ms,
                pass_tokens=record.proposed + 1,
            )
        else:
            self.observe_step_cost(
                paid_draft=False,
                tokens=record.verified,
                ms=record.step_ms,
                host_ms=record.host_ms,
                depth=record.depth,
                pass_ms=record.verify_ms,
            )

    def _interfered(self, record: StepRecord) -> bool:
        """The step's target pass, or its draft passes, took well over their price: something
        else had the cores. (Bursts landing on the draft passes alone had priced a Q2_K draft
        at half its target pass and paused three answers of sixteen for cost at 0.9 agreement.)
        """
        costs, depth = self.costs, record.depth
        # a lone target pass after a draft pass that proposed nothing is priced by lone passes
        # no draft pass preceded: on the tiny DFlash pair the draft pass's own aftermath (its
        # weights in the caches) made such a pass 1.6x its price on a quiet machine
        lone_after_draft = record.draft_passes > 0 and not record.proposed
        price = None if lone_after_draft else costs.verify_ms(record.proposed + 1, depth)
        if price is not None and price > 0 and record.verify_ms > INTERFERED * price:
            return True
        if record.draft_passes <= 0:
            return False
        single, first = costs.draft_ms(1, depth), costs.draft_ms(max(record.catch_up, 1), depth)
        if single is None or first is None:
            return False
        # a block drafter's pass is priced as its positions' shares: taken for one share, every
        # DFlash step on a quiet machine looked slowed, and the pause for cost it decided was
        # probed every 8 tokens (24 pauses in 256 tokens, 0.44x target-only, tiny pair)
        drafting = (first + (record.draft_passes - 1) * single) * record.positions_per_pass
        return drafting > 0 and record.draft_ms > INTERFERED * drafting

    def _steady_catch_up_ms(self, record: StepRecord) -> float:
        if record.catch_up <= 2:
            return record.catch_up_ms
        steady = self.costs.draft_ms(2, record.depth)
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
        self,
        *,
        paid_draft: bool,
        tokens: int,
        ms: float,
        host_ms: float,
        depth: int,
        interfered: bool = False,
        pass_ms: float | None = None,
        pass_tokens: int = 1,
    ) -> None:
        """A whole step's wall time at context ``depth``: drafting steps against target-only
        steps. ``pass_ms``: the step's own target pass over ``pass_tokens``, where measured."""
        economics = self.economics
        economics.host_ms.update(host_ms)
        if paid_draft:
            base = economics.target_only_ms(self._single_pass_ms(depth, pass_tokens, pass_ms))
            economics.observe_speculative(tokens, ms, base, interfered=interfered)
        elif pass_ms is not None:
            # the step's time beyond its own pass, not beyond the pass's price: a pass that a
            # burst slowed to 680 ms against a price of 21 had filed 659 ms of overhead, and
            # every drafting step after it was judged against a target-only token of 74 ms
            economics.observe_target_only(ms / max(tokens, 1), overhead_ms=max(ms - pass_ms, 0.0))
        else:
            economics.observe_target_only(ms / max(tokens, 1), self.costs.verify_ms(1, depth))

    def _single_pass_ms(self, depth: int, pass_tokens: int, pass_ms: float | None) -> float | None:
        """A single target pass's price for the target-only base a drafting step is judged
        against. While a draft drafts no single target pass is measured, so lone passes that
        a burst slowed keep their price: a draft as dear as its target measured 4.5x
        "target-only" against 119 ms where a quiet pass takes 9, and was never paused.

        Where the recent ones mostly ran slowed (``RecentMedian.ran_slowed``: their median
        over INTERFERED times the fastest; of two, such as the load's and the answer's first
        lone pass, the slower over the faster: one slowed sets half their median, 16.8 ms
        against a quiet 8.6), the price is their fastest, slowed as much as the step's own
        pass (``pass_ms`` over ``pass_tokens``) was against its fastest price: a step that
        the same burst slowed is judged against a target-only token slowed alike, one it
        missed against a quiet one."""
        verify = self.costs.verify
        recent = verify.recent_near(1, depth)
        if recent is None or not recent.ran_slowed(INTERFERED):
            return verify.ms(1, depth)
        quiet = verify.ms(1, depth, fastest=True)
        priced = verify.ms(pass_tokens, depth, fastest=True) if pass_ms is not None else None
        if quiet is None or pass_ms is None or not priced:
            return quiet
        return quiet * max(pass_ms / priced, 1.0)

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

    def keep_drafting_threshold(self, depth: int) -> float:
        """Cumulative-acceptance threshold for paying one more draft pass (adaptive only)."""
        return self.costs.keep_drafting_threshold(depth) if self.config.adaptive else 0.0

    def include_threshold(self, depth: int) -> float:
        return self.costs.include_threshold(depth) if self.config.adaptive else 0.0

    def next_draft_len(self, depth: int, *, confidence_driven: bool = False) -> int:
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
            gain = self.costs.speedup(a, k, depth)
            if gain > best * 1.005:  # prefer shorter blocks on (near) ties
                best_k, best = k, gain
        self.draft_len = best_k
        return best_k

    def break_even(self, depth: int, costs: CostModel | None = None) -> float:
        """Break-even agreement for the blocks actually drafted lately (a confidence-driven
        draft stops early: its ceiling says nothing about the blocks it drafts)."""
        return (costs or self.costs).break_even(self._block_length(), depth)

    def _block_length(self) -> int:
        """The blocks drafted lately, on average (the length in use before any)."""
        k = round(sum(self._drafted) / len(self._drafted)) if self._drafted else self.draft_len
        return max(k, 1)

    def pause_threshold(self, depth: int, costs: CostModel | None = None) -> float:
        """The agreement below which drafting pauses. A fixed length N is the person's choice:
        its own break-even. An adaptive length can shorten its blocks instead, so only an
        agreement at which no length pays (the shortest's break-even, the lowest) pauses it;
        a loss in wall time is caught by the measured step costs either way. ``costs``: the
        prices to judge by (the controller's own by default)."""
        if not self.config.adaptive:
            return self.break_even(depth, costs)
        shortest = (costs or self.costs).break_even(max(self.config.draft_min, 1), depth)
        return min(self.break_even(depth, costs), shortest)

    def few_passes(self, depth: int) -> bool:
        """Whether the verification prices near ``depth`` rest on a few passes
        (``CostModel.prices_unsettled``) and the last pause decided on such prices was
        followed by one more verification near it. A probe that verifies no block prices
        nothing: a draft at half its target's pass, whose thresholds at those prices
        proposed no token, was probed every 8 tokens for a catch-up and a draft pass each
        time (13 pauses in 128 tokens, 0.83x its target alone, against one pause and 0.975x
        before the rule); after such a probe, the next pause is an ordinary one."""
        if not self.costs.prices_unsettled(depth):
            return False
        seen = self._few_passes_at
        return seen is None or self.costs.verifications_near(depth) > seen

    def _prices(self, doubtful: bool) -> CostModel:
        """The prices a pause for cost is decided on: under interference, or while they rest
        on a few passes (``doubtful``), each pass at its fastest recent ones
        (``CostModel.priced_quiet``), so that costs measured in a burst, or a shape's dear
        first runs, do not decide it alone; a draft that pays at those is left to its
        measured steps."""
        return self.costs.priced_quiet() if doubtful else self.costs

    def _below_break_even(self, depth: int, costs: CostModel | None = None) -> bool:
        threshold = self.pause_threshold(depth, costs)
        window = self._window.maxlen or 1
        below = len(self._window) >= window and self.rolling_acceptance < threshold
        # deep in a context a draft may need 90 % agreement to pay: three steps at 60 %
        # already say it will not, and each further step is paid in full
        return below or (len(self._window) >= 3 and self._agreement_at_most() < threshold)

    # --- the guard -----------------------------------------------------------------------------

    def _pause(
        self,
        reason: GuardReason,
        ratio: float | None,
        depth: int,
        *,
        noisy: bool = False,
        few_passes: bool = False,
        prices: CostModel | None = None,
    ) -> PauseDecision:
        """Pause drafting. One decided on costs measured under interference (``noisy``), or
        on prices that rest on a few passes (``few_passes``), is probed again soon and does
        not lengthen the next pause: a burst of other programs had paused drafting on 8 of 16
        prompts for the rest of their answers, and on a GPU verifications priced by their
        first runs (2 tokens at 7.7 single passes) had it paused for every answer."""
        self.paused = True
        self._paused_tokens = 0
        if few_passes:
            self._few_passes_at = self.costs.verifications_near(depth)
        if noisy or few_passes:
            self.probe_in = NOISY_PROBE
        else:
            interval = self.config.probe_every * 2**self._failed_probes
            self.probe_in = min(interval, MAX_PROBE_INTERVAL)
            self._failed_probes += 1
        self.last_pause = PauseDecision(
            reason,
            self.rolling_acceptance,
            self.pause_threshold(depth),
            ratio,
            self.costs.draft_cost_fraction(depth),
            self.probe_in,
            window=len(self._window),
            never_pays=not self.can_ever_pay(depth, prices),
            noisy=noisy,
            few_passes=few_passes,
        )
        return self.last_pause

    def check_pause(self, depth: int) -> PauseDecision | None:
        if not self.config.collapse_guard or self.paused or not self.costs.verify.ready:
            return None
        window = self._window.maxlen or 1
        ratio = self.economics.ratio()
        # Where the cost lines price a draft too dear to pay, the steps' own speed overrules
        # them if it says drafting already pays: pass prices taken during a burst of other
        # programs had a draft running 4.6x the target-only speed paused for cost at step 11.
        measured_pays = self.economics.steps >= 2 and ratio is not None and ratio >= 1.0
        noisy = self.economics.noisy() or self.costs.prices_inflated(depth, INTERFERED)
        few = self.few_passes(depth)
        doubtful = noisy or few
        prices = self._prices(doubtful)
        if self.economics.steps >= 2 and not self.can_ever_pay(depth, prices) and not measured_pays:
            return self._pause(
                GuardReason.COST, ratio, depth, noisy=noisy, few_passes=few, prices=prices
            )
        # on noisy (or a few passes') prices, only where the agreement is below break-even at
        # the quiet prices too: a Q2_K draft priced in a burst at half a target pass needed
        # 0.97 agreement, and one answer had drafting paused "for disagreement" at 0.67 (its
        # quiet break-even: 0.5)
        if self._below_break_even(depth) and (
            not doubtful or self._below_break_even(depth, prices)
        ):
            reason = self._reason(depth, disagrees=True)
            cost = reason is GuardReason.COST
            if not (cost and measured_pays):
                return self._pause(
                    reason,
                    ratio,
                    depth,
                    noisy=cost and noisy,
                    few_passes=cost and few,
                    prices=prices,
                )
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
            threshold = self.pause_threshold(depth, prices)
            disagrees = bool(self._window) and self.rolling_acceptance < threshold
            reason = self._reason(depth, disagrees=disagrees)
            cost = reason is GuardReason.COST
            # measured, not priced: the prices only name the reason
            return self._pause(reason, ratio, depth, noisy=cost and noisy, prices=prices)
        if steps >= max(window, 3):
            self._failed_probes = 0  # drafting pays: the next pause starts from a short probe
        return None

    def guard(self, record: StepRecord) -> GuardEvent | None:
        """After one step: pause drafting when it stops paying, or probe again when due."""
        if self.paused:
            # target-only steps, or prompt lookups that went on while the model was paused
            counted = record.drafter and not record.draft_passes
            if not counted:
                return None
            waited = self.probe_in
            if self.tick_paused(max(record.verified, 1), record.depth):
                return GuardEvent(
                    False,
                    self.rolling_acceptance,
                    self.pause_threshold(record.depth),
                    record.step,
                    reason=GuardReason.PROBE,
                )
            if self.probe_in != waited and self.last_pause is not None:
                # the probe due now was skipped: said, so "probed again in N tokens" is not
                # left standing while the wait doubles
                skipped = replace(self.last_pause, probe_in=self.probe_in)
                return replace(skipped.event(record.step), probe_skipped=True)
            return None
        if record.paid:
            decision = self.check_pause(record.depth)
            return None if decision is None else decision.event(record.step)
        return None

    def pause_if_never_pays(
        self, step: int, depth: int, *, noisy: bool = False
    ) -> GuardEvent | None:
        """Before an answer drafts: where the costs measured near its depth say no draft
        length beats the target alone even with every drafted token accepted, pause now. The
        guard pauses such a draft after two steps paid in full, and a new answer starts
        unpaused when the last one ended on a probe: SmolLM2 F16 with its Q4_1 draft (a draft
        pass 90 % of a target pass) lost a tenth of a 9-token answer to two draft passes that
        way. ``noisy``: the costs were priced while other programs kept the machine busy, so
        the pause is probed again soon and not carried (bursts had paused one answer of 16
        at its first step for good, its draft priced at 86 % of a target pass)."""
        if (
            not self.config.collapse_guard
            or self.paused
            or not self.costs.measured_for_drafting(depth)
            or self.can_ever_pay(depth)
        ):
            return None
        noisy = noisy or self.costs.prices_inflated(depth, INTERFERED)
        few = self.few_passes(depth)
        prices = self._prices(noisy or few)
        if self.can_ever_pay(depth, prices):
            return None  # dear only at prices taken under a burst: its steps will say
        ratio = self.economics.ratio()
        decision = self._pause(
            GuardReason.COST, ratio, depth, noisy=noisy, few_passes=few, prices=prices
        )
        return decision.event(step)

    def carried_pause(self, step: int, depth: int) -> GuardEvent | None:
        """The pause for cost an earlier answer on this pair left (``restore``), said at the
        start of this one: an answer the target writes alone from its first token gets the
        reason too, not only "drafting paused for 49 of 49 tokens". (A served request is such
        an earlier answer: the chat message after it starts paused.)"""
        if not self.paused or self.last_pause is not None:
            return None
        self.last_pause = PauseDecision(
            GuardReason.COST,
            self.acceptance.value or 0.0,
            self.pause_threshold(depth),
            None,
            self.costs.draft_cost_fraction(depth),
            self.probe_in,
            never_pays=not self.can_ever_pay(depth),
        )
        return self.last_pause.event(step)

    def snapshot(self, *, busy_machine: bool = False) -> GuardMemory:
        """What this answer leaves for the next. Only a draft that costs half a target pass or
        more is too expensive whatever the prompt: its pause carries over. A pause for a hard
        prompt does not silence the next, nor one decided while other programs slowed the
        machine: a noisy one, or any in an answer that ran while they kept half a core or more
        busy (``busy_machine``), whose failed probes are not carried either. (A burst had priced
        the Q2_K draft at 1.8 target passes; the pause it decided was carried, and its probes
        skipped on that price, through the next 15 answers of 16.)"""
        few_at = self._few_passes_at
        if busy_machine:
            return GuardMemory(False, self.probe_in, 0, self.acceptance.value, few_at)
        last = self.last_pause
        cost = (
            self.paused
            and last is not None
            and last.reason is GuardReason.COST
            and not last.noisy
            and not last.few_passes
            and (last.draft_cost_fraction or 0.0) >= EXPENSIVE_DRAFT
        )
        return GuardMemory(cost, self.probe_in, self._failed_probes, self.acceptance.value, few_at)

    def restore(self, memory: GuardMemory | None) -> None:
        if memory is None:
            return
        if memory.acceptance is not None:
            self.acceptance.value = memory.acceptance
        self._failed_probes = memory.failed_probes
        self._few_passes_at = memory.few_passes_at
        if memory.paused_for_cost and self.config.collapse_guard:
            self.paused = True
            self._paused_tokens = 0
            self.probe_in = memory.probe_in

    def _reason(self, depth: int, *, disagrees: bool) -> GuardReason:
        """Why drafting stops paying. A draft costing half a target pass or more needs near-
        perfect agreement to pay: its break-even is high because of its price, so while it is
        mostly right the price is the reason given; a draft mostly wrong disagrees."""
        fraction = self.costs.draft_cost_fraction(depth)
        mostly_right = not self._window or self.rolling_acceptance >= 0.5
        if fraction is not None and fraction >= EXPENSIVE_DRAFT and mostly_right:
            return GuardReason.COST
        return GuardReason.DISAGREEMENT if disagrees else GuardReason.COST

    def can_ever_pay(self, depth: int, costs: CostModel | None = None) -> bool:
        """Whether any draft length could beat the target alone, by the costs at ``depth``
        (the controller's own, or ``costs``)."""
        return (costs or self.costs).can_ever_pay(max(self.config.draft_max, 1), depth)

    def _probe_would_lose(self, depth: int, costs: CostModel | None = None) -> bool:
        """By the costs at this depth (the controller's own, or ``costs``), no draft length
        can pay whatever the agreement; or, once a probe has failed, none pays at the
        agreement the draft last showed. A probe pays a catch-up over every token written
        while paused and then its steps in full, which deep in a context on a CPU once came
        to about a second."""
        if not self.can_ever_pay(depth, costs):
            return True
        if self._failed_probes < 2:
            return False
        # no block longer than those it drafted lately: a confidence-driven draft stops early
        longest = self._block_length() if self._drafted else max(self.config.draft_max, 1)
        agreement = self.acceptance.value or 0.0
        return (costs or self.costs).best_speedup(agreement, longest, depth) < 1.0

    def tick_paused(self, tokens: int, depth: int) -> bool:
        """Count tokens written while paused at context ``depth``; True when it is time to
        probe again."""
        self._paused_tokens += tokens
        if self._paused_tokens >= self.probe_in:
            last = self.last_pause
            # the probe of a pause decided on noisy or a few passes' prices
            decided_doubtful = last is not None and (last.noisy or last.few_passes)
            # prices at this depth that rest on a few passes judge at their fastest: a draft
            # that rarely drafts has few verifications near each new depth, and a SmolLM2
            # F16 target with its Q4_1 draft (a draft pass at 0.7 of a target pass) ran
            # every probe due, the last a catch-up of 98 tokens (0.3 s, a tenth of the
            # answer), after two had failed
            prices = self._prices(self.few_passes(depth))
            if (
                not decided_doubtful
                and self._failed_probes % 4
                and self._probe_would_lose(depth, prices)
            ):
                # skip this probe (every fourth one still runs, in case the costs or the text
                # changed) and wait twice as long. Never the probe of a pause that was decided
                # on noisy costs or on a few passes' prices: a paused draft is not priced
                # again, and a burst had priced a Q2_K draft at 1.2 target passes and had its
                # probes skipped for the last 41 tokens of an answer.
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
