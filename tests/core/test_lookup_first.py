"""Prompt lookup next to a draft model: which source drafts, and how long lookup blocks are.

The combined drafter is the one the engine builds for a real (tiny) pair; the target's
verdicts are played in by hand, and the verification prices set by hand, so each policy
rule is seen on its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.config import GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.drafters.base import DraftBlock, DraftLimits
from app.engine.drafters.combined import CombinedDrafter
from app.engine.drafters.lookup import NgramDrafter
from app.engine.engine import Engine
from app.engine.policy.costs import CostModel
from app.engine.randomness import Randomness
from tests.cores import THREADS


@pytest.fixture()
def combined(tiny_pair: tuple[Path, Path]):
    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(draft), n_threads=THREADS),
    )
    try:
        # the verification prices lookups and rates are judged by: 10 ms single, 30 ms for
        # 17 (not the tiny pair's own, timed at load)
        engine.costs = CostModel()
        engine.costs.observe_verify(1, 10.0, 0)
        engine.costs.observe_verify(17, 30.0, 0)
        engine.costs.observe_draft_pass(1, 2.0, 0)
        request = GenerationRequest((1, 2, 3), sampler=SamplerConfig(), spec=SpecConfig())
        drafter = engine._drafter(request, Randomness(None))
        assert isinstance(drafter, CombinedDrafter)
        yield drafter
    finally:
        engine.close()


# a conversation that repeats itself: after "... 40 41" the lookup proposes "42 43 ..."
REPEATED = list(range(10, 70)) + list(range(30, 42))
LIMITS = DraftLimits(16)


def _play(drafter: CombinedDrafter, committed: list[int], accepted: int | None) -> DraftBlock:
    """Propose, then let the target accept ``accepted`` tokens (None: all of them)."""
    block = drafter.propose(committed, LIMITS)
    drafter.observe(block, len(block.tokens) if accepted is None else accepted)
    return block


# a long copied run: after "... 40 41" the lookup can propose up to 28 tokens
LONG = list(range(10, 70)) + list(range(10, 42))


def test_a_lookup_match_goes_first_and_grows_while_accepted(combined) -> None:
    committed = list(LONG)
    lengths = []
    for _ in range(6):
        block = _play(combined, committed, None)
        assert block.source == "n-gram" and block.passes == 0
        lengths.append(len(block.tokens))
        committed += block.tokens
    assert 2 <= lengths[0] < lengths[-1]  # a first match is tried short, then lengthened
    assert lengths == sorted(lengths)


def test_a_missed_lookup_comes_back_short(combined) -> None:
    committed = list(LONG)
    for _ in range(4):
        committed += _play(combined, committed, None).tokens
    long_run = len(_play(combined, committed, 1).tokens)  # the answer departs: an edit
    retry = _play(combined, committed, None)
    assert retry.source == "n-gram"  # still first: its rate is not yet below the model's
    assert 2 <= len(retry.tokens) < long_run


def test_without_a_match_the_model_drafts(combined) -> None:
    block = _play(combined, list(range(10, 70)), None)  # nothing repeats
    assert block.source == "draft model" and block.passes >= 1


def test_a_lookup_block_stops_at_a_token_that_ends_the_answer(combined) -> None:
    assert combined.lookup.gate is not None
    for _ in range(4):  # lookups have been accepted whole: long blocks
        combined.lookup.gate.observe(16, 16)
    ends = DraftLimits(16, ends_answer=lambda token: token == 45)
    block = combined.propose(REPEATED, ends)
    assert block.source == "n-gram" and block.tokens == [42, 43, 44, 45]


def test_a_model_block_stops_at_a_token_that_ends_the_answer(combined) -> None:
    committed = list(range(10, 70))
    block = combined.model.propose(committed, DraftLimits(16, ends_answer=lambda _: True))
    assert len(block.tokens) == 1 and block.passes == 1  # the catch-up pass, nothing after


def test_no_draft_runs_past_the_end_of_a_real_answer(smollm2_pair, monkeypatch) -> None:
    """SmolLM2 answers end with <|im_end|>; both models agree on what follows it, so before
    this rule blocks ran on past the end and paid draft passes for tokens never used."""
    target, draft = smollm2_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(draft), n_threads=THREADS),
    )
    blocks: list[list[int]] = []
    observe = CombinedDrafter.observe

    def record(self: CombinedDrafter, block: DraftBlock, accepted: int) -> None:
        blocks.append(list(block.tokens))
        observe(self, block, accepted)

    monkeypatch.setattr(CombinedDrafter, "observe", record)
    try:
        prompt = engine.tokenize_chat([{"role": "user", "content": "Say hello in one word."}])
        events = list(engine.generate(GenerationRequest(prompt, max_tokens=64)))
        summary = events[-1]
        assert summary.stop_reason.value == "eog"
        ended = [b for b in blocks if any(engine.target.is_eog(t) for t in b)]
        assert all(engine.target.is_eog(b[-1]) for b in ended)
    finally:
        engine.close()


def test_the_drafters_say_what_the_loop_asks_of_them(combined) -> None:
    """Whether a source pays draft passes (the costs may pause it before the first step) and
    whether its lookups go on while the guard has the model paused: asked, not told by class."""
    assert combined.pays_passes and combined.lookups_while_paused
    assert combined.model.pays_passes and not combined.model.lookups_while_paused
    assert not combined.lookup.pays_passes and not combined.lookup.lookups_while_paused


def test_while_the_model_is_paused_only_lookups_draft(combined) -> None:
    paused = DraftLimits(16, model=False, guard_paused=True)
    block = combined.propose(REPEATED, paused)
    assert block.source == "n-gram" and block.passes == 0 and block.tokens[:2] == [42, 43]
    nothing = combined.propose(list(range(10, 70)), paused)  # no match: the target alone
    assert nothing.tokens == [] and nothing.passes == 0
    # a fixed length has no gate to judge lookups by: the guard pauses them with the model
    lookup = NgramDrafter(SpecConfig(adaptive=False), min_match=2)
    fixed = CombinedDrafter(lookup, combined.model, combined.costs)
    assert fixed.propose(REPEATED, paused).tokens == []
    assert fixed.propose(REPEATED, LIMITS).tokens[:2] == [42, 43]


def test_a_long_prompt_first_measures_a_target_pass_at_its_depth(
    tiny_pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm-up prices passes at the start of a context; 400 tokens deep the first step runs
    target-only to price a single pass there, and the answer is the target's own."""
    from app.engine.policy.controller import DraftController
    from app.engine.step_record import StepRecord

    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=1024, n_threads=THREADS),
    )
    records: list[StepRecord] = []
    observe = DraftController.observe

    def record(self: DraftController, step: StepRecord) -> None:
        records.append(step)
        observe(self, step)

    monkeypatch.setattr(DraftController, "observe", record)
    try:
        words = "the code of the model import data for self what is the draft token"
        prompt = engine.tokenize(" ".join([words] * 6))
        assert len(prompt) > 300
        assert engine.costs.needs_single_pass(len(prompt))
        request = GenerationRequest(prompt, max_tokens=24, ignore_eos=True)
        spec = list(engine.generate(request))[-1]
        first = records[0]
        assert first.depth == len(prompt) and first.proposed == 0 and not first.paused
        assert not engine.costs.needs_single_pass(len(prompt))
        assert any(r.proposed for r in records[1:])  # then drafting
        base = list(engine.generate(replace(request, speculative=False)))[-1]
        assert spec.token_ids == base.token_ids
    finally:
        engine.close()


