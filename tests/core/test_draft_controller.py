"""The draft controller, its guard and its cost model, fed step records by hand."""

from __future__ import annotations

import pytest

from app.engine.config import SpecConfig
from app.engine.events import GuardEvent, GuardReason
from app.engine.policy.controller import DraftController
from app.engine.policy.costs import SETTLED_VERIFICATIONS, CostModel, expected_tokens
from app.engine.policy.guard import PauseDecision
from app.engine.step_record import StepRecord, per_drafter, per_position

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_cost_model_break_even_and_speedup() -> None:
    costs = CostModel()
    costs.observe_draft_pass(1, 10.0, 0)
    costs.observe_verify(1, 100.0, 0)
    costs.observe_verify(5, 120.0, 0)
    assert costs.verify_ms(3, 0) == pytest.approx(110.0)
    # perfect agreement with 4 drafts: 5 tokens for 40 + 120 ms vs 100 ms per token
    assert costs.speedup(0.999, 4, 0) == pytest.approx(5 * 100 / 160, rel=0.01)
    a = costs.break_even(4, 0)
    assert 0.0 < a < 1.0
    assert costs.speedup(a, 4, 0) == pytest.approx(1.0, abs=1e-3)
    assert expected_tokens(0.0, 4) == pytest.approx(1.0)


@pytest.mark.parametrize("draft_ms", [2.0, 25.0, 60.0, 99.0, 140.0])
def test_break_even_is_where_speculation_starts_to_pay(draft_ms: float) -> None:
    costs = CostModel()
    costs.observe_draft_pass(1, draft_ms, 0)
    costs.observe_verify(1, 70.0, 0)
    costs.observe_verify(17, 160.0, 0)
    for k in (1, 2, 4, 8, 16):
        a = costs.break_even(k, 0)
        if a >= 1.0:  # no acceptance pays at this length
            assert costs.speedup(0.999, k, 0) < 1.0
            continue
        assert costs.speedup(a, k, 0) >= 1.0 - 1e-6
        assert a == 0.0 or costs.speedup(max(a - 1e-3, 0.0), k, 0) < 1.0


def test_bench_reports_the_pair_ceiling_from_measured_costs() -> None:
    from app.engine.bench import pair_economics

    costs = CostModel()
    assert pair_economics(costs, 16, 0) == {}  # nothing measured: no claim
    costs.observe_draft_pass(1, 25.0, 0)
    costs.observe_verify(1, 70.0, 0)
    costs.observe_verify(17, 160.0, 0)
    report = pair_economics(costs, 16, 0)
    speedups = {k: (k + 1) * 70.0 / (k * 25.0 + costs.verify_ms(k + 1, 0)) for k in range(1, 17)}
    best = max(speedups, key=speedups.__getitem__)
    assert report["ceiling_draft_len"] == best
    assert report["ceiling_speedup"] == pytest.approx(speedups[best], abs=1e-3)
    assert report["draft_cost_fraction"] == pytest.approx(25.0 / 70.0, abs=1e-4)
    assert report["break_even_acceptance"]["4"] == pytest.approx(costs.break_even(4, 0), abs=1e-4)
    # a draft as slow as its target can never pay, whatever it proposes
    slow = CostModel()
    slow.observe_draft_pass(1, 70.0, 0)
    slow.observe_verify(1, 70.0, 0)
    slow.observe_verify(17, 160.0, 0)
    assert pair_economics(slow, 16, 0)["ceiling_speedup"] < 1.0


def test_controller_pauses_below_break_even_and_probes_again() -> None:
    controller = DraftController(SpecConfig(guard_window=4, probe_every=3, draft_max=4))
    controller.costs.observe_draft_pass(1, 40.0, 0)  # an expensive draft: break-even is high
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(5, 130.0, 0)
    for _ in range(4):
        controller.observe_step(drafted=4, accepted=0)
    assert controller.check_pause(0) is not None
    assert controller.paused
    assert not controller.tick_paused(1, 0) and not controller.tick_paused(1, 0)
    assert controller.tick_paused(1, 0) and not controller.paused


