"""Judging a drafted block against the target's logits.

Greedy: accept while the draft token is the target's argmax. Sampling: rejection sampling
(accept x with probability min(1, p(x)/q(x)), resample from normalize(max(0, p - q)) on
rejection, bonus token from p when the whole block survives), or llama.cpp's sample-and-match
rule, which with position-keyed randomness reproduces seeded target-only sampling token for
token. Either way the output follows the target's distribution.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from app.engine.config import AcceptRule, SamplerConfig
from app.engine.drafters.base import DraftBlock
from app.engine.events import TokenKind
from app.engine.llama.backend import LlamaContext
from app.engine.randomness import ACCEPT, DRAW, RESIDUAL, Randomness
from app.engine.sampling import point_mass, residual


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


@dataclass(frozen=True, eq=False)
class Verifier:
    """Turns the target's rows over [last, d1..dk] into the tokens to keep.

    Each row is what the context returns: the candidates of the sampler chain run on the
    device, or a full row of logits where the chain runs on the host. Either way p is the
    target's distribution after the user's chain, and p(x) for hover comes from the same row.
    """

    n_vocab: int
    sampler: SamplerConfig
    randomness: Randomness
    rule: AcceptRule
    _: KW_ONLY
    want_probs: bool = True

    def judge(self, ctx: LlamaContext, block: DraftBlock | None, position: int) -> Outcome:
        """``position``: context position of the first token this step produces."""
        drafts = block.tokens if block else []
        if self.sampler.greedy:
            return self._judge_greedy(ctx, drafts, block)
        return self._judge_sampled(ctx, drafts, block, position)

    def _judge_greedy(
        self, ctx: LlamaContext, drafts: list[int], block: DraftBlock | None
    ) -> Outcome:
        out: list[Produced] = []
        best_ids = ctx.greedy_ids(len(drafts) + 1)
        for i, proposed in enumerate(drafts):
            best = best_ids[i]
            q = block.probs[i] if block else None
            p = ctx.row(i).top_probability(best) if self.want_probs else None
            if best == proposed:
                out.append(Produced(proposed, TokenKind.ACCEPTED, q, p))
                continue
            out.append(Produced(best, TokenKind.RESAMPLED, q, p, rejected_token=proposed))
            return Outcome(out, accepted=i)
        best = best_ids[len(drafts)]
        kind = TokenKind.BONUS if drafts else TokenKind.TARGET
        p = ctx.row(len(drafts)).top_probability(best) if self.want_probs else None
        out.append(Produced(best, kind, None, p))
        return Outcome(out, accepted=len(drafts))

    def _judge_sampled(
        self, ctx: LlamaContext, drafts: list[int], block: DraftBlock | None, position: int
    ) -> Outcome:
        out: list[Produced] = []
        uniform = self.randomness.uniform
        for i, proposed in enumerate(drafts):
            at = position + i
            p = ctx.row(i).distribution(self.sampler)
            px = p.prob(proposed)
            if self.rule is AcceptRule.MATCH:
                token, pt = p.draw(uniform(at, DRAW))
                if token == proposed:
                    out.append(Produced(proposed, TokenKind.ACCEPTED, None, px))
                    continue
                out.append(Produced(token, TokenKind.RESAMPLED, None, pt, proposed))
                return Outcome(out, accepted=i)
            if block and block.qdists:
                q, qx = block.qdists[i], float(block.probs[i] or 0.0)  # q(x), as drafted
            else:
                q, qx = point_mass(proposed), 1.0
            if qx > 0.0 and uniform(at, ACCEPT) < min(1.0, px / qx):
                out.append(Produced(proposed, TokenKind.ACCEPTED, qx, px))
                continue
            token = residual(p, q, self.n_vocab).sample(uniform(at, RESIDUAL))
            out.append(Produced(token, TokenKind.RESAMPLED, qx, p.prob(token), proposed))
            return Outcome(out, accepted=i)
        p = ctx.row(len(drafts)).distribution(self.sampler)
        token, pt = p.draw(uniform(position + len(drafts), DRAW))
        kind = TokenKind.BONUS if drafts else TokenKind.TARGET
        out.append(Produced(token, kind, None, pt))
        return Outcome(out, accepted=len(drafts))
