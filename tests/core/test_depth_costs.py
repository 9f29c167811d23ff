"""Issue 22 §3: pass costs as functions of context depth, and the lookup gate and guard that
read them. Synthetic observations only: no timing, no model.

The prices follow a CPU target measured on the issue's long prompt: a single pass 70 ms near
the start and about 250 ms three thousand tokens deep, verifying 17 tokens about 160 ms and
1,000 ms.
"""

from __future__ import annotations

import pytest

from app.engine.config import SpecConfig
from app.engine.drafters.base import DraftLimits
from app.engine.drafters.lookup import NgramDrafter
from app.engine.policy.controller import DraftController
from app.engine.policy.costs import CostModel
from app.engine.policy.lookup_gate import LookupGate
from app.engine.policy.pass_cost import PassCost, depth_range

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def target_ms(n: int, depth: float) -> float:
    return 60.0 + 5.6 * n + 0.042 * depth + 0.013 * n * depth


def draft_ms(n: int, depth: float) -> float:  # a quantized copy: cheap weights, same attention
    return 12.0 + 1.5 * n + 0.040 * depth + 0.012 * n * depth


SIZES = (1, 2, 5, 9, 17)


def measured(depths: tuple[int, ...], price=target_ms) -> PassCost:  # noqa: ANN001
    cost = PassCost()
    for depth in depths:
        for n in SIZES:
            cost.observe(n, price(n, depth), depth)
    return cost


def test_a_pass_is_priced_at_depths_and_sizes_never_measured() -> None:
    cost = measured((0, 512, 1024, 2048))
    for n, depth in ((1, 3200), (17, 3200), (3, 3200), (9, 1500), (12, 700), (1, 6000)):
        assert cost.ms(n, depth) == pytest.approx(target_ms(n, depth), rel=0.02), (n, depth)
    for n in SIZES:  # a measured cell is its own median
        assert cost.ms(n, 1024) == pytest.approx(target_ms(n, 1024))
    # one more verified token costs more deep in the context
    assert cost.marginal(3200) > 3 * cost.marginal(0) > 0


def test_a_single_pass_deep_is_priced_from_the_blocks_verified_there() -> None:
    """Single target passes are rarely measured while drafting: the issue's guard priced one
    3,193 tokens deep at its short-prompt price (70 ms for 247)."""
    cost = PassCost()
    for _ in range(3):
        cost.observe(1, target_ms(1, 0), 0)  # the load's warm-up passes
    for n in (2, 5, 9, 17):  # a short answer's verifications, then a long prompt's
        cost.observe(n, target_ms(n, 100), 100)
        cost.observe(n, target_ms(n, 3200), 3200)
    assert cost.ms(1, 3200) == pytest.approx(target_ms(1, 3200), rel=0.1)
    assert cost.ms(1, 0) == pytest.approx(target_ms(1, 0))


def test_without_a_spread_in_size_or_depth_nothing_is_extrapolated_from_it() -> None:
    one_size = PassCost()
    one_size.observe(1, 70.0, 0)
    one_size.observe(1, 250.0, 3200)
    assert one_size.ms(17, 3200) == pytest.approx(250.0)  # no size slope measured: none
    assert one_size.ms(1, 1600) == pytest.approx(160.0, rel=0.01)  # depth: along the line
    one_depth = PassCost()
    one_depth.observe(1, 100.0, 40)
    one_depth.observe(5, 120.0, 40)
    assert one_depth.ms(3, 2000) == pytest.approx(110.0)  # no depth slope measured: none


def test_one_slow_pass_deep_does_not_reprice_the_depth() -> None:
    cost = measured((0, 3200))
    for ms in (target_ms(1, 3200), 830.0, target_ms(1, 3200), 2400.0):  # scheduler hiccups
        cost.observe(1, ms, 3200)
    assert cost.ms(1, 3200) == pytest.approx(target_ms(1, 3200))
    for _ in range(6):  # a lasting change is followed
        cost.observe(1, 400.0, 3200)
    assert cost.ms(1, 3200) == pytest.approx(400.0)


def test_cells_are_bounded_and_ranges_narrow_with_depth() -> None:
    cost = PassCost()
    for depth in range(0, 16384, 64):
        for n in (1, 17):
            cost.observe(n, target_ms(n, depth), depth)
    assert len(cost._cells) <= 64
    assert cost.ms(1, 16000) == pytest.approx(target_ms(1, 16000), rel=0.02)
    assert depth_range(100) == 0 and depth_range(200) == 128
    assert depth_range(3300) == 3200 and depth_range(9000) - depth_range(8999) in (0, 512)