def test_a_lookup_behind_the_model_returns_when_its_held_matches_are_written(combined) -> None:
    """After a refused match the lookup's measured rate sits far below the model's, and a
    rate recovers only slowly. While the model drafts, the lookup's match is still held and
    judged by what the target writes: when the answer starts copying, those matches say so
    and the lookup goes first again within a few steps (the CPU pair's copy-edits stayed
    with the model for 10 steps of 12 tokens, at 1.40x, because nothing judged the lookup)."""
    gate = combined.lookup.gate
    assert gate is not None
    lookup, model = combined.rates["n-gram"], combined.rates[combined.model.name]
    committed = list(range(10, 70)) + [80, 81]  # nothing repeats yet
    lookup.value, model.value = 0.005, 0.2  # a refused lookup, a model drafting well
    gate.first.value = 0.05
    block = combined.propose(committed, LIMITS)
    assert block.source == "draft model"
    committed += [30, 31]  # the answer starts copying "30 31 32 ..." from earlier on
    sources = []
    for _ in range(6):
        block = combined.propose(committed, LIMITS)
        sources.append(block.source)
        if block.source == "n-gram":
            break
        committed += [committed[-1] + 1, committed[-1] + 2]  # the target copies on
    assert sources[-1] == "n-gram" and len(sources) <= 4, sources
    assert len(block.tokens) >= 2


