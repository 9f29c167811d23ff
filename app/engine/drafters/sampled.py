"""Drafting token by token from a model's logits, stopping when one more pass would not pay.

The model drafter stops early on the measured economics (its calibrated confidence against
the cost of one more draft pass): a draft model, the target's MTP heads, an assistant or an
EAGLE-3 head each say only how their first pass catches up and how a drafted token is fed
back.
"""

from __future__ import annotations

import time

from app.engine.drafters.base import ConfidenceDrafter, DraftBlock, DraftingContext, DraftLimits
from app.engine.randomness import DRAW
from app.engine.sampling import Row


class SampledDrafter(ConfidenceDrafter):
    """Drafts token by token from a model's logits and stops when one more pass would not pay.

    Subclasses say how the first pass catches up with the committed tokens (``_start``) and
    how one drafted token is fed back (``_advance``); both return the next position's row:
    the device chain's candidates, or the full logits where the chain runs on the host.
    """

    name = "sampled drafter"

    def __init__(self, context: DraftingContext) -> None:
        super().__init__(context)
        # With temperature > 0 the draft samples from q under both rules: rejection sampling
        # needs it, and it makes sample-and-match's acceptance sum(p*q) <= sum(min(p, q)).
        self.stochastic = not context.sampler.greedy

    def _start(self, committed: list[int], block: DraftBlock) -> Row:
        """The first pass: catch up with ``committed`` and return the next position's row."""
        raise NotImplementedError

    def _advance(self, token: int, depth: int) -> Row:
        """Feed one drafted token and return the next position's row (a draft pass of the
        step at context ``depth``)."""
        raise NotImplementedError

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        began = time.perf_counter()
        context = self.context
        sampler, p_min, calibration = context.sampler, context.spec.p_min, context.calibration
        block = DraftBlock(source=self.name, depth=len(committed))
        row = self._start(committed, block)
        block.passes = 1
        adaptive = limits.keep_drafting > 0.0 or limits.include > 0.0
        want_confidence = p_min > 0.0 or adaptive or context.want_probs
        position = len(committed)
        all_accepted = 1.0  # calibrated probability that every drafted token is accepted
        while True:
            q = row.distribution(sampler) if self.stochastic else None
            qx = 0.0
            if q is not None:
                confidence: float | None = float(q.probs[0])
                token, qx = q.draw(context.randomness.uniform(position, DRAW))
            else:
                token = row.greedy()
                confidence = row.top_probability(token) if want_confidence else None
            if token >= context.target_vocab:
                break
            acceptance = 1.0
            if confidence is not None:
                if confidence < p_min:
                    break
                if adaptive:
                    acceptance = self.bias.adjust(calibration.acceptance(confidence))
                    all_accepted *= acceptance
                    if all_accepted < limits.include:
                        block.declined = (token, confidence)
                        break
            block.tokens.append(token)
            block.confidences.append(confidence)
            if q is not None:
                block.qdists.append(q)
                block.probs.append(qx)
            else:
                block.probs.append(confidence)
            if len(block.tokens) >= limits.k:
                break
            if limits.ends_answer is not None and limits.ends_answer(token):
                break
            if adaptive and all_accepted * acceptance < limits.keep_drafting:
                break
            row = self._advance(token, block.depth)
            block.passes += 1
            position += 1
        block.ms = (time.perf_counter() - began) * 1000.0
        return block
