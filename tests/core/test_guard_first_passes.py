"""A pause for cost decided on verification prices that rest on a few passes: a GPU's first
runs of a batch shape cost several times its later ones (the first GPU check priced verifying
2 tokens at 7.7 single passes and the guard never drafted), and a paused draft is not priced
again. Such a pause is probed again soon, its probes are not skipped, the next answer does
not inherit it, and the words say why."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.config import SpecConfig
from app.engine.events import GuardEvent, GuardReason
from app.engine.policy.controller import DraftController
from app.engine.policy.costs import SETTLED_VERIFICATIONS, CostModel
from app.engine.policy.guard import NOISY_PROBE, GuardMemory
from app.models.drafting import DrafterKind, PairDrafting
from app.models.guard_words import message

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

DEPTH = 40
SINGLE_MS, DRAFT_MS = 2.0, 1.2  # a draft pass at 60 % of a target pass: a pause it would carry
FIRST_RUNS = {2: 15.0, 5: 12.0}  # each verification size's first pass
STEADY = {2: 2.6, 5: 3.5}  # and its later ones


def _controller(verifications: dict[int, list[float]]) -> DraftController:
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    costs = controller.costs
    for _ in range(5):
        costs.observe_draft_pass(1, DRAFT_MS, DEPTH)
        costs.observe_verify(1, SINGLE_MS, DEPTH)
    for size, passes in verifications.items():
        for ms in passes:
            costs.observe_verify(size, ms, DEPTH)
    return controller


def test_verification_prices_settle_once_enough_passes_near_the_depth_are_filed() -> None:
    costs = CostModel()
    for _ in range(20):
        costs.observe_verify(1, SINGLE_MS, DEPTH)  # single passes do not settle a block's price
    for _ in range(SETTLED_VERIFICATIONS):
        costs.observe_verify(3, 3.0, 4000)  # nor do verifications far from the depth
    for _ in range(SETTLED_VERIFICATIONS - 1):
        assert costs.prices_unsettled(DEPTH)
        costs.observe_verify(3, 3.0, DEPTH)
    assert costs.prices_unsettled(DEPTH)
    costs.observe_verify(5, 4.0, DEPTH + 100)
    assert not costs.prices_unsettled(DEPTH)
    assert not costs.prices_unsettled(4000)


def test_a_pause_on_each_shapes_first_runs_is_probed_soon_and_not_carried() -> None:
    first = _controller({size: [ms] for size, ms in FIRST_RUNS.items()})
    assert not first.can_ever_pay(DEPTH)  # at those prices no length beats the target
    event = first.pause_if_never_pays(step=0, depth=DEPTH)
    assert event is not None and event.reason is GuardReason.COST
    assert event.few_passes and not event.noisy and event.probe_in == NOISY_PROBE
    assert not first.snapshot().paused_for_cost
    # the probe runs, though by the prices it would lose, and pays at the shapes' later runs
    assert first._probe_would_lose(DEPTH)
    assert first.tick_paused(NOISY_PROBE, DEPTH)
    for size, ms in STEADY.items():
        for _ in range(2):
            first.costs.observe_verify(size, ms, DEPTH)
    assert first.pause_if_never_pays(step=3, depth=DEPTH) is None

    # the same prices over enough passes decide the pause alone, as before
    dear = _controller({size: [ms] * 4 for size, ms in FIRST_RUNS.items()})
    event = dear.pause_if_never_pays(step=0, depth=DEPTH)
    assert event is not None and not event.few_passes and not event.noisy
    assert event.probe_in == 16
    assert dear.snapshot().paused_for_cost


def test_a_pause_on_a_few_passes_is_probed_soon_after_an_earlier_probe_failed_too() -> None:
    """Its probe prices no block until it runs: the count of verifications near the depth
    has not grown since the pause, and skipping the probe on an earlier answer's failed one
    would hold the pause on the first runs' prices."""
    controller = _controller({size: [ms] for size, ms in FIRST_RUNS.items()})
    controller.restore(GuardMemory(False, 16, failed_probes=1, acceptance=None))
    event = controller.pause_if_never_pays(step=0, depth=DEPTH)
    assert event is not None and event.few_passes and event.probe_in == NOISY_PROBE
    assert controller._probe_would_lose(DEPTH)
    assert controller.tick_paused(NOISY_PROBE, DEPTH)


def test_a_probe_that_verified_no_block_leaves_the_next_pause_an_ordinary_one() -> None:
    controller = _controller({size: [ms] for size, ms in FIRST_RUNS.items()})
    first = controller.pause_if_never_pays(step=0, depth=DEPTH)
    assert first is not None and first.few_passes
    assert controller.tick_paused(NOISY_PROBE, DEPTH)
    # the probe's draft proposed nothing at those prices: no block was verified, none priced
    again = controller.pause_if_never_pays(step=NOISY_PROBE, depth=DEPTH)
    assert again is not None and not again.few_passes and again.probe_in == 16
    # the ordinary pause's probes may be skipped again, where the prices say they would lose
    assert not controller.tick_paused(16, DEPTH)

    # an ordinary pause for cost at these prices is carried; and an answer that starts
    # unpaused (the last one ended on a probe) remembers that the probe priced nothing
    memory = controller.snapshot()
    assert memory.paused_for_cost
    following = DraftController(controller.config, costs=controller.costs)
    following.restore(replace(memory, paused_for_cost=False))
    event = following.pause_if_never_pays(step=0, depth=DEPTH)
    assert event is not None and not event.few_passes

    # one more verification near the depth, and a pause on those prices is probed soon again
    following.costs.observe_verify(2, FIRST_RUNS[2], DEPTH)
    fresh = DraftController(controller.config, costs=following.costs)
    fresh.restore(replace(following.snapshot(), paused_for_cost=False))
    event = fresh.pause_if_never_pays(step=0, depth=DEPTH)
    assert event is not None and event.few_passes and event.probe_in == NOISY_PROBE


def test_the_words_of_a_pause_on_a_few_passes_do_not_blame_other_programs() -> None:
    pause = GuardEvent(
        True, 0.7, 0.9, 0, reason=GuardReason.COST, draft_cost_fraction=0.6, probe_in=8
    )
    drafting = PairDrafting(DrafterKind.DRAFT_MODEL, "draft model")
    few = message(replace(pause, few_passes=True), drafting)
    assert "first few verifications" in few and "tried again soon" in few
    assert "other programs" not in few
    assert "first few verifications" not in message(pause, drafting)
    noisy = message(replace(pause, noisy=True, few_passes=True), drafting)
    assert "other programs" in noisy and noisy.count("tried again soon") == 1
