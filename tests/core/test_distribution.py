"""With temperature > 0 the speculative output must follow the target's own distribution."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chisquare

from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.config import AcceptRule, GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary
from app.engine.llama.backend import LlamaContext
from app.engine.sampling import Distribution, distribution
from tests.cores import THREADS

SAMPLER = SamplerConfig(temperature=1.0, top_k=8, top_p=1.0, min_p=0.0)
# every stage of the chain cuts or reshapes: top-k, then top-p and min-p, then temperature
TRUNCATED = SamplerConfig(temperature=0.7, top_k=24, top_p=0.8, min_p=0.05)
RUNS = 1500


@pytest.fixture(scope="module")
def far_pair(tiny_dir: Path) -> tuple[Path, Path]:
    """A draft that disagrees often, so rejections and resampling really happen."""
    target = tiny_dir / "target.gguf"
    if not target.exists():
        write_tiny_llama(target, seed=1)
    draft = write_tiny_llama(tiny_dir / "far_draft.gguf", seed=5, noise_from=1, noise=0.8)
    return target, draft


@pytest.fixture(scope="module", params=["device", "host"])
def engine(far_pair, request: pytest.FixtureRequest):
    """The same statistics with the sampler chain in llama_decode (candidates) and on the
    host (full rows): each placement must follow the target's distribution."""
    target, draft = far_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=THREADS, sampling=request.param),
        ModelSpec(str(draft), n_ctx=256, n_threads=THREADS, sampling=request.param),
    )
    yield eng
    eng.close()


def exact_next(
    ctx: LlamaContext, tokens: tuple[int, ...], sampler: SamplerConfig = SAMPLER
) -> Distribution:
    """The target's distribution after the chain, from the full row on the host: the
    reference for runs whose chain ran on the device."""
    ctx.attach_chain(None)
    ctx.truncate(0)
    ctx.decode(list(tokens), logits="last")
    return distribution(ctx.logits(-1).copy(), sampler)


def sample_runs(
    engine: Engine,
    prompt,
    rule: AcceptRule,
    draft_max: int,
    max_tokens: int,
    sampler: SamplerConfig = SAMPLER,
):
    spec = SpecConfig(draft_max=draft_max, adaptive=False, rule=rule, collapse_guard=False)
    outputs, accepted, drafted = [], 0, 0
    for seed in range(RUNS):
        request = GenerationRequest(
            prompt,
            max_tokens=max_tokens,
            spec=spec,
            sampler=replace(sampler, seed=seed),
            token_probs=False,
        )
        summary = [e for e in engine.generate(request) if isinstance(e, RunSummary)][0]
        placement = engine.target.spec.sampling
        assert (
            summary.sampling == "device"
            if placement == "device"
            else summary.sampling.startswith("host")
        )
        outputs.append(summary.token_ids)
        accepted += summary.accepted
        drafted += summary.drafted
    return outputs, accepted / drafted


def assert_follows(observed: Counter, exact: Distribution) -> None:
    total = sum(observed.values())
    support = set(int(i) for i in exact.ids)
    outside = set(observed) - support
    assert not outside, f"tokens outside the target's support: {outside}"
    expected = exact.probs * total
    counts = np.array([observed.get(int(i), 0) for i in exact.ids], dtype=float)
    big = expected >= 5
    exp = np.append(expected[big], expected[~big].sum())
    obs = np.append(counts[big], counts[~big].sum())
    if exp[-1] < 5:  # fold a too-small remainder into the largest bin
        exp[np.argmax(exp[:-1])] += exp[-1]
        obs[np.argmax(exp[:-1])] += obs[-1]
        exp, obs = exp[:-1], obs[:-1]
    result = chisquare(obs, exp)
    assert result.pvalue > 1e-3, f"chi-square p={result.pvalue:.2e}, obs={obs}, exp={exp.round(1)}"


def most_common_first(outputs: list) -> int:
    return Counter(o[0] for o in outputs).most_common(1)[0][0]


# The first token comes from the target alone (no block is drafted before it), so each test
# judges the first drafted position: the second token, among the runs that share the first.


