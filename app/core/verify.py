"""Drafting a block and judging it against the target's logits.

Greedy: accept while the draft token is the target's argmax. Sampling: rejection sampling
(accept x with probability min(1, p(x)/q(x)), resample from normalize(max(0, p - q)) on
rejection, bonus token from p when the whole block survives), or llama.cpp's sample-and-match
rule for comparison. Either way the output follows the target's distribution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from app.core import ngram
from app.core.config import AcceptRule, DraftSource, GenerationRequest, SamplerConfig
from app.core.events import TokenKind
from app.core.llama_backend import LlamaContext, LlamaModel
from app.core.sampling import (
    Distribution,
    distribution,
    greedy,
    point_mass,
    residual,
    top_probability,
)

if TYPE_CHECKING:
    from app.core.engine import Engine


@dataclass
class DraftBlock:
    tokens: list[int] = field(default_factory=list)
    qdists: list[Distribution] = field(default_factory=list)  # only when sampling from q
    probs: list[float | None] = field(default_factory=list)  # q(x) of each drafted token
    confidences: list[float | None] = field(default_factory=list)  # draft's top probability
    ms: float = 0.0
    passes: int = 0


@dataclass(frozen=True)
class Produced:
    token_id: int
    kind: TokenKind
    draft_prob: float | None = None
    target_prob: float | None = None
    rejected_token: int | None = None


@dataclass
class Outcome:
    tokens: list[Produced]
    accepted: int


class Drafter:
    """Proposes up to k tokens from the draft model or from prompt lookup."""

    def __init__(self, engine: Engine, request: GenerationRequest, rng: np.random.Generator):
        self.ctx = engine.draft_ctx
        self.source = engine.draft_source if engine.draft_ctx else DraftSource.NGRAM
        self.sampler = request.sampler
        self.spec = request.spec
        self.rng = rng
        self.want_probs = request.token_probs
        # a draft vocabulary may be up to 128 tokens larger than the target's
        self.target_vocab = engine.target.n_vocab
        # With temperature > 0 the draft samples from q under both rules: rejection sampling
        # needs it, and it makes sample-and-match's acceptance sum(p*q) <= sum(min(p, q)).
        self.stochastic = not request.sampler.greedy

    @property
    def confidence_driven(self) -> bool:
        return self.source is DraftSource.MODEL and self.ctx is not None

    def draft(
        self, committed: list[int], k: int, *, threshold: float = 0.0, calibration: float = 1.0
    ) -> DraftBlock:
        """Up to ``k`` tokens. A model draft also stops when its confidence in the next token
        is below ``p_min``, or when the calibrated probability that every token so far will be
        accepted falls below ``threshold`` (adaptive drafting)."""
        began = time.perf_counter()
        if self.source is DraftSource.NGRAM or self.ctx is None:
            tokens = ngram.propose(committed, max_n=self.spec.ngram_n, k=k)
            block = DraftBlock(tokens=tokens, probs=[None] * len(tokens))
            block.confidences = [None] * len(tokens)
        else:
            block = self._draft_with_model(self.ctx, committed, k, threshold, calibration)
        block.ms = (time.perf_counter() - began) * 1000.0
        return block

    def _draft_with_model(
        self, ctx: LlamaContext, committed: list[int], k: int, threshold: float, calibration: float
    ) -> DraftBlock:
        block = DraftBlock()
        keep = min(ctx.common_prefix(committed), len(committed) - 1)
        ctx.truncate(keep)
        ctx.decode(committed[keep:], logits="last")
        block.passes = 1
        want_confidence = self.spec.p_min > 0.0 or threshold > 0.0 or self.want_probs
        all_accepted = 1.0  # calibrated probability that every drafted token is accepted
        while True:
            logits = ctx.logits(-1)
            q = distribution(logits, self.sampler) if self.stochastic else None
            if q is not None:
                confidence: float | None = float(q.probs[0])
            else:
                confidence = top_probability(logits) if want_confidence else None
            if confidence is not None:
                all_accepted *= min(confidence * calibration, 1.0)
                if confidence < self.spec.p_min or all_accepted < threshold:
                    break
            token = q.sample(self.rng) if q is not None else greedy(logits)
            if token >= self.target_vocab:
                break
            block.tokens.append(token)
            block.confidences.append(confidence)
            if q is not None:
                block.qdists.append(q)
                block.probs.append(q.prob(token))
            else:
                block.probs.append(confidence)
            if len(block.tokens) >= k:
                break
            ctx.decode([token], logits="last")
            block.passes += 1
        return block


class Verifier:
    """Turns the target's logits over [last, d1..dk] into the tokens to keep."""

    def __init__(
        self,
        target: LlamaModel,
        sampler: SamplerConfig,
        rng: np.random.Generator,
        rule: AcceptRule,
        *,
        want_probs: bool = True,
    ) -> None:
        self.n_vocab = target.n_vocab
        self.sampler = sampler
        self.rng = rng
        self.rule = rule
        self.want_probs = want_probs

    def judge(self, ctx: LlamaContext, block: DraftBlock | None) -> Outcome:
        drafts = block.tokens if block else []
        if self.sampler.greedy:
            return self._judge_greedy(ctx, drafts, block)
        return self._judge_sampled(ctx, drafts, block)

    def _judge_greedy(self, ctx: LlamaContext, drafts: list[int], block: DraftBlock | None):
        out: list[Produced] = []
        for i, proposed in enumerate(drafts):
            row = ctx.logits(i)
            best = greedy(row)
            q = block.probs[i] if block else None
            p = top_probability(row) if self.want_probs else None
            if best == proposed:
                out.append(Produced(proposed, TokenKind.ACCEPTED, q, p))
                continue
            out.append(Produced(best, TokenKind.RESAMPLED, q, p, rejected_token=proposed))
            return Outcome(out, accepted=i)
        row = ctx.logits(len(drafts))
        best = greedy(row)
        kind = TokenKind.BONUS if drafts else TokenKind.TARGET
        p = top_probability(row) if self.want_probs else None
        out.append(Produced(best, kind, None, p))
        return Outcome(out, accepted=len(drafts))

    def _judge_sampled(self, ctx: LlamaContext, drafts: list[int], block: DraftBlock | None):
        out: list[Produced] = []
        for i, proposed in enumerate(drafts):
            p = distribution(ctx.logits(i), self.sampler)
            px = p.prob(proposed)
            if self.rule is AcceptRule.MATCH:
                token = p.sample(self.rng)
                if token == proposed:
                    out.append(Produced(proposed, TokenKind.ACCEPTED, None, px))
                    continue
                out.append(Produced(token, TokenKind.RESAMPLED, None, p.prob(token), proposed))
                return Outcome(out, accepted=i)
            q = block.qdists[i] if block and block.qdists else point_mass(proposed)
            qx = q.prob(proposed)
            if qx > 0.0 and self.rng.random() < min(1.0, px / qx):
                out.append(Produced(proposed, TokenKind.ACCEPTED, qx, px))
                continue
            token = residual(p, q, self.n_vocab).sample(self.rng)
            out.append(Produced(token, TokenKind.RESAMPLED, qx, p.prob(token), proposed))
            return Outcome(out, accepted=i)
        p = distribution(ctx.logits(len(drafts)), self.sampler)
        token = p.sample(self.rng)
        kind = TokenKind.BONUS if drafts else TokenKind.TARGET
        out.append(Produced(token, kind, None, p.prob(token)))
        return Outcome(out, accepted=len(drafts))