def costs_measured(depths: tuple[int, ...]) -> CostModel:
    """Every size's passes at each depth, twice: enough verifications that their prices
    decide a pause alone (``CostModel.prices_unsettled``)."""
    costs = CostModel()
    for depth in depths:
        for n in SIZES:
            for _ in range(2):
                costs.observe_verify(n, target_ms(n, depth), depth)
        costs.observe_draft_pass(1, draft_ms(1, depth), depth)
        costs.observe_draft_pass(2, draft_ms(2, depth), depth)
    return costs


def test_questions_follow_the_depth_of_the_step() -> None:
    costs = costs_measured((0, 1024, 3200))
    shallow = (costs.verify_ms(1, 0), costs.break_even(1, 0), costs.draft_cost_fraction(0))
    deep = (
        costs.verify_ms(1, 3200),
        costs.break_even(1, 3200),
        costs.draft_cost_fraction(3200),
    )
    assert deep[0] == pytest.approx(target_ms(1, 3200))
    assert shallow[0] == pytest.approx(target_ms(1, 0))
    # the draft's attention costs what the target's does: deep, it is a dear draft
    assert shallow[2] < 0.3 < 0.6 < deep[2]
    assert shallow[1] < deep[1]  # agreement needed to pay
    assert costs.verify_ms(1, depth=0) == pytest.approx(shallow[0])  # named by keyword too


def test_a_single_pass_is_measured_again_as_the_answer_grows() -> None:
    costs = CostModel()
    assert not costs.needs_single_pass(0)  # nothing measured yet: no claim
    costs.observe_verify(1, 70.0, depth=0)
    assert not costs.needs_single_pass(200)
    assert costs.needs_single_pass(3193)
    costs.observe_verify(1, 247.0, depth=3193)
    assert not costs.needs_single_pass(3193 + 300)
    assert costs.needs_single_pass(3193 + 600)  # an eighth of the depth further


def test_lookups_are_priced_by_their_verification_at_this_depth() -> None:
    """The issue's paraphrase: 16-token lookups at 4 % acceptance on a CPU deep in the
    context ran at 0.68x. At that acceptance none is verified; on a copy the gate verifies
    whole blocks; where copied runs are short, it verifies shorter blocks deep in the
    context than near its start."""
    costs = costs_measured((0, 1024, 3200))
    refused = LookupGate(costs)
    for _ in range(12):
        refused.observe(16, 0)
    assert refused.length(16, 16, 3200) == 0
    copying = LookupGate(costs)
    for _ in range(6):
        copying.observe(16, 16)
    assert copying.length(16, 16, 3200) == 16
    assert copying.length(3, 16, 3200) == 3  # never longer than the match
    short_runs = LookupGate(costs)
    for _ in range(12):
        short_runs.observe(10, 4)  # right at first, refused at the fifth token
    deep = short_runs.length(16, 16, 3200)
    shallow = short_runs.length(16, 16, 0)
    assert 2 <= deep < shallow
    # a match right half the time is worth a long block on a copy, even deep
    half = LookupGate(costs)
    for _ in range(6):
        half.observe(16, 16)
        half.observe(16, 0)
    assert half.length(16, 16, 3200) >= 8
    # where verifying more tokens is nearly free (a GPU), a weak lookup still pays
    flat = CostModel()
    flat.observe_verify(1, 10.0, 0)
    flat.observe_verify(17, 10.5, 0)
    weak = LookupGate(flat)
    for _ in range(6):
        weak.observe(16, 0)
    weak.observe(16, 1)
    assert weak.length(16, 16, 0) >= 1


def test_a_held_back_lookup_learns_from_what_the_target_wrote() -> None:
    costs = costs_measured((0, 3200))
    drafter = NgramDrafter(SpecConfig(), min_match=2, costs=costs)
    assert drafter.gate is not None and drafter.confidence_driven
    limits = DraftLimits(16)
    # 3,200 tokens deep (tokens no match is found in), a paraphrase: "1 2" keeps coming
    # back, followed by something new each time
    committed = [*range(10_000, 13_197), 1, 2, 50]
    proposed = []
    for fresh in range(60, 72):
        committed += [1, 2]
        block = drafter.propose(committed, limits)
        proposed.append(len(block.tokens))
        drafter.observe(block, 0)
        committed.append(fresh)
    assert proposed[-1] == 0 and (drafter.gate.first.value or 0.0) < 0.1
    # the answer starts copying an earlier run; held-back matches agree, lookups resume
    source = list(range(100, 140))
    committed += source + [7, 8]
    resumed = None
    for position in range(1, 30):
        block = drafter.propose(committed + source[:position], limits)
        if block.tokens:
            resumed = position
            break
    assert resumed is not None and resumed < 10


