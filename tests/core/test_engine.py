"""The speculative loop on real llama.cpp with tiny synthetic models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.config import (
    AcceptRule,
    DraftSource,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.engine.engine import Engine
from app.engine.events import (
    GuardEvent,
    GuardReason,
    PrefillEvent,
    RunSummary,
    StepEvent,
    StopReason,
    TokenEvent,
    TokenKind,
)
from app.engine.exactness import NEAR_TIE_LOGIT_MARGIN, compare, is_near_tie
from app.engine.llama.backend import LlamaContext
from app.errors import ContextOverflowError, ModelLoadError
from app.gguf.compat import IncompatiblePairError
from app.models.guard_words import message
from tests.cores import THREADS

PROMPTS = ["the code of the model", "import data for self", "what is the draft token"]


@pytest.fixture()
def engine(tiny_pair: tuple[Path, Path]):
    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
    )
    yield eng
    eng.close()


def run(engine: Engine, request: GenerationRequest, cancel=lambda: False) -> list:
    return list(engine.generate(request, cancel))


def summary_of(events: list) -> RunSummary:
    assert isinstance(events[-1], RunSummary)
    return events[-1]


# Exactness of verification, whatever the economics: on the tiny pair a draft pass costs as
# much as a target pass, so the cost guard would rightly stop drafting, fixed-length or
# adaptive, at once (and then both runs would be target-only). Without it every case drafts.
@pytest.mark.parametrize(
    "spec",
    [
        SpecConfig(draft_max=4, adaptive=False, collapse_guard=False),
        SpecConfig(draft_max=8, adaptive=True, collapse_guard=False),
        SpecConfig(draft_max=6, adaptive=False, p_min=0.3, collapse_guard=False),
    ],
)
def test_greedy_speculative_equals_target_only(engine: Engine, spec: SpecConfig) -> None:
    if spec.adaptive:
        # an adaptive length judges the economics itself, and on the tiny pair nothing pays
        # (a two-token verification costs three single passes): price verifying as a GPU
        # would, nearly flat in its size, so that the adaptive path drafts and is checked
        depth = len(engine.tokenize(PROMPTS[0]))  # where the answers run
        single = engine.costs.verify_ms(1, depth) or 0.05
        for n in range(2, spec.draft_max + 2):
            for _ in range(7):
                engine.costs.observe_verify(n, single * 1.05, depth)
    for text in PROMPTS:
        prompt = engine.tokenize(text)
        request = GenerationRequest(prompt, max_tokens=48, spec=spec)
        spec_run = summary_of(run(engine, request))
        base_run = summary_of(run(engine, replace(request, speculative=False)))
        assert spec_run.tokens == base_run.tokens == 48
        check = compare(prompt, spec_run.token_ids, base_run.token_ids, engine)
        # exact, or a flip of a near-tie by batched arithmetic, reported with its margin
        assert check.identical or check.margin < NEAR_TIE_LOGIT_MARGIN, check.describe()
        assert spec_run.drafted > 0


def test_token_events_describe_how_each_token_was_made(engine: Engine) -> None:
    prompt = engine.tokenize(PROMPTS[0])
    events = run(
        engine,
        GenerationRequest(prompt, max_tokens=40, spec=SpecConfig(draft_max=4, adaptive=False)),
    )
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    kinds = {t.kind for t in tokens}
    assert TokenKind.ACCEPTED in kinds and TokenKind.RESAMPLED in kinds
    for t in tokens:
        assert t.target_prob is not None and 0.0 < t.target_prob <= 1.0
        if t.kind is TokenKind.RESAMPLED:
            assert t.rejected_token is not None and t.rejected_token != t.token_id
            assert t.rejected_piece is not None
    assert [t.index for t in tokens] == list(range(len(tokens)))
    summary = summary_of(events)
    assert summary.accepted == sum(s.accepted for s in steps)
    assert summary.drafted == sum(s.drafted for s in steps)
    assert summary.acceptance_rate == pytest.approx(summary.accepted / summary.drafted)
    assert summary.target_passes_per_token < 1.0
    assert all(s.verify_ms > 0 and s.draft_ms > 0 for s in steps)


def test_step_records_give_acceptance_per_position_and_per_drafter(engine: Engine) -> None:
    """The run's figures, the charts' step events and the per-drafter and per-position
    acceptance all come from the same step records, so they agree exactly."""
    prompt = engine.tokenize(PROMPTS[1])
    spec = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False, ngram_first=False)
    events = run(engine, GenerationRequest(prompt, max_tokens=40, spec=spec))
    steps = [e for e in events if isinstance(e, StepEvent)]
    summary = summary_of(events)
    assert steps and summary.drafted > summary.accepted > 0
    width = max(s.drafted for s in steps)
    assert summary.drafted_per_position == tuple(
        sum(1 for s in steps if s.drafted > i) for i in range(width)
    )
    assert summary.accepted_per_position == tuple(
        sum(1 for s in steps if s.accepted > i) for i in range(width)
    )
    assert sum(summary.accepted_per_position) == summary.accepted
    (model,) = summary.per_drafter
    assert model.name == "draft model"
    assert (model.drafted, model.accepted) == (summary.drafted, summary.accepted)
    assert model.draft_passes == summary.draft_passes > 0
    figures = summary.acceptance_figures()
    assert figures["per_drafter"]["draft model"]["acceptance"] == pytest.approx(
        summary.acceptance_rate, abs=1e-4
    )
    assert figures["acceptance_per_position"][0] == pytest.approx(
        summary.accepted_per_position[0] / summary.drafted_per_position[0], abs=1e-4
    )


def test_combined_drafter_reports_each_source(engine: Engine) -> None:
    """Prompt lookup first, the draft model otherwise: each source's blocks are its own."""
    prompt = engine.tokenize("the model the model the model the model the model")
    spec = SpecConfig(draft_max=8, adaptive=False, collapse_guard=False, ngram_first=True)
    summary = summary_of(run(engine, GenerationRequest(prompt, max_tokens=60, spec=spec)))
    by_name = {d.name: d for d in summary.per_drafter}
    assert "n-gram" in by_name
    assert set(by_name) <= {"n-gram", "draft model"}
    assert sum(d.drafted for d in by_name.values()) == summary.drafted
    assert sum(d.accepted for d in by_name.values()) == summary.accepted
    assert by_name["n-gram"].draft_passes == 0  # a lookup costs no draft pass