def test_a_draft_that_can_never_pay_is_paused_before_the_answer_pays_a_pass(
    tiny_pair: tuple[Path, Path],
) -> None:
    """Where the measured costs say no draft length beats the target alone even with every
    drafted token accepted, the answer starts paused and says why, instead of paying two
    steps of draft passes before the guard looks (a new answer starts unpaused when the
    last one ended on a probe)."""
    from app.engine.events import GuardEvent, PrefillEvent, RunSummary

    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
    )
    try:
        # a draft pass as dear as a hundred target passes, over each cell's whole stretch of
        # recent passes (fewer would read as a burst over the warm-up's real passes: noisy)
        for _ in range(32):
            engine.costs.observe_draft_pass(1, 1000.0, 0)
            for n in (1, 2, 5, 9, 17):
                engine.costs.observe_verify(n, 10.0 + 0.5 * n, 0)
        prompt = engine.tokenize("the code of the model import data for self")
        request = GenerationRequest(prompt, max_tokens=16, ignore_eos=True)
        events = list(engine.generate(request))
        assert isinstance(events[0], PrefillEvent)
        pause = events[1]
        assert isinstance(pause, GuardEvent) and pause.paused and pause.reason == "cost"
        assert pause.never_pays
        spec = events[-1]
        assert isinstance(spec, RunSummary)
        assert spec.draft_passes == 0 and spec.guard_pauses == 1
        # paused from the start: the draft never read the prompt (the warm-up left it empty)
        assert engine.draft_ctx is not None and engine.draft_ctx.n_past == 0
        base = list(engine.generate(replace(request, speculative=False)))[-1]
        assert isinstance(base, RunSummary) and spec.token_ids == base.token_ids
        # the single passes of steps that drafted nothing: every step target-only, and in the
        # paused answer every step but the lookups'
        assert len(base.lone_passes) == len(base.verify_passes) == base.tokens
        assert len(spec.lone_passes) == len(spec.verify_passes) - spec.steps
    finally:
        engine.close()


def test_the_draft_model_reads_the_prompt_in_its_first_proposal(
    tiny_pair: tuple[Path, Path],
) -> None:
    """The target's prefill alone reads the prompt (the first token waits for nothing else);
    the draft model's first proposal catches up over the whole of it and drafts what a draft
    that had read the prompt already drafts."""
    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
    )
    try:
        prompt = list(engine.tokenize("the code of the model import data for self and"))
        request = GenerationRequest(tuple(prompt), spec=SpecConfig(adaptive=False))
        ctx = engine.draft_ctx
        assert ctx is not None
        committed = [*prompt, prompt[3]]  # the target wrote a token since
        blocks = []
        for read_before in (False, True):
            ctx.truncate(0)
            drafter = engine._drafter(request, Randomness(None))
            drafter.prefill(prompt)
            assert ctx.n_past == 0
            if read_before:  # as if the draft had read the prompt beside the target
                ctx.decode(prompt[:-1], logits="none")
            blocks.append(drafter.model.propose(committed, DraftLimits(4)))  # type: ignore[attr-defined]
        late, read = blocks
        assert late.catch_up == len(prompt) + 1 and read.catch_up == 2
        assert late.tokens == read.tokens and len(late.tokens) == 4
    finally:
        engine.close()