def _record(step: int, proposed: int, accepted: int, **kw: object) -> StepRecord:
    values: dict = {
        "drafter": "draft model",
        "depth": 10 + step,
        "verified": accepted + 1,
        "emitted": accepted + 1,
        "draft_passes": proposed,
        "draft_ms": 40.0 * proposed,
        "catch_up": 1,
        "catch_up_ms": 40.0,
        "verify_ms": 130.0,
        "host_ms": 1.0,
        "step_ms": 131.0 + 40.0 * proposed,
    }
    return StepRecord(step, proposed=proposed, accepted=accepted, **(values | kw))


def test_controller_and_guard_read_the_step_record() -> None:
    controller = DraftController(SpecConfig(guard_window=4, probe_every=2, draft_max=4))
    controller.costs.observe_draft_pass(1, 40.0, 0)
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(5, 130.0, 0)
    events = []
    for step in range(4):
        record = _record(step, proposed=4, accepted=0)
        controller.observe(record)
        events.append(controller.guard(record))
    pause = next(e for e in events if e is not None)
    assert pause.paused and pause.step in range(4) and controller.paused
    # paused steps: no draft, the target alone; the guard counts them and probes again
    idle = [_record(4 + i, 0, 0, draft_passes=0, catch_up=0, paused=True) for i in range(2)]
    assert not idle[0].paid
    first, second = (controller.guard(r) for r in idle)
    assert first is None
    assert second is not None and not second.paused and second.reason == "probe"
    assert second.step == 5 and not controller.paused


def test_step_costs_are_kept_as_the_guards_evidence_only_where_a_guard_reads_them() -> None:
    """Pricing each step against target-only decoding was a sixth of a lookup step's host
    time; without a guard nothing reads it, and the agreement is still learned."""
    kept = {}
    for guarded in (True, False):
        controller = DraftController(SpecConfig(draft_max=4, collapse_guard=guarded))
        controller.costs.observe_verify(1, 100.0, 0)
        controller.costs.observe_verify(5, 130.0, 0)
        for step in range(3):
            controller.observe(_record(step, proposed=4, accepted=2))
        controller.observe(_record(3, 0, 0, draft_passes=0, catch_up=0))
        kept[guarded] = controller.economics.steps, controller.economics.base_ms.value
        assert controller.rolling_acceptance < 0.8  # 2 of 3 tried, below the prior
    assert kept[True][0] == 3 and kept[True][1] is not None
    assert kept[False] == (0, None)


def test_a_block_drafters_whole_pass_is_not_taken_for_a_slowed_one() -> None:
    """A block drafter files each drafted position as its share of the pass: a step's pass
    over seven positions costs seven shares, and a quiet machine's steps are not noisy."""
    controller = DraftController(SpecConfig(draft_max=7))
    costs = controller.costs
    costs.observe_verify(1, 0.15, 0)
    costs.observe_verify(8, 0.75, 0)
    for _ in range(3):
        costs.observe_draft_pass(1, 0.045, 0)  # a 0.315 ms pass over seven positions
    block = {"draft_passes": 1, "catch_up": 0, "catch_up_ms": 0.0, "verify_ms": 0.75}
    for step in range(4):
        controller.observe(
            _record(step, 7, 1, depth=0, draft_ms=0.32, positions_per_pass=7, **block)
        )
    assert controller.economics.steps == 4 and not controller.economics.noisy()
    # a pass that proposed nothing, then a lone target pass slowed by it (its weights in the
    # caches): priced by lone passes no draft pass preceded, so not taken for interference
    for step in range(4, 8):
        lone = block | {"verify_ms": 0.24}
        controller.observe(
            _record(step, 0, 0, depth=0, draft_ms=0.32, positions_per_pass=7, **lone)
        )
    assert controller.economics.steps == 8 and not controller.economics.noisy()
    slowed = DraftController(SpecConfig(draft_max=7), costs=costs)
    for step in range(4):  # the same pass at three times its price: slowed, noisy
        slowed.observe(_record(step, 7, 1, depth=0, draft_ms=1.0, positions_per_pass=7, **block))
    assert slowed.economics.noisy()


