"""Sampling on the device: llama.cpp runs the sampler chain after each decode and returns each
output's few candidates, so no full-vocabulary row of logits crosses into Python on the hot
path; what is sampled, judged and shown is unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.engine.config import (
    DraftSource,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.engine.engine import Engine
from app.engine.events import RunSummary, TokenEvent
from app.engine.llama.backend import LlamaContext
from app.engine.sampling import (
    DEVICE,
    GREEDY_CANDIDATES,
    HOST_ASKED,
    HOST_ON_CPU,
    CandidateRow,
    HostRow,
    distribution,
    top_two_margin,
)
from tests.cores import THREADS

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

PROMPTS = ["the code of the model", "import data for self", "what is the draft token"]
FORCED = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False)
CHAINS = [
    SamplerConfig(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=3),
    SamplerConfig(temperature=0.7, top_k=20, top_p=0.8, min_p=0.0, seed=3),
    SamplerConfig(temperature=1.3, top_k=8, top_p=1.0, min_p=0.1, seed=3),
]


@pytest.fixture(scope="module")
def engine(tiny_pair: tuple[Path, Path]):
    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=THREADS, sampling="device"),
        ModelSpec(str(draft), n_ctx=512, n_threads=THREADS, sampling="device"),
    )
    yield eng
    eng.close()


@pytest.fixture()
def full_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the full-vocabulary rows read into Python (``LlamaContext.logits``)."""
    reads = [0]
    logits = LlamaContext.logits

    def counted(self: LlamaContext, i: int = -1) -> np.ndarray:
        reads[0] += 1
        return logits(self, i)

    monkeypatch.setattr(LlamaContext, "logits", counted)
    return reads


def summary(engine: Engine, request: GenerationRequest) -> tuple[RunSummary, list[TokenEvent]]:
    events = list(engine.generate(request))
    assert isinstance(events[-1], RunSummary)
    return events[-1], [e for e in events if isinstance(e, TokenEvent)]


@pytest.mark.parametrize("sampler", [SamplerConfig(), CHAINS[0]], ids=["greedy", "sampled"])
@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "target-only"])
def test_no_full_row_reaches_python_on_the_device_path(
    engine: Engine, full_rows: list[int], sampler: SamplerConfig, speculative: bool
) -> None:
    prompt = engine.tokenize(PROMPTS[0])
    request = GenerationRequest(
        prompt, max_tokens=24, sampler=sampler, spec=FORCED, speculative=speculative
    )
    run, tokens = summary(engine, request)
    assert run.sampling == DEVICE
    assert full_rows[0] == 0
    assert run.tokens == 24
    assert all(t.target_prob is not None and 0.0 < t.target_prob <= 1.0 for t in tokens)
    if speculative:
        assert run.drafted > 0
        drafted = [t for t in tokens if t.draft_prob is not None]
        assert drafted and all(0.0 < t.draft_prob <= 1.0 for t in drafted)


def test_a_chain_without_top_k_samples_on_the_host_and_says_so(
    engine: Engine, full_rows: list[int]
) -> None:
    sampler = SamplerConfig(temperature=0.8, top_k=0, top_p=0.9, min_p=0.05, seed=1)
    prompt = engine.tokenize(PROMPTS[1])
    request = GenerationRequest(prompt, max_tokens=12, sampler=sampler, spec=FORCED)
    run, _ = summary(engine, request)
    assert run.sampling.startswith("host (no top-k")
    assert full_rows[0] > 0
    assert engine.spec_ctx.chain is None and engine.draft_ctx.chain is None


def host_greedy(
    ctx: LlamaContext, prompt: tuple[int, ...], n: int
) -> list[tuple[int, float, float]]:
    """Greedy decoding with the full rows on the host: each token with its softmax over the
    row's top 40 logits (what the device's candidates give as p(x)) and over the whole row."""
    ctx.attach_chain(None)
    ctx.truncate(0)
    ctx.decode(list(prompt), logits="last")
    out = []
    for _ in range(n):
        row = ctx.logits(-1).astype(np.float64)
        best = int(np.argmax(row))
        top = np.sort(row)[-GREEDY_CANDIDATES:]
        out.append(
            (
                best,
                1.0 / float(np.exp(top - row[best]).sum()),
                1.0 / float(np.exp(row - row[best]).sum()),
            )
        )
        ctx.decode([best], logits="last")
    return out


def test_device_greedy_equals_host_argmax_and_its_p_comes_from_the_candidates(
    engine: Engine,
) -> None:
    host = LlamaContext(engine.target, engine.target_spec)
    try:
        for text in PROMPTS:
            prompt = engine.tokenize(text)
            expected = host_greedy(host, prompt, 20)
            for speculative in (False, True):
                request = GenerationRequest(
                    prompt, max_tokens=20, spec=FORCED, speculative=speculative, ignore_eos=True
                )
                run, tokens = summary(engine, request)
                assert list(run.token_ids) == [token for token, _, _ in expected]
                if not speculative:  # one-token passes, as the host's
                    # The cache may differ in its last bits from the host's (some CPUs take
                    # another kernel for the engine's prompt pass: 1.6e-4 seen on an EPYC);
                    # the candidates' softmax differs from the whole row's by 0.7 % or more
                    # on these prompts, so 1e-3 still tells which one p(x) came from.
                    probs = [t.target_prob for t in tokens]
                    np.testing.assert_allclose(probs, [p for _, p, _ in expected], rtol=1e-3)
                    full = np.array([p for _, _, p in expected])
                    assert np.all(np.abs(np.array(probs) / full - 1) > 3e-3)
    finally:
        host.close()


