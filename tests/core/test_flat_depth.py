"""A drafting step's work does not grow with the conversation: counted, not timed.

The committed sequence and the draft's cache mirror are lists that count every element read
from them. Each step may read what changed since the last one (the tokens the target added,
the lookup's suffix and continuation), never the whole conversation.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.drafters.base import DraftLimits
from app.engine.drafters.model import ModelDrafter
from app.engine.engine import Engine
from app.engine.loop.textstream import TextStream
from app.engine.randomness import Randomness
from app.engine.sequences import common_prefix_length
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

DEPTHS = (64, 1500)
STEPS = 16
SPEC = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False)


class CountingList(list):
    """A list that counts the elements read from it (by index, slice or iteration)."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        got = super().__getitem__(index)
        self.reads += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in super().__iter__():
            self.reads += 1
            yield item


@pytest.fixture(scope="module")
def engine(tiny_pair: tuple[Path, Path]):
    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=2048, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=2048, n_threads=THREADS),
    )
    yield eng
    eng.close()


def _prompt(engine: Engine, depth: int) -> list[int]:
    words = "the code of the model imports data for self and what is the draft token "
    tokens = list(engine.tokenize(words * (depth // 8 + 1)))
    return tokens[:depth]


def _drafting_steps(engine: Engine, depth: int, *, ngram_first: bool) -> tuple[list[int], int]:
    """Elements read per step by the engine's drafter (but for the draft model's first
    proposal, which reads the prompt), and each catch-up checked against a full comparison
    of the draft's cache with the committed sequence."""
    prompt = _prompt(engine, depth)
    spec = replace(SPEC, ngram_first=ngram_first)
    drafter = engine._drafter(GenerationRequest(tuple(prompt), spec=spec), Randomness(1))
    drafter.prefill(prompt)
    ctx = engine.draft_ctx
    assert ctx is not None
    ctx.tokens = cached = CountingList(ctx.tokens)
    committed = CountingList(prompt)
    reads, model_steps = [], 0
    for step in range(STEPS):
        # what the old loop did every step: compare the whole cache with the whole sequence
        expected = min(
            common_prefix_length(list.copy(cached), list.copy(committed)), len(committed) - 1
        )
        before = committed.reads + cached.reads
        block = drafter.propose(committed, DraftLimits(SPEC.draft_max))
        read = committed.reads + cached.reads - before
        if block.source == ModelDrafter.name:
            model_steps += 1
            assert block.catch_up == len(committed) - expected, step
            if model_steps == 1:  # the draft model reads the prompt late: here, once
                read = 0
        reads.append(read)
        # the target's stand-in: keep half of the block, then a token of its own
        kept = block.tokens[: len(block.tokens) // 2]
        list.extend(committed, [*kept, (step * 7 + 3) % 50 + 4])
    return reads, model_steps


@pytest.mark.parametrize("ngram_first", [False, True])
def test_a_drafting_step_reads_what_changed_not_the_conversation(
    engine: Engine, ngram_first: bool
) -> None:
    (shallow, shallow_model), (deep, deep_model) = (
        _drafting_steps(engine, d, ngram_first=ngram_first) for d in DEPTHS
    )
    if not ngram_first:
        assert shallow_model == deep_model == STEPS
    # a step reads the new tokens, the draft block and the lookup's n-grams: a few dozen at
    # most at any depth (a full comparison read over 3,000 at the deep end, every step)
    bound = 4 * (SPEC.draft_max + SPEC.ngram_n + 2)
    assert max(shallow) <= bound and max(deep) <= bound, (shallow, deep)
    assert max(deep) < DEPTHS[0]


def test_the_text_stream_releases_the_same_text_piece_by_piece() -> None:
    stream = TextStream(stop=["</end>"])
    pieces = [stream.push(p) for p in (b"ab", b"c</", b"en", b"x", "é".encode()[:1])]
    pieces.append(stream.push("é".encode()[1:]))
    assert "".join(pieces) == stream.text == "abc</enxé"
    assert stream.flush() == "" and stream.text == "abc</enxé"