@pytest.mark.parametrize("rule", [AcceptRule.REJECTION, AcceptRule.MATCH])
def test_first_drafted_token_follows_target_distribution(engine: Engine, rule: AcceptRule) -> None:
    prompt = engine.tokenize("the code of the")
    outputs, _ = sample_runs(engine, prompt, rule, draft_max=1, max_tokens=3)
    assert_follows(Counter(o[0] for o in outputs), exact_next(engine.base_ctx, prompt))
    first = most_common_first(outputs)
    p = exact_next(engine.base_ctx, (*prompt, first))
    q = exact_next(engine.draft_ctx, (*prompt, first))
    overlap = sum(min(p.prob(int(t)), q.prob(int(t))) for t in set(p.ids) | set(q.ids))
    assert overlap < 0.9, "the draft must differ from the target for this test to mean much"
    assert_follows(Counter(o[1] for o in outputs if o[0] == first), p)


def test_later_block_position_follows_target_distribution(engine: Engine) -> None:
    prompt = engine.tokenize("import data for")
    outputs, _ = sample_runs(engine, prompt, AcceptRule.REJECTION, draft_max=3, max_tokens=5)
    first = most_common_first(outputs)
    runs = [o for o in outputs if o[0] == first]
    second = Counter(o[1] for o in runs).most_common(1)[0][0]
    p = exact_next(engine.base_ctx, (*prompt, first, second))
    assert_follows(Counter(o[2] for o in runs if o[1] == second), p)


def test_rejection_sampling_accepts_at_least_as_often_as_match(engine: Engine) -> None:
    """Each step drafts one token after the target's first, so the acceptance expected in
    theory is the mean over the target's first tokens of sum min(p, q) and sum p * q."""
    prompt = engine.tokenize("what is the")
    first = exact_next(engine.base_ctx, prompt)
    theory_rejection = theory_match = 0.0
    for token in (int(t) for t in first.ids):
        p = exact_next(engine.base_ctx, (*prompt, token))
        q = exact_next(engine.draft_ctx, (*prompt, token))
        ids = sorted(set(int(i) for i in p.ids) | set(int(i) for i in q.ids))
        theory_rejection += first.prob(token) * sum(min(p.prob(t), q.prob(t)) for t in ids)
        theory_match += first.prob(token) * sum(p.prob(t) * q.prob(t) for t in ids)
    _, rejection = sample_runs(engine, prompt, AcceptRule.REJECTION, draft_max=1, max_tokens=3)
    _, match = sample_runs(engine, prompt, AcceptRule.MATCH, draft_max=1, max_tokens=3)
    sigma = 4 * np.sqrt(0.25 / RUNS)
    assert abs(rejection - theory_rejection) < sigma
    assert abs(match - theory_match) < sigma
    assert rejection >= match


def test_output_follows_the_target_truncated_by_the_whole_chain(engine: Engine) -> None:
    """The chain runs on the device on both sides; the output must follow the target's
    distribution after top-k, top-p, min-p and temperature, computed on the host."""
    prompt = engine.tokenize("the code of the")
    outputs, _ = sample_runs(
        engine, prompt, AcceptRule.REJECTION, draft_max=2, max_tokens=4, sampler=TRUNCATED
    )
    assert_follows(Counter(o[0] for o in outputs), exact_next(engine.base_ctx, prompt, TRUNCATED))
    first = most_common_first(outputs)
    p = exact_next(engine.base_ctx, (*prompt, first), TRUNCATED)
    q = exact_next(engine.draft_ctx, (*prompt, first), TRUNCATED)
    assert 2 < p.ids.size < TRUNCATED.top_k, "top-p / min-p must cut inside top-k here"
    assert set(p.ids) != set(q.ids), "the draft's support must differ for this to mean much"
    assert_follows(Counter(o[1] for o in outputs if o[0] == first), p)
    second = Counter(o[1] for o in outputs if o[0] == first).most_common(1)[0][0]
    later = exact_next(engine.base_ctx, (*prompt, first, second), TRUNCATED)
    assert_follows(Counter(o[2] for o in outputs if o[:2] == (first, second)), later)