@pytest.mark.parametrize("sampler", CHAINS)
def test_device_candidates_give_the_hosts_truncated_distribution(
    engine: Engine, sampler: SamplerConfig
) -> None:
    """Every output row of a verification batch (one buffer, strided) against the host's
    chain over the full row of the same batch."""
    ctx = LlamaContext(engine.target, engine.target_spec)
    tokens = list(engine.tokenize(PROMPTS[2]))
    try:
        assert ctx.sample_with(sampler) == DEVICE
        ctx.decode(tokens, logits="all")
        device = [ctx.row(i) for i in range(len(tokens))]
        assert all(isinstance(row, CandidateRow) for row in device)
        dists = [row.distribution(sampler) for row in device]
        kept = [(d.ids.copy(), d.probs.copy()) for d in dists]
        ctx.decode(tokens[::-1], logits="all")  # the same layout: overwrites those rows
        for d, (ids, probs) in zip(dists, kept, strict=True):  # a draft's q outlives its row
            assert np.array_equal(d.ids, ids) and np.array_equal(d.probs, probs)
        ctx.attach_chain(None)
        ctx.truncate(0)
        ctx.decode(tokens, logits="all")
        for i, got in enumerate(dists):
            want = distribution(ctx.logits(i).copy(), sampler)
            assert list(got.ids) == list(want.ids), f"row {i}"
            np.testing.assert_allclose(got.probs, want.probs, atol=1e-5)
            assert isinstance(ctx.row(i), HostRow)
    finally:
        ctx.close()


def test_near_tie_margin_comes_from_the_candidates(engine: Engine) -> None:
    prompt = engine.tokenize(PROMPTS[0])
    host = LlamaContext(engine.target, engine.target_spec)
    try:
        host.decode(list(prompt), logits="last")
        want = top_two_margin(host.logits(-1))
    finally:
        host.close()
    # the baseline context still holds a sampled run's chain: the margin needs the greedy one
    summary(engine, GenerationRequest(prompt, max_tokens=2, sampler=CHAINS[1], speculative=False))
    best, second, margin = engine.target_margin(prompt)
    assert (best, second) == want[:2]
    assert margin == pytest.approx(want[2], abs=1e-5)


def test_a_batchs_best_tokens_are_each_rows_own_best_on_the_host_and_the_device(
    engine: Engine,
) -> None:
    """``greedy_ids`` reads every row's best token at once; the greedy judge trusts it to be
    ``row(i).greedy()`` for each row, from full rows and from a chain's candidates alike."""
    prompt = list(engine.tokenize(PROMPTS[1]))
    for chained in (False, True):
        ctx = LlamaContext(engine.target, engine.target_spec)
        try:
            if chained:
                assert ctx.sample_with(SamplerConfig()) == DEVICE
            ctx.decode(prompt[:-5], logits="none")
            ctx.decode(prompt[-5:], logits="all")
            rows = [ctx.row(i).greedy() for i in range(5)]
            assert ctx.greedy_ids(5) == rows
            assert ctx.greedy_ids(2) == rows[:2]
            assert len(set(rows)) > 1  # rows that differ: a mix-up of rows would show
        finally:
            ctx.close()


def test_mtp_heads_sample_on_the_device(tmp_path: Path, full_rows: list[int]) -> None:
    model = write_tiny_qwen35(tmp_path / "qwen35-mtp.gguf", branch_scale=0.3)
    eng = Engine(
        ModelSpec(str(model), n_ctx=1024, n_threads=1, sampling="device"),
        draft_source=DraftSource.MTP,
    )
    try:
        prompt = (1, 300, 310, 320, 330, 301)
        spec = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False, ngram_first=False)
        outputs = []
        for speculative in (True, False):
            request = GenerationRequest(prompt, max_tokens=30, spec=spec, speculative=speculative)
            run, _ = summary(eng, request)
            assert run.sampling == DEVICE
            outputs.append(run.token_ids)
        assert full_rows[0] == 0
        assert outputs[0] == outputs[1]
    finally:
        eng.close()


@pytest.mark.parametrize(
    ("placement", "why"), [("auto", HOST_ON_CPU), ("host", HOST_ASKED)], ids=["auto", "host"]
)
def test_on_the_cpu_auto_samples_on_the_host_and_says_why(
    tiny_pair: tuple[Path, Path], full_rows: list[int], placement: str, why: str
) -> None:
    """Where the output layer runs on the CPU (this machine), llama.cpp's top-k would run in
    llama_decode's own threads and cost more than the host's partition: auto keeps the host."""
    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS, sampling=placement),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS, sampling=placement),
    )
    try:
        assert not eng.target.output_on_gpu
        prompt = eng.tokenize(PROMPTS[2])
        run, tokens = summary(eng, GenerationRequest(prompt, max_tokens=12, spec=FORCED))
        assert run.sampling == why
        assert full_rows[0] > 0
        assert eng.spec_ctx.chain is None and eng.draft_ctx is not None
        assert eng.draft_ctx.chain is None
        assert all(t.target_prob is not None for t in tokens)
    finally:
        eng.close()