def test_step_records_aggregate_per_position_and_per_drafter() -> None:
    records = [
        _record(0, 4, 4),
        _record(1, 3, 1),
        _record(2, 2, 0, drafter="n-gram", draft_passes=0),
        _record(3, 0, 0, draft_passes=0, paused=True),
    ]
    drafted, accepted = per_position(records)
    assert drafted == (3, 3, 2, 1) and accepted == (2, 1, 1, 1)
    model, lookup = per_drafter(records)
    assert (model.name, model.steps, model.drafted, model.accepted) == ("draft model", 2, 7, 5)
    assert (lookup.name, lookup.drafted, lookup.accepted, lookup.draft_passes) == (
        "n-gram",
        2,
        0,
        0,
    )
    assert model.acceptance == pytest.approx(5 / 7)


def test_adaptive_length_grows_with_agreement() -> None:
    controller = DraftController(SpecConfig(draft_max=12))
    controller.costs.observe_draft_pass(1, 5.0, 0)
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(9, 110.0, 0)
    controller.acceptance.value = 0.95
    long_k = controller.next_draft_len(0)
    controller.acceptance.value = 0.3
    short_k = controller.next_draft_len(0)
    assert long_k > short_k >= 1


def test_a_probe_after_a_failed_one_is_judged_within_three_steps() -> None:
    from app.engine.policy.controller import DraftController

    controller = DraftController(SpecConfig(guard_window=8, probe_every=4, draft_max=4))
    controller.costs.observe_draft_pass(1, 30.0, 0)  # a draft pass costs 30 % of a target pass
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(5, 110.0, 0)
    controller.economics.observe_target_only(100.0)  # 100 ms a token target-only
    for _ in range(8):  # every draft accepted, but 3 tokens cost 330 ms: a slight loss
        controller.observe_step(drafted=2, accepted=2)
        controller.observe_step_cost(paid_draft=True, tokens=3, ms=330.0, host_ms=1.0, depth=0)
        decision = controller.check_pause(0)
        if decision:
            break
    assert decision is not None and decision.reason == "cost"
    assert controller.economics.steps == 8  # the first judgement waits for a full window
    for _ in range(decision.probe_in):
        controller.tick_paused(1, 0)
    assert not controller.paused  # probing again
    steps = 0
    while controller.check_pause(0) is None:
        controller.observe_step(drafted=2, accepted=2)
        controller.observe_step_cost(paid_draft=True, tokens=3, ms=330.0, host_ms=1.0, depth=0)
        steps += 1
        assert steps <= 3
    assert controller.probe_in == 2 * decision.probe_in  # the next probe waits twice as long


