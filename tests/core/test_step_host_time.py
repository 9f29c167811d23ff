"""A run's host time per step counts all of each step: what the drafter and the controller
learn from the step's record too, which the record itself cannot hold."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.drafters.base import DraftBlock
from app.engine.engine import Engine
from app.engine.events import Event, RunSummary
from app.engine.loop.drafting_turn import DraftingTurn
from app.engine.step_record import StepRecord
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

LEARNING_S = 0.003


def test_the_time_a_step_spends_learning_counts_as_its_host_time(
    tiny_pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
    )
    learn = DraftingTurn.learn

    def slow_learn(
        self: DraftingTurn, record: StepRecord, block: DraftBlock | None, *, last: bool = False
    ) -> Iterator[Event]:
        time.sleep(LEARNING_S)
        yield from learn(self, record, block, last=last)

    spec = SpecConfig(draft_max=3, adaptive=False, collapse_guard=False)
    try:
        prompt = engine.tokenize("import data for self")
        request = GenerationRequest(prompt, max_tokens=16, spec=spec, ignore_eos=True)
        monkeypatch.setattr(DraftingTurn, "learn", slow_learn)
        summary = list(engine.generate(request))[-1]
    finally:
        engine.close()
    assert isinstance(summary, RunSummary) and summary.passes > 0
    assert summary.step_host_s >= LEARNING_S * summary.passes
    assert summary.step_host_s <= summary.elapsed_s - summary.decode_s