def test_ngram_drafting_is_exact(tiny_pair: tuple[Path, Path]) -> None:
    target, _ = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS), None, draft_source=DraftSource.NGRAM
    )
    try:
        prompt = eng.tokenize("the model the model the model the model")
        request = GenerationRequest(prompt, max_tokens=60, spec=SpecConfig(draft_max=4))
        spec_run = summary_of(run(eng, request))
        base_run = summary_of(run(eng, replace(request, speculative=False)))
        check = compare(prompt, spec_run.token_ids, base_run.token_ids, eng)
        assert check.identical or is_near_tie(check.margin), check.describe()
        assert spec_run.drafted > 0
    finally:
        eng.close()


def test_kv_rollback_matches_fresh_evaluation(engine: Engine, tiny_pair) -> None:
    prompt = engine.tokenize(PROMPTS[1])
    events = run(
        engine,
        GenerationRequest(prompt, max_tokens=30, spec=SpecConfig(draft_max=6, adaptive=False)),
    )
    summary = summary_of(events)
    assert any(isinstance(e, TokenEvent) and e.kind is TokenKind.RESAMPLED for e in events)
    sequence = [*prompt, *summary.token_ids]
    # continue the rolled-back speculative cache by one token ...
    ctx = engine.spec_ctx
    ctx.attach_chain(None)  # the full row, not the device chain's candidates
    ctx.truncate(len(sequence) - 1)
    assert ctx.tokens == sequence[: len(sequence) - 1]
    ctx.decode([sequence[-1]], logits="last")
    continued = ctx.logits(-1).copy()
    # ... and compare with a fresh context fed the same tokens one at a time
    fresh = LlamaContext(engine.target, engine.target_spec)
    try:
        for token in sequence:
            fresh.decode([token], logits="last")
        np.testing.assert_allclose(continued, fresh.logits(-1), atol=2e-3, rtol=1e-3)
    finally:
        fresh.close()