def test_a_loss_measured_under_other_programs_load_is_probed_again_soon_and_not_carried() -> None:
    """The same slight loss as above, but with the steps' target passes taking twice their
    price (a burst of other programs): the pause is said as measured on a busy machine, the
    draft is tried again in a few tokens, the pause after it is not lengthened, and the next
    answer does not start paused."""
    from app.engine.policy.controller import DraftController
    from app.engine.policy.guard import NOISY_PROBE
    from app.models.guard_words import message

    def losing_steps(controller: DraftController, verify_ms: float) -> PauseDecision | None:
        for step in range(8):  # every draft accepted, but 3 tokens cost 330 ms: a slight loss
            controller.observe(
                StepRecord(step=step, drafter="draft model", depth=0, proposed=2, accepted=2,
                           verified=3, emitted=3, draft_passes=2, draft_ms=20.0, catch_up=1,
                           catch_up_ms=10.0, verify_ms=verify_ms, host_ms=1.0, step_ms=330.0)
            )  # fmt: skip
            decision = controller.check_pause(0)
            if decision:
                return decision
        return None

    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    controller.costs.observe_draft_pass(1, 50.0, 0)  # an expensive draft: a pause would carry
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(3, 105.0, 0)
    controller.economics.observe_target_only(100.0)
    busy = losing_steps(controller, verify_ms=210.0)
    assert busy is not None and busy.reason == "cost" and busy.noisy
    assert busy.probe_in == NOISY_PROBE
    said = message(busy.event(step=8), None)
    assert "measured while other programs were slowing this machine" in said
    assert f"again in {NOISY_PROBE} tokens" in said
    assert not controller.snapshot().paused_for_cost
    for _ in range(busy.probe_in):
        controller.tick_paused(1, 0)
    assert not controller.paused
    again = losing_steps(controller, verify_ms=210.0)
    assert again is not None and again.probe_in == NOISY_PROBE  # not doubled
    quiet = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    quiet.costs, quiet.economics = controller.costs, type(controller.economics)(8)
    quiet.economics.observe_target_only(100.0)
    steady = losing_steps(quiet, verify_ms=105.0)
    assert steady is not None and not steady.noisy and steady.probe_in == 16


def _slightly_losing(*, draft_price_ms: float, draft_ms: float) -> DraftController:
    """A controller after up to eight steps, each with every draft accepted but 3 tokens for
    330 ms where target-only costs 100 ms a token: a slight loss, paused within the window. The
    draft pass is priced at ``draft_price_ms``, the steps' two draft passes took ``draft_ms``."""
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    controller.costs.observe_draft_pass(1, draft_price_ms, 0)
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(3, 105.0, 0)
    controller.economics.observe_target_only(100.0)
    for step in range(8):
        controller.observe(
            StepRecord(step=step, drafter="draft model", depth=0, proposed=2, accepted=2,
                       verified=3, emitted=3, draft_passes=2, draft_ms=draft_ms, catch_up=1,
                       catch_up_ms=draft_ms / 2, verify_ms=105.0, host_ms=1.0, step_ms=330.0)
        )  # fmt: skip
        if controller.check_pause(0):
            break
    return controller


def test_a_loss_whose_draft_passes_ran_under_other_programs_load_is_probed_again_soon() -> None:
    """A burst can land on the draft passes alone: the target passes at their price, the two
    draft passes taking three times theirs. That loss is noisy too; the same step with the
    draft passes at their price is not."""
    from app.engine.policy.guard import NOISY_PROBE

    busy = _slightly_losing(draft_price_ms=20.0, draft_ms=120.0).last_pause
    assert busy is not None and busy.reason == "cost" and busy.noisy
    assert busy.probe_in == NOISY_PROBE
    steady = _slightly_losing(draft_price_ms=20.0, draft_ms=40.0).last_pause
    assert steady is not None and steady.reason == "cost" and not steady.noisy


def test_a_pause_for_cost_in_an_answer_that_ran_on_a_busy_machine_is_not_carried() -> None:
    """An expensive draft (priced at 60 % of a target pass) paused for cost, not on noisy
    steps: on a quiet machine the next answer starts paused; where other programs kept half a
    core busy during the answer, it starts drafting, its failed probes forgotten."""
    from app.engine.loop.drafting_turn import DraftingTurn

    controller = _slightly_losing(draft_price_ms=60.0, draft_ms=120.0)
    assert controller.paused and controller.last_pause is not None
    assert controller.last_pause.reason == "cost" and not controller.last_pause.noisy

    class Drafting:
        name, pays_passes, reads_prompt_late = "draft model", True, True
        lookups_while_paused = False

    memory: dict = {}
    turn = DraftingTurn(Drafting(), controller, controller.costs, ends_answer=None, memory=memory)  # type: ignore[arg-type]
    turn.finish()
    assert memory["draft model"].paused_for_cost
    turn.finish(busy_machine=True)
    assert not memory["draft model"].paused_for_cost and memory["draft model"].failed_probes == 0
    fresh = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
    fresh.restore(memory["draft model"])
    assert not fresh.paused


