"""A head that reads the target's rows after every decode (EAGLE-3, the block drafters) rests
while the guard has it paused: it keeps the rows, reads none of them, and reads all it kept in
one batch when it drafts again, after which it drafts what a head that read every decode does.
A paused draft then costs nothing, as the guard promises."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.devtools.test_models.synthetic_dflash import write_tiny_dflash_pair
from app.devtools.test_models.synthetic_eagle3 import write_tiny_eagle3_pair
from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary
from app.engine.llama.feature_head import HELD_ROWS
from app.engine.policy.guard import GuardMemory
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

PROMPT = [1, *range(270, 310)]  # 41 tokens


@pytest.fixture(scope="module", params=["dflash", "dspark", "eagle3"])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp(f"resting-{request.param}")
    if request.param == "eagle3":
        target, head = write_tiny_eagle3_pair(folder)
    else:
        target, head = write_tiny_dflash_pair(folder, request.param)
    eng = Engine(
        ModelSpec(str(target), n_ctx=2048, n_threads=THREADS),
        ModelSpec(str(head), n_ctx=2048, n_threads=THREADS),
    )
    yield eng
    eng.close()


def _draft(engine: Engine, tokens: list[int]) -> list[int]:
    """The head's draft after ``tokens`` (the target holds all but the last)."""
    if engine.block_head is not None:
        drafted, _ = engine.block_head.draft(tokens[-1], len(tokens) - 1, 4, confidences=False)
        return drafted
    assert engine.eagle3 is not None
    return [int(engine.eagle3.first(tokens).argmax())]


def _decode_after_a_start(engine: Engine, tokens: list[int], *, resting: bool) -> float:
    """The target decodes ``tokens`` but the last, the first 8 at once, then one by one; the
    head rests from the ninth on where ``resting``, and every token is followed by a rejected
    block (decoded, rolled back) and the question between steps. Returns the head's reading
    time when its rest began."""
    ctx, head = engine.spec_ctx, engine.block_head or engine.eagle3
    assert head is not None
    ctx.truncate(0)
    ctx.decode(tokens[:8], logits="none")
    head.rest(resting)
    read_before = head.decode_s
    for token in tokens[8:-1]:
        ctx.decode([token], logits="none")
        ctx.decode([7, 8, 9], logits="all")
        ctx.truncate(ctx.n_past - 3)
        head.rest(resting)  # between steps, as the drafting turn asks
    return read_before


def test_a_resting_head_reads_nothing_and_drafts_as_before_once_it_reads_what_it_kept(
    engine: Engine,
) -> None:
    head = engine.block_head or engine.eagle3
    assert head is not None
    _decode_after_a_start(engine, PROMPT, resting=False)
    expected = _draft(engine, PROMPT)
    read_before = _decode_after_a_start(engine, PROMPT, resting=True)
    assert head.decode_s == read_before  # nothing read while resting
    head.rest(False)
    assert head.decode_s > read_before  # what it kept, read in one batch
    assert _draft(engine, PROMPT) == expected


def test_a_long_rest_reads_its_rows_in_batches_of_a_bounded_size(engine: Engine) -> None:
    head = engine.block_head or engine.eagle3
    assert head is not None
    tokens = [1, *([5, 6, 7, 8] * 100)]  # 401 tokens: more than a rest keeps
    assert len(tokens) > HELD_ROWS + 8
    _decode_after_a_start(engine, tokens, resting=False)
    expected = _draft(engine, tokens)
    read_before = _decode_after_a_start(engine, tokens, resting=True)
    assert head.decode_s > read_before  # it read once it kept HELD_ROWS, between steps
    assert sum(len(rows) for _, rows in head._held) < HELD_ROWS
    head.rest(False)
    assert _draft(engine, tokens) == expected


def test_what_a_rest_keeps_is_bounded_with_no_step_between_its_decodes(engine: Engine) -> None:
    head = engine.block_head or engine.eagle3
    assert head is not None
    ctx = engine.spec_ctx
    ctx.truncate(0)
    ctx.decode([1, 2, 3], logits="none")
    head.rest(True)
    read_before = head.decode_s
    for token in [5, 6, 7, 8] * (HELD_ROWS + 20):  # small decodes, never asked between
        ctx.decode([token], logits="none")
    assert head.decode_s > read_before
    assert sum(len(rows) for _, rows in head._held) < 4 * HELD_ROWS
    head.rest(False)


def test_a_prompt_decoded_while_resting_is_read_at_once_and_what_was_kept_first(
    engine: Engine,
) -> None:
    head = engine.block_head or engine.eagle3
    assert head is not None
    tokens = [1, *([5, 6, 7, 8] * 100)]
    _decode_after_a_start(engine, tokens[:40], resting=False)
    engine.spec_ctx.decode(tokens[39:-1], logits="none")
    expected = _draft(engine, tokens)
    _decode_after_a_start(engine, tokens[:40], resting=True)
    assert head._held
    engine.spec_ctx.decode(tokens[39:-1], logits="none")  # a batch no rest keeps
    assert not head._held
    head.rest(False)
    assert _draft(engine, tokens) == expected


def test_an_answer_paused_throughout_reads_nothing_and_is_the_targets(engine: Engine) -> None:
    """A pause for cost carried from the last answer: the head rests from the first step, reads
    none of the target's rows in the whole answer, and the answer is target-only's."""
    head = engine.block_head or engine.eagle3
    assert head is not None
    spec = SpecConfig(draft_max=4, ngram_first=False)
    request = GenerationRequest(tuple(PROMPT), 64, spec=spec, ignore_eos=True)
    base = list(engine.generate(replace(request, speculative=False)))[-1]
    name = head.variant if engine.block_head is not None else "EAGLE-3"
    for _ in range(2):  # the first reads the prompt; the second finds it read
        engine._guard_memory[name] = GuardMemory(True, 1024, 5, None)
        read_before = head.decode_s
        run = list(engine.generate(request))[-1]
        assert isinstance(run, RunSummary) and isinstance(base, RunSummary)
        assert run.paused_tokens == run.tokens == 64 and run.draft_passes == 0
        assert run.token_ids == base.token_ids
    assert head.decode_s == read_before
