"""A pass's time is the time until its results exist, not until it was queued.

A GPU backend returns from ``llama_decode`` (and ``llama_process``, the heads that read the
target's features) once the pass is launched; the results are waited for later, when they
are read. The first GPU check measured what that does when the timer stops at the return:
an H200 pass of 1.9 ms timed at 0.18 ms, the wait counted as host time, and a draft model
that looked four times as costly as its target, so it never drafted. No GPU here, so a
``llama_synchronize`` that sleeps stands for the device finishing the queued pass: its time
must land in the passes' time, and none of it in the host's."""

from __future__ import annotations

import time
from pathlib import Path

import llama_cpp
import pytest

from app.devtools.test_models.synthetic_dflash import write_dflash_target, write_tiny_dflash
from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

QUEUED_S = 0.01  # what the stand-in device still has to do when the call returns
FORCED = SpecConfig(draft_max=3, adaptive=False, collapse_guard=False, ngram_first=False)


@pytest.fixture()
def device_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``llama_synchronize`` takes QUEUED_S, as waiting for a queued GPU pass would."""
    calls = [0]
    synchronize = llama_cpp.llama_synchronize

    def finish_the_queued_pass(ctx: object) -> None:
        calls[0] += 1
        time.sleep(QUEUED_S)
        synchronize(ctx)

    monkeypatch.setattr(llama_cpp, "llama_synchronize", finish_the_queued_pass)
    return calls


def answer(target: Path, draft: Path, speculative: bool, waits: list[int]) -> RunSummary:
    engine = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS),
    )
    waits[0] = 0  # loading decodes too (a warm-up pass): only the answer's passes count here
    try:
        request = GenerationRequest((1, 300, 310, 320), 12, spec=FORCED, speculative=speculative)
        summary = list(engine.generate(request))[-1]
    finally:
        engine.close()
    assert isinstance(summary, RunSummary)
    return summary


@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "target-only"])
def test_the_wait_for_a_queued_pass_counts_as_the_pass_not_the_host(
    tiny_pair: tuple[Path, Path], device_waits: list[int], speculative: bool
) -> None:
    summary = answer(*tiny_pair, speculative, device_waits)
    assert summary.passes > 0 and device_waits[0] >= summary.passes
    waited_s = device_waits[0] * QUEUED_S
    assert summary.decode_s >= waited_s
    # the host's share is what is left: none of the waits (a generous bound for a busy core)
    assert summary.elapsed_s - summary.decode_s < waited_s / 2


def test_a_block_drafters_feature_pass_counts_its_wait_too(
    tmp_path: Path, device_waits: list[int]
) -> None:
    target = write_dflash_target(tmp_path / "target.gguf")
    head = write_tiny_dflash(tmp_path / "dflash.gguf", target, variant="dflash")
    summary = answer(target, head, True, device_waits)
    assert summary.drafted > 0
    waited_s = device_waits[0] * QUEUED_S
    assert summary.decode_s >= waited_s
    assert summary.elapsed_s - summary.decode_s < waited_s / 2