def test_a_probe_after_a_pause_on_noisy_costs_is_never_skipped() -> None:
    """Costs that price the draft above its target (as a burst did) say no probe can pay, so
    after a failed probe the next is skipped; but where the pause was decided on noisy costs
    the probe runs: a paused draft is priced again only by probing it."""
    from app.engine.policy.controller import DraftController
    from app.engine.policy.guard import NOISY_PROBE

    def probe_runs(second_pause_noisy: bool) -> bool:
        controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
        controller.costs.observe_draft_pass(1, 120.0, 0)  # 1.2 target passes: never pays
        controller.costs.observe_verify(1, 100.0, 0)
        for _ in range(SETTLED_VERIFICATIONS):  # prices that decide alone
            controller.costs.observe_verify(3, 105.0, 0)
        assert not controller.can_ever_pay(0)
        controller._pause(GuardReason.COST, None, 0)  # a first pause, and its probe failed:
        controller._pause(GuardReason.COST, None, 0, noisy=second_pause_noisy)
        waited = controller.probe_in
        assert waited == (NOISY_PROBE if second_pause_noisy else 32)
        return any(controller.tick_paused(1, 0) for _ in range(waited))

    assert probe_runs(second_pause_noisy=True)
    assert not probe_runs(second_pause_noisy=False)  # skipped: the wait doubles instead


