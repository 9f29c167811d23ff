"""Prompt lookup and a model together: a lookup match goes first where the conversation
repeats itself — free tokens — and the model drafts otherwise, as llama.cpp's server does."""

from __future__ import annotations

from app.engine.drafters.base import DraftBlock, Drafter, DraftLimits
from app.engine.drafters.lookup import NgramDrafter
from app.engine.policy.costs import CostModel
from app.engine.running_stats import Ema


class CombinedDrafter(Drafter):
    """Prompt lookup first where the conversation repeats itself, the draft model otherwise.

    A lookup block costs no draft pass, only a longer verification batch. Each source keeps
    its measured rate (tokens produced per millisecond of drafting plus verification), and
    a lookup match goes first while the lookup's rate is within ``LOOKUP_SHARE`` of the
    model's: lookups resume a copied run right after the edit that broke it, so they get a
    little slack. A lookup that lost is retried as the model's steps pull its rate back up.
    How much of a match is verified is the lookup's own gate's choice (``LookupGate``): the
    length that pays most for its verification at this depth, at the lookup's measured
    acceptance, or none. While the guard has the model paused, gated lookups go on alone.
    """

    LOOKUP_SHARE = 0.9
    _RECOVERY = 0.05  # per model step, the lookup's rate moves this share toward the model's

    def __init__(self, lookup: NgramDrafter, model: Drafter, costs: CostModel) -> None:
        self.lookup = lookup
        self.model = model
        self.costs = costs
        self.name = f"{lookup.name} + {model.name}"
        self.rates = {lookup.name: Ema(alpha=0.3), model.name: Ema(alpha=0.3)}

    @property
    def confidence_driven(self) -> bool:
        return True  # the controller gives the ceiling; each source drafts within it

    @property
    def pays_passes(self) -> bool:
        return self.model.pays_passes

    @property
    def lookups_while_paused(self) -> bool:
        return True

    @property
    def reads_prompt_late(self) -> bool:
        return self.model.reads_prompt_late

    def prefill(self, prompt: list[int]) -> None:
        self.lookup.prefill(prompt)
        self.model.prefill(prompt)

    def _lookup_goes_first(self, k_max: int, depth: int) -> bool:
        lookup, model = self.rates[self.lookup.name], self.rates[self.model.name]
        if lookup.value is None or model.value is None:
            return True
        if lookup.value >= self.LOOKUP_SHARE * model.value:
            return True
        # matches held back while the model drafted were judged by what the target wrote:
        # where they say a lookup pays again (an answer that started copying), it goes first
        promised = (
            self.lookup.gate.best_rate(k_max, depth) if self.lookup.gate is not None else None
        )
        if promised is not None and promised >= self.LOOKUP_SHARE * model.value:
            lookup.value = promised
            return True
        lookup.value += self._RECOVERY * (model.value - lookup.value)
        return False

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        if limits.guard_paused and self.lookup.gate is None:
            # a fixed length has no gate to judge lookups by: the guard pauses them too
            return DraftBlock(source=self.lookup.name, depth=len(committed))
        self.lookup.judge_held(committed)
        lookups = DraftLimits(limits.k, ends_answer=limits.ends_answer)
        if not limits.model or self._lookup_goes_first(limits.k, len(committed)):
            block = self.lookup.propose(committed, lookups)
            if len(block.tokens) >= 2 or not limits.model:
                return block
            self.lookup.hold_back(committed, block)
        else:  # not asked, still held: what the target writes next judges it for free
            self.lookup.hold_back(
                committed, DraftBlock(tokens=self.lookup.match(committed, lookups))
            )
        return self.model.propose(committed, limits)

    def rest(self, resting: bool) -> None:
        self.model.rest(resting)  # the lookups go on while the model rests

    def observe(self, block: DraftBlock, accepted: int) -> None:
        from_lookup = block.source == self.lookup.name
        source = self.lookup if from_lookup else self.model
        source.observe(block, accepted)
        if not block.tokens:
            return
        verify_ms = self.costs.verify_ms(len(block.tokens) + 1, block.depth)
        if verify_ms is not None:
            produced = accepted + 1  # the target's own token comes with every verification
            self.rates[source.name].update(produced / max(block.ms + verify_ms, 1e-3))
