"""The timed passes after a load run a few milliseconds apart, one moment: a burst of other
programs slows them all. Each model files one price from them, the fastest, so a burst at load
does not outvote the answer's own lone passes in the cost lines' median (three slowed warm-up
passes had priced a single target pass at 16.8 ms where the answer's own took 8.6, and a draft
as dear as its target drafted a whole answer against that price)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.engine.config import ModelSpec
from app.engine.engine import WARM_UP_TIMED, Engine
from app.engine.llama.backend import LlamaContext
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

BURST_MS = 60.0


def test_a_burst_on_the_warm_up_passes_does_not_set_the_first_price(
    tiny_pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    decode = LlamaContext.decode
    seen: list[LlamaContext] = []

    def slowed(self: LlamaContext, tokens: list[int], **kwargs: object) -> None:
        """The target's first timed warm-up passes, all but the last, slowed by a burst."""
        decode(self, tokens, **kwargs)  # type: ignore[arg-type]
        seen.append(self)
        if self is seen[0] and 2 <= len(seen) <= WARM_UP_TIMED:
            time.sleep(BURST_MS / 1000.0)

    monkeypatch.setattr(LlamaContext, "decode", slowed)
    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS),
    )
    try:
        assert seen[: WARM_UP_TIMED + 1] == [engine.spec_ctx] * (WARM_UP_TIMED + 1)
        price = engine.costs.verify_ms(1, 0)
        assert price is not None and price < BURST_MS / 2  # the pass the burst missed
        # one price per model: the answer's first lone pass weighs as much as the load's
        for pass_cost in (engine.costs.verify, engine.costs.draft):
            assert pass_cost.passes_near(0) == 1
    finally:
        engine.close()