def test_a_draft_priced_never_to_pay_while_other_programs_were_busy_is_probed_again_soon() -> None:
    """Before an answer's first step, costs priced during a burst of other programs (the last
    answer ran while they kept a core busy) made a Q2_K draft look as dear as its target: that
    pause is noisy (tried again in a few tokens, not carried); the same prices on a quiet
    machine pause as before."""
    from app.engine.loop.drafting_turn import DraftingTurn
    from app.engine.policy.controller import DraftController
    from app.engine.policy.guard import NOISY_PROBE

    def opening(busy_machine: bool) -> tuple[GuardEvent | None, DraftController]:
        controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=4))
        costs = controller.costs
        for depth in (0, 64):  # a draft pass priced at 95 % of a target pass, near the prompt
            costs.observe_draft_pass(1, 95.0, depth)
            costs.observe_verify(1, 100.0, depth)
            for _ in range(SETTLED_VERIFICATIONS // 2):  # prices that decide alone
                costs.observe_verify(5, 130.0, depth)

        class Drafting:  # what the turn asks a drafter that pays passes
            name, pays_passes, reads_prompt_late = "draft model", True, True
            lookups_while_paused = False

            def prefill(self, prompt: list[int]) -> None:
                return None

            def rest(self, resting: bool) -> None:
                return None

        turn = DraftingTurn(Drafting(), controller, costs, ends_answer=None, memory={})  # type: ignore[arg-type]
        return turn.prefill(list(range(64)), busy_machine=busy_machine), controller

    busy, controller = opening(busy_machine=True)
    assert busy is not None and busy.paused and busy.reason == "cost" and busy.noisy
    assert controller.probe_in == NOISY_PROBE
    assert not controller.snapshot().paused_for_cost  # the next answer starts drafting
    quiet, controller = opening(busy_machine=False)
    assert quiet is not None and quiet.paused and not quiet.noisy
    assert controller.probe_in > NOISY_PROBE


@pytest.mark.parametrize("adaptive", [False, True])
def test_an_early_loss_pauses_a_fixed_length_at_once_and_an_adaptive_one_after_a_window(
    adaptive: bool,
) -> None:
    """A fixed length losing badly in its first steps is paused after three; an adaptive one
    (which drafts long blocks before its calibration has learned, and shortens them as it
    does) is judged on a full window, and still paused when the loss lasts."""
    from app.engine.policy.controller import DraftController

    config = SpecConfig(guard_window=8, probe_every=16, draft_max=8, adaptive=adaptive)
    controller = DraftController(config)
    controller.costs.observe_draft_pass(1, 20.0, 0)
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(9, 140.0, 0)
    controller.economics.observe_target_only(100.0)
    paused_at = None
    for step in range(1, 13):  # 8 drafted, 2 accepted: 3 tokens for 300 ms, a 0.6x loss
        controller.observe_step(drafted=8, accepted=2)
        controller.observe_step_cost(paid_draft=True, tokens=3, ms=500.0, host_ms=1.0, depth=0)
        if controller.check_pause(0) is not None:
            paused_at = step
            break
    assert paused_at == (8 if adaptive else 3)


def test_an_adaptive_length_pauses_for_disagreement_only_where_no_length_pays() -> None:
    from app.engine.policy.controller import DraftController

    for adaptive in (False, True):
        controller = DraftController(SpecConfig(draft_max=16, adaptive=adaptive))
        controller.costs.observe_draft_pass(1, 20.0, 0)
        controller.costs.observe_verify(1, 100.0, 0)
        controller.costs.observe_verify(17, 180.0, 0)
        for _ in range(8):
            controller.observe_step(drafted=8, accepted=3)
        shortest, drafted = controller.costs.break_even(1, 0), controller.costs.break_even(8, 0)
        assert shortest < drafted
        expected = shortest if adaptive else drafted
        assert controller.pause_threshold(0) == pytest.approx(expected)


def test_break_even_follows_the_blocks_actually_drafted() -> None:
    from app.engine.policy.controller import DraftController

    controller = DraftController(SpecConfig(draft_max=16))
    controller.costs.observe_draft_pass(1, 20.0, 0)
    controller.costs.observe_verify(1, 100.0, 0)
    controller.costs.observe_verify(17, 180.0, 0)
    ceiling = controller.costs.break_even(16, 0)
    for _ in range(8):  # a confidence-driven draft that stops after two tokens
        controller.observe_step(drafted=2, accepted=1)
    assert controller.break_even(0) == pytest.approx(controller.costs.break_even(2, 0))
    assert controller.break_even(0) < ceiling


def test_a_draft_as_slow_as_its_target_is_paused_at_once_and_rarely_probed() -> None:
    from app.engine.policy.controller import DraftController

    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=8))
    controller.costs.observe_draft_pass(1, 100.0, 0)  # a draft pass costs a whole target pass
    controller.costs.observe_verify(1, 100.0, 0)
    for _ in range(SETTLED_VERIFICATIONS):  # prices that decide alone
        controller.costs.observe_verify(9, 120.0, 0)
    assert not controller.can_ever_pay(0)
    for _ in range(2):  # every drafted token accepted, and still slower
        controller.observe_step(drafted=8, accepted=8)
        controller.observe_step_cost(paid_draft=True, tokens=9, ms=920.0, host_ms=1.0, depth=0)
        decision = controller.check_pause(0)
    assert decision is not None and decision.reason == "cost"
    probes, tokens = 0, 0
    while tokens < 2000:
        if controller.paused:
            probes += controller.tick_paused(1, 0)
            tokens += 1
            continue
        controller.observe_step(drafted=8, accepted=8)  # a probe: still slower, paused again
        controller.observe_step_cost(paid_draft=True, tokens=9, ms=920.0, host_ms=1.0, depth=0)
        controller.check_pause(0)
        tokens += 9
    # doubling alone would probe at 16, 48, 112, 240, 496, 1008 and 2032 tokens; the costs
    # skip three of every four of those
    assert probes <= 2