def test_fixed_lengths_verify_every_lookup_whole() -> None:
    costs = costs_measured((0,))
    drafter = NgramDrafter(SpecConfig(adaptive=False, draft_max=8), costs=costs)
    assert drafter.gate is None and not drafter.confidence_driven
    block = drafter.propose([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2], DraftLimits(8))
    assert block.tokens == [3, 4, 5, 6, 7, 8, 9, 1]


def test_the_guard_compares_a_deep_step_with_target_only_at_that_depth() -> None:
    """Target-only measured near the start (70 ms a token) would make a step 3,200 tokens
    deep look slow: it is compared with a target pass at its own depth."""
    controller = DraftController(SpecConfig(guard_window=4, draft_max=4), costs_measured((0,)))
    costs = controller.costs
    controller.observe_step_cost(
        paid_draft=False, tokens=1, ms=target_ms(1, 0) + 1.0, host_ms=1, depth=0
    )
    for n in SIZES:
        costs.observe_verify(n, target_ms(n, 3200), 3200)
    costs.observe_draft_pass(1, 30.0, 3200)  # a cheap draft
    for _ in range(6):  # 2 tokens in 400 ms where target-only takes about 250 ms each
        controller.observe_step(drafted=1, accepted=1)
        controller.observe_step_cost(paid_draft=True, tokens=2, ms=400.0, host_ms=1.0, depth=3200)
        assert controller.check_pause(3200) is None
    ratio = controller.economics.ratio()
    assert ratio == pytest.approx(2 * (target_ms(1, 3200) + 1.0) / 400.0, rel=0.01)


def test_lookup_steps_do_not_count_against_the_models_agreement() -> None:
    controller = DraftController(SpecConfig(guard_window=4, draft_max=4), costs_measured((0,)))
    for _ in range(4):
        controller.observe_step(drafted=8, accepted=0, lookup=True)  # lookups refused
    assert controller.rolling_acceptance == 0.0  # shown while no model block was judged
    for _ in range(4):
        controller.observe_step(drafted=2, accepted=2)
    assert controller.rolling_acceptance == 1.0
    assert controller.check_pause(0) is None


@pytest.mark.parametrize("depth", [0, 3200])
def test_a_probe_that_would_lose_at_this_depth_is_mostly_skipped(depth: int) -> None:
    """Near the start the draft costs a fifth of a target pass and 40 % agreement pays;
    3,200 tokens deep its pass costs most of a target pass and the same agreement cannot,
    so after a failed probe three of every four are skipped."""
    costs = costs_measured((0, 3200))
    controller = DraftController(SpecConfig(guard_window=4, probe_every=8, draft_max=8), costs)
    probes, tokens = 0, 0
    while tokens < 1200:
        if controller.paused:
            probes += controller.tick_paused(1, depth)
            tokens += 1
            continue
        for _ in range(4):  # a probe (or the first window) measured losing
            controller.observe_step(drafted=2, accepted=1)
            controller.observe_step_cost(
                paid_draft=True, tokens=2, ms=5000.0, host_ms=1.0, depth=depth
            )
        controller.acceptance.value = 0.4  # the agreement the draft showed
        assert controller.check_pause(depth) is not None
        tokens += 12
    # doubling alone would probe at 8, 16, 32, 64, 128, 256 and 512 tokens
    assert probes <= 3 if depth else probes >= 5


@pytest.mark.parametrize("depth", [0, 3200])
def test_a_draft_that_cannot_pay_at_this_depth_is_paused_within_three_steps(depth: int) -> None:
    """Deep in a context the draft needs most of its tokens accepted to pay: at 60 % it is
    paused after three steps rather than a full window; near the start 60 % pays."""
    costs = costs_measured((0, 3200))
    controller = DraftController(SpecConfig(guard_window=8, draft_max=8), costs)
    paused_at = None
    for step in range(1, 9):
        for drafted, accepted in ((2, 2), (2, 1)):  # 3 of 5 judged tokens accepted
            controller.observe_step(drafted, accepted)
        if controller.check_pause(depth) is not None:
            paused_at = step
            break
    assert paused_at == (2 if depth else None)


