"""The guard's prices while other programs come and go: a pass is only ever slowed by them,
so a burst moves a cell's recent median, not the fastest of its longer stretch, and a pause
for cost is not decided on prices taken in a burst alone."""

from __future__ import annotations

import pytest

from app.engine.config import SpecConfig
from app.engine.policy.controller import DraftController
from app.engine.policy.guard import NOISY_PROBE, PauseDecision
from app.engine.running_stats import RecentMedian

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_a_burst_longer_than_the_recent_passes_moves_their_median_not_their_fast_price() -> None:
    burst = RecentMedian()
    for ms in [float(ms) for ms in range(20, 30)] + [150.0] * 7:
        burst.update(ms)
    assert burst.value == 150.0  # the median of the last 7: all in the burst
    assert burst.fast == 21.0  # the second fastest of the stretch
    assert burst.spread == pytest.approx(150.0 / 21.0)
    assert burst.count == 7

    dear = RecentMedian()
    for _ in range(17):
        dear.update(150.0)
    assert dear.value == dear.fast == 150.0 and dear.spread == 1.0

    once_short = RecentMedian()  # one pass timed short by chance does not set the price
    for ms in [5.0, 100.0, 101.0, 102.0]:
        once_short.update(ms)
    assert once_short.fast == 100.0 and once_short.spread == pytest.approx(1.005)


def _controller(draft_passes_ms: list[float], *, depth: int = 40) -> DraftController:
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    costs = controller.costs
    for ms in draft_passes_ms:
        costs.observe_draft_pass(1, ms, depth)
    for _ in range(5):
        costs.observe_verify(1, 100.0, depth)
        costs.observe_verify(3, 105.0, depth)
        costs.observe_verify(5, 110.0, depth)
    return controller


QUIET_THEN_BURST = [20.0, 22.0, 21.0, 20.0, 21.0, 22.0, 150.0, 155.0, 150.0, 160.0, 152.0]
DEAR_THROUGHOUT = [150.0, 155.0, 150.0, 160.0, 152.0, 151.0, 150.0, 153.0, 150.0, 151.0, 152.0]


def test_a_draft_dear_only_at_prices_taken_in_a_burst_drafts_from_its_first_step() -> None:
    """The Q2_K draft, priced at a whole target pass by passes a burst slowed, had one answer
    paused before its first step and three times after; at its fastest recent passes it costs
    a fifth of a target pass and may draft. A draft that costs that much throughout is paused
    before it drafts, as before."""
    burst = _controller(QUIET_THEN_BURST)
    assert not burst.can_ever_pay(40)  # at the median prices it never pays
    assert burst.pause_if_never_pays(step=0, depth=40) is None
    assert not burst.paused

    dear = _controller(DEAR_THROUGHOUT)
    event = dear.pause_if_never_pays(step=0, depth=40)
    assert event is not None and event.paused and event.reason == "cost"
    assert dear.last_pause is not None and not dear.last_pause.noisy
    assert dear.last_pause.never_pays


def _after_losing_steps(draft_passes_ms: list[float], steps: int) -> PauseDecision | None:
    controller = _controller(draft_passes_ms)
    controller.economics.observe_target_only(100.0, 100.0)
    for _ in range(steps):  # drafting steps that lost: 2 tokens in 400 ms against 100 per token
        controller.economics.observe_speculative(2, 400.0, 100.0)
        decision = controller.check_pause(40)
        if decision is not None:
            return decision
    return None


def test_a_loss_on_noisy_prices_is_paused_by_the_measured_steps_and_probed_again_soon() -> None:
    """Prices taken in a burst no longer pause drafting after two steps by themselves; the
    measured steps, losing by half, pause it after a full window, as noisy (tried again in a
    few tokens). A draft dear throughout is paused by its prices after two steps, not noisy."""
    burst = _after_losing_steps(QUIET_THEN_BURST, steps=2)
    assert burst is None
    burst = _after_losing_steps(QUIET_THEN_BURST, steps=8)
    assert burst is not None and burst.reason == "cost" and burst.noisy
    assert burst.probe_in == NOISY_PROBE and not burst.never_pays

    dear = _after_losing_steps(DEAR_THROUGHOUT, steps=2)
    assert dear is not None and dear.reason == "cost" and not dear.noisy
    assert dear.probe_in == 16 and dear.never_pays