def test_cancel_stops_within_one_step(engine: Engine) -> None:
    prompt = engine.tokenize(PROMPTS[2])
    seen = []

    def cancel() -> bool:
        return len(seen) >= 5

    request = GenerationRequest(
        prompt, max_tokens=200, spec=SpecConfig(draft_max=4, adaptive=False)
    )
    for event in engine.generate(request, cancel):
        if isinstance(event, TokenEvent):
            seen.append(event)
        last = event
    assert isinstance(last, RunSummary)
    assert last.stop_reason is StopReason.CANCELLED
    assert 5 <= last.tokens <= 5 + 4  # at most one verification block past the request
    # the engine is still usable afterwards
    again = summary_of(run(engine, GenerationRequest(prompt, max_tokens=5)))
    assert again.tokens == 5


def test_multi_turn_reuses_prefix_and_stays_exact(engine: Engine) -> None:
    first = engine.tokenize(PROMPTS[0])
    run(engine, GenerationRequest(first, max_tokens=10))
    second = (*first, *engine.tokenize(" and import")[1:])
    events = run(engine, GenerationRequest(second, max_tokens=20))
    prefill = next(e for e in events if isinstance(e, PrefillEvent))
    assert prefill.reused_tokens >= len(first) - 1
    spec_ids = summary_of(events).token_ids
    base_ids = summary_of(
        run(engine, GenerationRequest(second, max_tokens=20, speculative=False))
    ).token_ids
    check = compare(second, spec_ids, base_ids, engine)
    assert check.identical or is_near_tie(check.margin)


def test_a_request_that_may_not_reuse_reads_its_whole_prompt_and_answers_the_same(
    engine: Engine,
) -> None:
    """``reuse_prefix=False`` (a served request from another caller): nothing the last
    prompt left in the target's or the draft's cache is kept, and the answer is unchanged."""
    first = engine.tokenize(PROMPTS[0])
    second = (*first, *engine.tokenize(" and import")[1:])
    run(engine, GenerationRequest(first, max_tokens=10))
    kept = run(engine, GenerationRequest(second, max_tokens=20))
    run(engine, GenerationRequest(first, max_tokens=10))
    fresh = run(engine, GenerationRequest(second, max_tokens=20, reuse_prefix=False))
    assert next(e for e in kept if isinstance(e, PrefillEvent)).reused_tokens > 0
    assert next(e for e in fresh if isinstance(e, PrefillEvent)).reused_tokens == 0
    check = compare(second, summary_of(fresh).token_ids, summary_of(kept).token_ids, engine)
    assert check.identical or is_near_tie(check.margin)


def test_context_overflow(tiny_pair: tuple[Path, Path]) -> None:
    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS),
    )
    try:
        long_prompt = eng.tokenize("the model " * 60)
        with pytest.raises(ContextOverflowError, match="context holds 256"):
            run(eng, GenerationRequest(long_prompt, max_tokens=4))
        prompt = eng.tokenize("the model")
        summary = summary_of(run(eng, GenerationRequest(prompt, max_tokens=500)))
        assert summary.stop_reason is StopReason.CONTEXT_FULL
        # the final token is sampled from the last cached position and never needs a slot
        assert len(prompt) + summary.tokens == 256 + 1
    finally:
        eng.close()


def test_stop_string_and_max_tokens(engine: Engine) -> None:
    prompt = engine.tokenize(PROMPTS[0])
    free = summary_of(run(engine, GenerationRequest(prompt, max_tokens=40)))
    stop = free.text[10:14]
    assert stop.strip()
    stopped = summary_of(run(engine, GenerationRequest(prompt, max_tokens=40, stop=(stop,))))
    assert stopped.stop_reason is StopReason.STOP_STRING
    assert stop not in stopped.text
    assert free.text.startswith(stopped.text)


def test_incompatible_pair_names_first_mismatch(tiny_dir: Path, tiny_pair) -> None:
    target, _ = tiny_pair
    other = write_tiny_llama(tiny_dir / "other_vocab.gguf", seed=3, extra_words=("zebra",))
    # same size but one token text differs -> the rule names that token
    with pytest.raises(IncompatiblePairError, match=r"token \d+: target '▁\w+', draft"):
        Engine(ModelSpec(str(target), n_ctx=128), ModelSpec(str(other), n_ctx=128))


