"""On a GPU each batch size's first pass loads the kernels chosen for it, so an engine whose
layers are on a GPU runs each size a default block takes once at load, untimed: the first GPU
check priced verifying 2 tokens at 7.7 single passes from the first answer's steps, and the
guard never drafted. No GPU here, so llama.cpp is told it has one (the layers stay on the CPU)."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from app.devtools.test_models.synthetic_dflash import write_dflash_target, write_tiny_dflash
from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.engine import WARM_UP_BATCHES, Engine
from app.engine.events import RunSummary
from app.engine.llama.backend import LlamaContext
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

FORCED = SpecConfig(draft_max=3, adaptive=False, collapse_guard=False, ngram_first=False)


@pytest.fixture()
def passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[LlamaContext, int, str]]:
    """Every decode: its context, its number of tokens and the logits it asked for."""
    seen: list[tuple[LlamaContext, int, str]] = []
    decode = LlamaContext.decode

    def recorded(self: LlamaContext, tokens: list[int], **kwargs: object) -> None:
        seen.append((self, len(tokens), str(kwargs.get("logits", "last"))))
        decode(self, tokens, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LlamaContext, "decode", recorded)
    return seen


def _engine(pair: tuple[Path, Path]) -> Engine:
    target, draft = pair
    return Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS),
    )


def _answer(engine: Engine) -> tuple[tuple[int, ...], int, int]:
    """A fixed policy's answer: its tokens, and the tokens drafted and accepted."""
    request = GenerationRequest((1, 300, 310, 320), 24, spec=FORCED)
    summary = list(engine.generate(request))[-1]
    assert isinstance(summary, RunSummary)
    return summary.token_ids, summary.drafted, summary.accepted


def test_an_engine_on_a_gpu_runs_each_block_size_once_at_load_and_files_none(
    tiny_pair: tuple[Path, Path],
    passes: list[tuple[LlamaContext, int, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_cpu = _engine(tiny_pair)
    try:
        assert not on_cpu.target.layers_on_gpu
        assert all(n == 1 for _, n, _ in passes)  # on a CPU: single passes only
        expected = _answer(on_cpu)
    finally:
        on_cpu.close()

    passes.clear()
    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: True)
    engine = _engine(tiny_pair)
    try:
        assert engine.target.layers_on_gpu and engine.draft is not None
        target, draft = engine.spec_ctx, engine.draft_ctx
        batches = [(ctx, n, logits) for ctx, n, logits in passes if n > 1]
        assert [n for ctx, n, _ in batches if ctx is target] == list(WARM_UP_BATCHES)
        assert [n for ctx, n, _ in batches if ctx is draft] == list(WARM_UP_BATCHES)
        assert {logits for ctx, _, logits in batches if ctx is target} == {"all"}
        # untimed: no verification of several tokens is priced, and both caches are empty
        assert engine.costs.verify.sizes_measured_near(0) == [1]
        assert target.n_past == 0 and draft is not None and draft.n_past == 0
        assert _answer(engine) == expected
    finally:
        engine.close()


def test_a_block_drafter_on_a_gpu_answers_as_it_did_without_the_warm_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's features feed the head: the warm-up's passes leave none behind (the same
    blocks are drafted and accepted)."""
    target = write_dflash_target(tmp_path / "target.gguf")
    pair = (target, write_tiny_dflash(tmp_path / "dflash.gguf", target, variant="dflash"))
    answers = []
    for on_gpu in (False, True):
        monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda on=on_gpu: on)
        engine = _engine(pair)
        try:
            assert engine.block_head is not None and engine.target.layers_on_gpu is on_gpu
            answers.append(_answer(engine))
        finally:
            engine.close()
    assert answers[0] == answers[1]
    tokens, drafted, _ = answers[0]
    assert len(tokens) == 24 and drafted > 0