def test_a_skipped_probe_is_said_with_its_new_wait_and_is_no_new_pause() -> None:
    """The walk of issue 33 found the banner still saying "probed again in 32 tokens" after
    that probe was skipped (the wait doubled, nothing said)."""
    from app.models.guard_words import GuardHistory, headline, message

    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=8))
    controller.costs.observe_draft_pass(1, 100.0, 0)  # a draft pass costs a whole target pass
    controller.costs.observe_verify(1, 100.0, 0)
    for _ in range(SETTLED_VERIFICATIONS):  # prices that decide alone
        controller.costs.observe_verify(9, 120.0, 0)

    def step(n: int, paused: bool) -> StepRecord:
        passes = 0 if paused else 8
        return StepRecord(step=n, drafter="draft model", depth=0, proposed=passes,
                          accepted=passes, verified=passes + 1, emitted=passes + 1,
                          draft_passes=passes, draft_ms=100.0 * passes, catch_up=0,
                          catch_up_ms=0.0, verify_ms=120.0, host_ms=1.0,
                          step_ms=100.0 * passes + 120.0, paused=paused)  # fmt: skip

    history, events, n = GuardHistory(), [], 0
    while n < 400 and not any(e.probe_skipped for e in events):
        record = step(n, controller.paused)
        controller.observe(record)
        event = controller.guard(record)
        if event is not None:
            events.append(event)
        n += 1
    skipped = events[-1]
    assert skipped.probe_skipped and skipped.paused
    assert skipped.probe_in == controller.probe_in and controller.paused
    assert headline(skipped) == f"Probe skipped at step {skipped.step}"
    said = message(skipped, None)
    assert "the probe due now was skipped" in said and f"in {skipped.probe_in} tokens" in said
    history.add(events)
    assert f"the probe due at step {skipped.step} was skipped" in history.story()


def test_steps_measured_faster_than_the_target_overrule_cost_lines_that_say_never() -> None:
    """Pass prices taken while other programs had the cores can say no length pays; the
    answer's own drafting steps, measured faster than the target alone, keep it drafting
    (the busy bench paused a draft running 4.6x target-only for cost)."""
    for step_ms, pauses in ((500.0, False), (920.0, True)):
        controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=8))
        controller.costs.observe_draft_pass(1, 100.0, 0)  # priced as dear as the target
        controller.costs.observe_verify(1, 100.0, 0)
        controller.costs.observe_verify(9, 120.0, 0)
        assert not controller.can_ever_pay(0)
        decisions = []
        for _ in range(3):
            controller.observe_step(drafted=8, accepted=8)
            controller.observe_step_cost(
                paid_draft=True, tokens=9, ms=step_ms, host_ms=1.0, depth=0
            )
            decisions.append(controller.check_pause(0))
        assert any(decisions) is pauses, (step_ms, decisions)


def test_the_cost_banner_cites_a_measured_speed_only_where_it_supports_the_claim() -> None:
    """Cost lines timed while the machine was busy can say no length can pay while the last
    steps measured a gain; the banner then gives the costs, not "ran at 1.24x, so it cannot
    pay"."""
    from app.models.guard_words import message

    cost = GuardReason.COST
    busy = GuardEvent(
        True, 1.0, 1.0, 3, reason=cost, speed_ratio=1.24, draft_cost_fraction=1.2, never_pays=True
    )
    words = message(busy, None)
    assert "no draft length can beat the target" in words and "ran at" not in words
    assert "a draft pass costs 120 % of a target pass" in words
    slower = GuardEvent(True, 1.0, 1.0, 3, reason=cost, speed_ratio=0.9)
    assert "ran at 0.90×" in message(slower, None)