def test_corrupt_and_truncated_files_get_clear_errors(tmp_path: Path, tiny_pair) -> None:
    target, _ = tiny_pair
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04 this is a zip, not a model" * 10)
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        Engine(ModelSpec(str(junk)))
    data = target.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ModelLoadError, match="truncated"):
        Engine(ModelSpec(str(cut)))
    header_only = tmp_path / "header.gguf"
    header_only.write_bytes(data[:100])
    with pytest.raises(ModelLoadError, match="damaged or truncated|truncated"):
        Engine(ModelSpec(str(header_only)))
    with pytest.raises(ModelLoadError, match="not found"):
        Engine(ModelSpec(str(tmp_path / "missing.gguf")))


def test_byte_fallback_tokens_stream_whole_characters(engine: Engine) -> None:
    text = "é😀"
    tokens = engine.target.tokenize(text, add_special=False)
    assert len(tokens) > 2  # split into byte tokens by the SPM byte fallback
    from app.engine.loop.textstream import TextStream

    stream = TextStream()
    pieces = [stream.push(engine.target.piece(t)) for t in tokens]
    assert "".join(pieces).strip() == text
    assert all("\ufffd" not in p for p in pieces)


@pytest.mark.parametrize(
    "spec",
    [
        # rejection sampling's output depends on what was drafted: reproducible when drafting
        # is (fixed N, no timing-driven guard)
        SpecConfig(draft_max=4, adaptive=False, collapse_guard=False),
        # sample-and-match with position-keyed randomness reproduces whatever was drafted
        SpecConfig(draft_max=8, adaptive=True, rule=AcceptRule.MATCH),
    ],
)
def test_sampler_seed_reproduces(engine: Engine, spec: SpecConfig) -> None:
    prompt = engine.tokenize(PROMPTS[0])
    sampler = SamplerConfig(temperature=0.9, seed=7, top_k=0, top_p=1.0, min_p=0.0)
    request = GenerationRequest(prompt, max_tokens=30, sampler=sampler, spec=spec)
    a = summary_of(run(engine, request)).token_ids
    b = summary_of(run(engine, request)).token_ids
    assert a == b
    # the seed is what fixes the answer: another seed samples another one
    other = replace(request, sampler=replace(sampler, seed=8))
    assert summary_of(run(engine, other)).token_ids != a


@pytest.mark.parametrize("temperature", [0.8, 1.5])
def test_sample_and_match_with_position_keys_equals_seeded_baseline(
    engine: Engine, temperature: float
) -> None:
    drafted = accepted = 0
    for text in PROMPTS:
        prompt = engine.tokenize(text)
        sampler = SamplerConfig(temperature=temperature, seed=11, top_k=40, top_p=0.95)
        request = GenerationRequest(
            prompt,
            max_tokens=40,
            sampler=sampler,
            # a fixed length: the tiny draft costs as much as its target, so adaptive drafting
            # (priced from the passes timed at load) would rightly draft next to nothing
            spec=SpecConfig(
                draft_max=6, adaptive=False, rule=AcceptRule.MATCH, collapse_guard=False
            ),
        )
        spec_run = summary_of(run(engine, request))
        base_run = summary_of(run(engine, replace(request, speculative=False)))
        # a sampled answer may end after a token or two: drafting is counted over all three
        drafted, accepted = drafted + spec_run.drafted, accepted + spec_run.accepted
        assert spec_run.position_keyed
        check = compare(prompt, spec_run.token_ids, base_run.token_ids, engine)
        assert check.identical or is_near_tie(check.margin), check.describe()
    assert drafted > 0 and accepted > 0