def test_an_agreement_below_break_even_only_at_burst_prices_does_not_pause_for_cost() -> None:
    """A draft agreeing 6 times in 10 is below the break-even that a draft priced at 1.5 target
    passes needs, not below a fifth of a pass's: under a burst it drafts on; priced at 1.5
    throughout, it pauses for cost."""

    def pause(draft_passes_ms: list[float]) -> PauseDecision | None:
        controller = _controller(draft_passes_ms)
        controller.economics.observe_target_only(100.0, 100.0)
        for _ in range(8):
            controller.observe_step(4, 2)  # two accepted of three tried, each step
        return controller.check_pause(40)

    assert pause(QUIET_THEN_BURST) is None
    dear = pause(DEAR_THROUGHOUT)
    assert dear is not None and dear.reason == "cost" and not dear.noisy


def test_a_pause_for_disagreement_is_judged_at_the_quiet_break_even_under_a_burst() -> None:
    """A draft priced in a burst at 45 % of a target pass (its quiet passes: 20 %) needs 0.75
    agreement to pay, not 0.5: agreeing 2 times in 3 it drafts on where its prices are noisy,
    and pauses for disagreement, as before, where it costs 45 % throughout. A draft agreeing
    once in ten pauses for disagreement under the burst too, not noisy."""

    def pause(draft_passes_ms: list[float], accepted: int) -> PauseDecision | None:
        controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
        costs = controller.costs
        for ms in draft_passes_ms:
            costs.observe_draft_pass(1, ms, 40)
        for _ in range(5):
            for size, ms in ((1, 100.0), (2, 130.0), (3, 160.0), (5, 200.0)):
                costs.observe_verify(size, ms, 40)
        for _ in range(8):
            controller.observe_step(4, accepted)
        return controller.check_pause(40)

    quiet_then_burst = [20.0, 21.0, 22.0, 20.0, 21.0, 22.0, 45.0, 46.0, 45.0, 47.0, 45.0]
    assert pause(quiet_then_burst, accepted=2) is None
    dear = pause([45.0, 46.0, 45.0, 47.0, 45.0, 46.0, 45.0], accepted=2)
    assert dear is not None and dear.reason == "disagreement" and not dear.noisy
    assert dear.break_even > 0.7
    wrong = pause(quiet_then_burst, accepted=0)
    assert wrong is not None and wrong.reason == "disagreement" and not wrong.noisy


def _dear_draft_priced(single_target_passes: list[float]) -> DraftController:
    """A draft as dear as its target (9 ms a pass, agreeing every time), the target's
    single passes filed as given, its verifications of 2 tokens at 18 ms."""
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    costs = controller.costs
    for ms in single_target_passes:
        costs.observe_verify(1, ms, 40)
    for _ in range(5):
        costs.observe_draft_pass(1, 9.0, 40)
        costs.observe_verify(2, 18.0, 40)
    return controller


def _drafting_steps(
    controller: DraftController, steps: int, *, slowed: float = 1.0
) -> PauseDecision | None:
    """Drafting steps as such a pair runs them on a quiet machine (``slowed`` times as long
    where a burst slowed them): a draft pass and a verification of 2 tokens, 27.5 ms for 2
    tokens."""
    for _ in range(steps):
        controller.observe_step(1, 1)
        controller.observe_step_cost(
            paid_draft=True,
            tokens=2,
            ms=27.5 * slowed,
            host_ms=0.5,
            depth=40,
            pass_ms=18.0 * slowed,
            pass_tokens=2,
        )
        decision = controller.check_pause(40)
        if decision is not None:
            return decision
    return None


def test_lone_target_passes_a_burst_slowed_do_not_make_drafting_look_as_if_it_paid() -> None:
    """While a draft drafts, no single target pass is measured: three lone ones, two slowed by a
    burst to 119 and 208 ms where a quiet one takes 9, had a draft as dear as its target
    measured at 4.5x "target-only" and never paused. The steps are judged against the
    fastest of those passes: at 0.7x the draft is paused for cost."""
    controller = _dear_draft_priced([9.0, 119.0, 208.0])
    decision = _drafting_steps(controller, steps=3)
    ratio = controller.economics.ratio()
    assert ratio is not None and ratio < 0.75
    assert decision is not None and decision.reason == "cost"

    quiet = _dear_draft_priced([9.0, 9.2, 8.9])  # the same decision on a quiet machine
    decision = _drafting_steps(quiet, steps=3)
    assert decision is not None and decision.reason == "cost"