def test_answer_bias_follows_what_this_answer_accepts() -> None:
    from app.engine.policy.calibration import AnswerBias

    bias = AnswerBias()
    assert bias.adjust(0.4) == pytest.approx(0.4)  # a new answer starts from the calibration
    for _ in range(20):  # spread drafts (calibrated 0.4) that the target keeps accepting
        bias.observe(0.4, accepted=True)
    lengthened = bias.adjust(0.4)
    assert lengthened > 0.6
    for _ in range(20):  # then confident ones (0.9) that keep failing
        bias.observe(0.9, accepted=False)
    assert bias.shift < 0.0 and bias.adjust(0.9) < 0.85
    for _ in range(1000):
        bias.observe(0.01, accepted=True)
    assert abs(bias.shift) <= AnswerBias.LIMIT  # bounded: the calibration still matters


def test_a_single_pass_is_never_extrapolated_below_what_batching_allows() -> None:
    """Blocks of 17 and 16 measured a few ms apart by noise put the least-squares line's
    intercept below zero: a single target pass was priced at a microsecond, and the guard
    said a draft pass cost 2,693,993 % of it."""
    costs = CostModel()
    costs.observe_verify(17, 198.3, 0)
    costs.observe_verify(16, 175.9, 0)
    single = costs.verify_ms(1, 0)
    assert single is not None and 175.9 / 16 <= single <= 175.9
    costs.observe_draft_pass(1, 16.0, 0)
    fraction = costs.draft_cost_fraction(0)
    assert fraction is not None and fraction <= 16.0 / (175.9 / 16)


def test_one_slow_pass_does_not_reprice_a_model() -> None:
    """A pass slowed 50-fold by the scheduler (835 ms where the others took 17) once made a
    cheap draft look dearer than its target for the rest of the answer."""
    costs = CostModel()
    costs.observe_verify(1, 100.0, 0)
    for ms in (17.0, 16.5, 17.2, 835.0, 16.8):
        costs.observe_draft_pass(1, ms, 0)
    assert costs.draft_ms(1, 0) == pytest.approx(17.0, abs=0.5)
    assert costs.can_ever_pay(16, 0)
    for _ in range(4):  # a lasting change is followed within a few passes
        costs.observe_draft_pass(1, 60.0, 0)
    assert costs.draft_ms(1, 0) == pytest.approx(60.0)


@pytest.mark.parametrize("settled", [True, False])
def test_a_probe_is_skipped_where_no_block_as_long_as_those_drafted_pays(settled: bool) -> None:
    """SmolLM2 F16 with its Q4_1 draft on a CPU: a draft pass at 0.7 of a target pass,
    verifying 2 tokens at 1.8 passes and 17 at 4.5. Blocks of 16, every token accepted, would
    pay; but its draft stopped after one token (its confidence), and one-token blocks lose at
    any agreement. After two failed probes the next is skipped, also where the verifications
    near its depth are few (judged at their fastest): it had caught up 98 tokens (0.3 s, a
    tenth of the answer) for three more losing steps."""
    controller = DraftController(SpecConfig(guard_window=8, probe_every=16, draft_max=16))
    costs, depth = controller.costs, 40
    for _ in range(5):
        costs.observe_draft_pass(1, 7.0, depth)
        costs.observe_verify(1, 10.0, depth)
    for _ in range(SETTLED_VERIFICATIONS // 2 if settled else 1):
        costs.observe_verify(2, 18.0, depth)
        costs.observe_verify(17, 45.0, depth)
    assert costs.prices_unsettled(depth) is not settled
    assert controller.can_ever_pay(depth)
    for _ in range(3):
        controller.observe_step(drafted=1, accepted=1)
    controller.acceptance.value = 0.995
    assert costs.best_speedup(0.995, 16, depth) > 1.0 > costs.speedup(0.995, 1, depth)
    for _ in range(2):  # a pause, and its probe failed
        controller._pause(GuardReason.COST, 0.7, depth)
    waited = controller.probe_in
    assert not any(controller.tick_paused(1, depth) for _ in range(waited))
    assert controller.probe_in == 2 * waited  # skipped: the wait doubles instead