def test_a_fresh_gate_holds_its_first_match_back_where_verifying_costs_passes() -> None:
    """SmolLM2 F16 with its Q4_1 draft on a CPU: verifying 5 tokens costs two single target
    passes. A first match is held back until what the target writes shows it would have
    been accepted; then a copy is verified in blocks."""
    costs = CostModel()
    for n, ms in ((1, 12.45), (2, 19.47), (5, 25.91), (9, 35.69), (17, 58.17)):
        for _ in range(3):
            costs.observe_verify(n, ms, 0)
    gate = LookupGate(costs)
    assert gate.length(16, 16, 0) == 0
    copied = list(range(200, 216))
    gate.hold(10, copied)
    gate.judge_held([0] * 10 + copied)  # the target wrote the whole match
    assert gate.length(16, 16, 0) >= 4


def _smollm2_costs() -> CostModel:
    """SmolLM2 F16 on two cores: a two-token verification costs two single passes."""
    costs = CostModel()
    for n, ms in ((1, 11.4), (2, 21.2), (5, 24.0), (9, 30.9), (17, 57.8)):
        for _ in range(3):
            costs.observe_verify(n, ms, 0)
    return costs


def _write_held(
    gate: LookupGate, committed: list[int], match: list[int], written: list[int]
) -> None:
    """The loop's steps while the gate holds: each step judges what was held, then holds
    the lookup's next match (the copy cursor's continuation of the run), and the target
    writes one token."""
    for step, token in enumerate(written):
        gate.hold(len(committed), match[step:])
        committed.append(token)
        gate.judge_held(committed)


def test_a_held_match_is_followed_until_the_answer_leaves_it() -> None:
    """A math answer repeats a number of the question and then says something else: the
    match's first token is right and the next one is not. Judged only by verified matches,
    the rate of the tokens after a right first one kept its prior of nine in ten, and
    three-token lookups were verified at a fifth accepted (0.89x of target-only)."""
    gate = LookupGate(_smollm2_costs())
    committed = [0] * 10
    for run in range(8):
        match = [100 + 10 * run + i for i in range(8)]
        _write_held(gate, committed, match, [match[0], 999])
    assert gate.continued < 0.6
    # the first token is right nine times in ten here, so a short block still pays; at the
    # prior's nine in ten for the tokens after it, nine tokens were verified
    assert 1 <= gate.length(16, 16, 0) <= 4
    # a copy followed while held teaches the opposite: the run goes on
    copied = list(range(300, 332))
    _write_held(gate, committed, copied, copied)
    assert gate.continued > 0.8
    assert gate.copying and gate.length(16, 16, 0) >= 2


def test_a_lookup_that_does_not_keep_its_promises_promises_less() -> None:
    """Rates that jump after a streak of agreeing matches promise most just before it ends:
    on math-1 three in four first tokens were promised and 7 of 51 lookup tokens accepted.
    What verified matches delivered scales the next promise; on a copy it lets blocks grow."""
    costs = _smollm2_costs()
    gate = LookupGate(costs)
    for _ in range(6):
        gate.observe(4, 4)  # a streak: the rates promise a long block
    promised = gate.length(16, 16, 0)
    assert promised >= 4
    refused = 0
    while (k := gate.length(16, 16, 0)) > 0 and refused < 5:
        gate.observe(k, 0)  # verified, and refused at once
        refused += 1
        for _ in range(2):
            gate.observe(4, 4)  # the streak that made the rates jump again
    assert 1 <= refused <= 2  # held back after a promise or two broken, streaks or not
    assert gate.kept < 0.5
    copying = LookupGate(costs)
    for _ in range(6):
        copying.observe(2, 2)
    short = copying.length(16, 16, 0)
    for _ in range(4):
        k = copying.length(16, 16, 0)
        copying.observe(k, k)
    assert copying.kept > 1.0 and copying.length(16, 16, 0) >= short


def test_a_held_match_is_judged_against_what_verifying_it_would_have_promised() -> None:
    """Held matches keep the promise honest while nothing is verified: one refused at once
    lowers the share kept, one the target wrote in full raises it, and lookups resume."""
    refused = LookupGate(_smollm2_costs())
    assert refused.length(16, 16, 0) == 0  # a fresh gate holds its first match back
    refused.hold(10, list(range(100, 116)), priced=True)
    refused.judge_held([0] * 10 + [999])
    assert refused.kept < 1.0
    unpriced = LookupGate(_smollm2_costs())
    unpriced.hold(10, list(range(100, 116)))  # held beside a model draft: never priced
    unpriced.judge_held([0] * 10 + [999])
    assert unpriced.kept == 1.0
    copied = LookupGate(_smollm2_costs())
    assert copied.length(16, 16, 0) == 0
    match = list(range(200, 216))
    copied.hold(10, match, priced=True)
    copied.judge_held([0] * 10 + match)  # the target wrote the whole match
    assert copied.kept > 1.0