def test_a_target_only_step_a_burst_slowed_does_not_make_drafting_look_as_if_it_paid() -> None:
    """A paused step whose pass a burst slowed to 680 ms (its price: 9) had filed 671 ms as
    the step's time beyond its pass, and every drafting step after it was judged against a
    target-only token of 680 ms. The step's time beyond its own pass is half a millisecond."""
    controller = _dear_draft_priced([9.0, 9.2, 8.9])
    controller.observe_step_cost(
        paid_draft=False, tokens=1, ms=680.0, host_ms=0.5, depth=40, pass_ms=679.5
    )
    assert controller.economics.overhead_ms.value == pytest.approx(0.5)
    decision = _drafting_steps(controller, steps=3)
    ratio = controller.economics.ratio()
    assert ratio is not None and ratio < 0.75
    assert decision is not None and decision.reason == "cost"


def test_drafting_steps_the_same_burst_slowed_are_judged_against_target_only_slowed_alike() -> None:
    """Where the lone target passes ran mostly slowed, a drafting step's base is their fastest
    slowed as much as the step's own verification was: a draft that pays (a quarter of its
    target's pass, every token accepted), its steps slowed threefold by the burst that slowed
    those passes, is not judged against a quiet target-only token and paused."""
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    costs = controller.costs
    for ms in (9.0, 119.0, 208.0):
        costs.observe_verify(1, ms, 40)
    for _ in range(5):
        costs.observe_draft_pass(1, 2.0, 40)
        costs.observe_verify(4, 20.0, 40)
    for _ in range(8):  # 4 tokens from 3 draft passes and a verification of 4, thrice as slow
        controller.observe_step(3, 3)
        controller.observe_step_cost(
            paid_draft=True, tokens=4, ms=81.0, host_ms=0.5, depth=40, pass_ms=60.0, pass_tokens=4
        )
        assert controller.check_pause(40) is None
    ratio = controller.economics.ratio()
    assert ratio is not None and ratio > 1.2


def test_of_two_single_passes_a_drafting_step_is_judged_against_the_faster() -> None:
    """The load's price and the answer's first lone pass are two moments; a burst at load set
    the first at 16.8 ms where the second took 8.6, and their median (the mean) made a draft
    as dear as its target, drafting 4 tokens a step, look 1.1x faster than target-only."""
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    costs = controller.costs
    costs.observe_verify(1, 16.8, 0)  # the load's, in a burst
    costs.observe_verify(1, 8.6, 40)  # the answer's first step
    for _ in range(5):
        costs.observe_draft_pass(1, 9.0, 40)
        costs.observe_verify(5, 22.0, 40)
    decision = None
    for _ in range(3):  # 4 draft passes and a verification of 5: 58 ms for 5 tokens
        controller.observe_step(4, 4)
        controller.observe_step_cost(
            paid_draft=True, tokens=5, ms=58.0, host_ms=0.5, depth=40, pass_ms=22.0, pass_tokens=5
        )
        decision = decision or controller.check_pause(40)
    ratio = controller.economics.ratio()
    assert ratio is not None and ratio < 0.85
    assert decision is not None and decision.reason == "cost"


def test_two_passes_ran_slowed_only_where_one_took_half_again_the_others_time() -> None:
    """Of two passes the median is their mean: the slower over 1.5 times the faster says one
    ran slowed (the base then takes the faster); two a quiet machine's noise apart do not."""
    apart, close = RecentMedian(), RecentMedian()
    for ms in (16.8, 8.6):
        apart.update(ms)
    for ms in (9.4, 8.6):
        close.update(ms)
    assert apart.ran_slowed(1.5) and not close.ran_slowed(1.5)
    burst = RecentMedian()
    for ms in (9.0, 119.0, 208.0):
        burst.update(ms)
    assert burst.ran_slowed(1.5)
    one = RecentMedian()
    one.update(200.0)
    assert not one.ran_slowed(1.5)


def test_a_burst_on_the_draft_passes_alone_does_not_cut_its_blocks_to_one_token() -> None:
    """The block thresholds weigh a draft pass against a target pass: a burst that slowed
    the last draft passes (150 ms against 21) set the keep-drafting threshold at 1, so every
    later block was one token long, and such blocks time no single draft pass again. At the
    passes' fastest recent runs the threshold is what the quiet passes say; a draft that
    costs that much throughout still gets a threshold of 1."""
    burst = _controller(QUIET_THEN_BURST)
    quiet = _controller(QUIET_THEN_BURST[:6])
    assert burst.costs.draft_ms(1, 40) > 100.0  # the median is the burst's
    keep = burst.keep_drafting_threshold(40)
    assert keep < 0.5
    assert keep == pytest.approx(quiet.keep_drafting_threshold(40), rel=0.1)
    assert burst.include_threshold(40) == pytest.approx(quiet.include_threshold(40), rel=0.1)
    assert _controller(DEAR_THROUGHOUT).keep_drafting_threshold(40) == 1.0