def test_collapse_guard_falls_back_to_target_and_stays_exact(tiny_dir: Path, tiny_pair) -> None:
    target, _ = tiny_pair
    stranger = write_tiny_llama(tiny_dir / "stranger.gguf", seed=9)  # same vocab, unrelated
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(stranger), n_ctx=512, n_threads=THREADS),
    )
    try:
        prompt = eng.tokenize(PROMPTS[0])
        spec = SpecConfig(draft_max=4, adaptive=False, guard_window=4, probe_every=8)
        events = run(eng, GenerationRequest(prompt, max_tokens=80, spec=spec))
        guards = [e for e in events if isinstance(e, GuardEvent)]
        assert guards and guards[0].paused
        assert guards[0].acceptance < guards[0].break_even
        # The named reason follows the measured costs: on a loaded machine the tiny draft's
        # pass can time as dearer than the target's, and then its price is the reason given.
        if guards[0].reason is GuardReason.DISAGREEMENT:
            assert "below the break-even" in message(guards[0], None)
        else:
            assert guards[0].reason is GuardReason.COST
            assert "of a target pass" in message(guards[0], None)
        paused_at = events.index(guards[0])
        after = [e for e in events[paused_at:] if isinstance(e, TokenEvent)]
        assert after and after[0].kind is TokenKind.TARGET
        later = [g for g in guards[1:] if not g.probe_skipped]  # a skipped probe: still paused
        if later:
            assert not later[0].paused  # probing the draft again
        base = summary_of(run(eng, GenerationRequest(prompt, max_tokens=80, speculative=False)))
        check = compare(prompt, summary_of(events).token_ids, base.token_ids, eng)
        assert check.identical or is_near_tie(check.margin)
    finally:
        eng.close()


def test_target_weights_are_loaded_once_for_both_runs(engine: Engine) -> None:
    """The target-only run gets its own KV cache over the same llama.cpp model, not a second
    copy of the weights: llama.cpp itself reports one model pointer behind both contexts."""
    import llama_cpp

    request = GenerationRequest(engine.tokenize(PROMPTS[0]), max_tokens=4)
    run(engine, request)
    run(engine, replace(request, speculative=False))
    spec_ctx, base_ctx = engine.spec_ctx, engine.base_ctx
    assert spec_ctx.ptr != base_ctx.ptr  # two caches …
    behind = {ctypes_address(llama_cpp.llama_get_model(ctx.ptr)) for ctx in (spec_ctx, base_ctx)}
    assert behind == {ctypes_address(engine.target.ptr)}  # … one set of weights
    assert engine.draft is not None
    assert ctypes_address(engine.draft.ptr) not in behind


def ctypes_address(pointer: object) -> int:
    import ctypes

    address = ctypes.cast(pointer, ctypes.c_void_p).value
    assert address
    return address


def test_the_first_token_comes_before_the_draft_model_reads_the_prompt(engine: Engine) -> None:
    """The first token waits only for the target's prefill, as with the target alone; the
    draft model reads the prompt (and the first token) in the second step's catch-up."""
    assert engine.draft_ctx is not None
    spec = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False)
    for text in PROMPTS:
        prompt = engine.tokenize(text)
        engine.draft_ctx.truncate(0)  # nothing of an earlier prompt in the draft's cache
        request = GenerationRequest(prompt, max_tokens=24, spec=spec, reuse_prefix=False)
        read_before_first_token = None
        events = []
        for event in engine.generate(request):
            if isinstance(event, TokenEvent) and read_before_first_token is None:
                read_before_first_token = engine.draft_ctx.n_past
            events.append(event)
        spec_run = summary_of(events)
        assert read_before_first_token == 0
        assert engine.draft_ctx.n_past >= len(prompt)  # it caught up and drafted after
        assert spec_run.drafted > 0
        assert spec_run.verify_passes[0][0] == 1  # the first step verified no block
        base_run = summary_of(run(engine, replace(request, speculative=False)))
        check = compare(prompt, spec_run.token_ids, base_run.token_ids, engine)
        assert check.identical or check.margin < NEAR_TIE_LOGIT_MARGIN, check.describe()


@pytest.mark.parametrize("length", [2, 5])
def test_a_short_or_already_read_prompt_gets_its_first_token_from_one_target_pass(
    engine: Engine, length: int
) -> None:
    """No block is drafted or verified before the first token, however little of the prompt
    the draft has to read: a short prompt, and the same prompt again (nothing unread)."""
    spec = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False, ngram_first=True)
    prompt = engine.tokenize(" ".join(PROMPTS))[:length]
    request = GenerationRequest(prompt, max_tokens=16, spec=spec, reuse_prefix=False)
    for _ in range(2):  # the second time the draft's cache already holds the prompt
        spec_run = summary_of(run(engine, request))
        assert spec_run.verify_passes[0][0] == 1
        assert spec_run.drafted > 0