def test_a_match_after_one_that_agreed_is_judged_by_copies_not_by_coincidences() -> None:
    """An edit's answer copies runs of the given text between new words: a match right after
    one that agreed is right eight times in nine, one found on a suffix that holds new words
    one time in ten. One rate over both promised a third of a copy's tokens, and the model
    kept drafting copies at 30 ms a token; the rate of the state the answer is in promises
    the copy and holds the coincidences back."""
    costs = costs_measured((0, 3200))
    gate = LookupGate(costs)
    for _ in range(8):
        gate.observe(16, 16)  # a match right after new words: copying starts
        for _ in range(8):
            gate.observe(16, 16)  # the copy goes on
        gate.observe(16, 0)  # the edit
        for _ in range(9):
            gate.observe(16, 0)  # new words: matches are coincidences
    assert not gate.copying
    assert gate.length(16, 16, 3200) == 0
    gate.observe(16, 16)  # the answer copies again
    assert gate.copying and gate.length(16, 16, 3200) == 16
    assert gate.expected_tokens(16) > 10


@pytest.mark.parametrize("fastest", [False, True], ids=["median", "quiet"])
def test_a_range_of_verification_prices_is_each_sizes_own_price(fastest: bool) -> None:
    """The lookup gate asks for every length's price in one call: the very prices asked one
    by one, at depths measured, between them and beyond them."""
    cost = measured((0, 1500, 3000))
    model = CostModel(verify=cost).priced_quiet() if fastest else CostModel(verify=cost)
    for depth in (0, 40, 700, 1500, 2999, 6000):
        one_by_one = [model.verify_ms(n, depth) for n in range(2, 18)]
        assert model.verify_prices(2, 17, depth) == one_by_one
        assert all(price is not None and price > 0 for price in one_by_one)
    assert CostModel().verify_prices(2, 5, 0) == [None] * 4


def test_the_gate_picks_the_length_its_expected_tokens_and_prices_say() -> None:
    """The gate reads every length's price in one call and its rates once: the length it
    picks is the one each length's ``expected_tokens`` and ``verify_ms`` pick."""
    costs = CostModel(verify=measured((0, 1500, 3000)))
    gate = LookupGate(costs)
    for proposed, accepted in ((3, 3), (4, 4), (5, 2), (2, 2), (6, 6)):
        gate.observe(proposed, accepted)
    picked = 0
    for depth in (10, 900, 2500, 5000):
        for available in (1, 3, 8, 16):
            single = costs.verify_ms(1, depth)
            assert single is not None
            best_k, best = 0, 0.0
            for k in range(1, min(available, 16) + 1):
                gain = gate.expected_tokens(k) * single / (costs.verify_ms(k + 1, depth) or single)
                if gain > best * 1.005:
                    best_k, best = k, gain
            expected = best_k if best > LookupGate.MIN_GAIN else 0
            assert gate.length(available, 16, depth) == expected, (depth, available)
            picked += expected > 0
    assert picked > 0  # some length pays, so the comparison is not of zeros alone


def test_no_match_is_held_back_without_pricing_a_verification() -> None:
    """Most steps of an answer that copies nothing find no match: the gate holds it back at
    once, and asks the costs nothing (pricing the empty match was most of the host's time
    in a step where the guard had the model paused)."""

    class Counting(CostModel):
        asked = 0

        def verify_ms(self, n_tokens: int, depth: int) -> float | None:
            Counting.asked += 1
            return super().verify_ms(n_tokens, depth)

        def verify_prices(self, first: int, last: int, depth: int) -> list[float | None]:
            Counting.asked += 1
            return super().verify_prices(first, last, depth)

    gate = LookupGate(Counting(verify=measured((0, 1500))))
    assert gate.length(0, 16, 400) == 0
    assert Counting.asked == 0
    assert gate.length(3, 16, 400) >= 0 and Counting.asked > 0  # a match is priced


def test_a_single_pass_priced_near_is_forgotten_with_its_cell() -> None:
    """``measured_near`` keeps the cell that last answered it: once that cell is dropped
    (the least recently measured, past MAX_CELLS), the depth needs a single pass again."""
    cost = PassCost()
    cost.observe(1, 70.0, 0)
    assert cost.measured_near(1, 100)
    for size in (2, 3):  # 64 cells of other sizes push it out
        for depth in range(0, 32 * 128, 128):
            cost.observe(size, 80.0, depth)
    assert not cost.measured_near(1, 100)
    cost.observe(1, 70.0, 3000)
    assert cost.measured_near(1, 3100) and not cost.measured_near(1, 100)
