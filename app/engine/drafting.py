"""Draft sources behind one small interface.

Like llama.cpp's ``common/speculative.cpp``: a drafter proposes up to ``k`` tokens after the
committed sequence and is told afterwards how many the target accepted (what it proposed
and what was kept is counted once, in the loop's step record). The model drafter
stops early on the measured economics (its calibrated confidence against the cost of one
more draft pass); prompt lookup costs nothing and has no confidence; the combined drafter
lets a prompt-lookup match go first — free tokens where the answer repeats the conversation
— and asks the draft model otherwise, as llama.cpp's server does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine import ngram
from app.engine.config import SamplerConfig, SpecConfig
from app.engine.draft_block import DraftBlock
from app.engine.llama.backend import LlamaContext
from app.engine.policy.calibration import AnswerBias, ConfidenceCalibration, judged
from app.engine.policy.costs import CostModel
from app.engine.policy.lookup_gate import LookupGate
from app.engine.randomness import DRAW, Randomness
from app.engine.running_stats import Ema
from app.engine.sampling import Row


@dataclass(frozen=True)
class DraftLimits:
    """What the controller allows for one block."""

    k: int
    keep_drafting: float = 0.0  # pay another draft pass while P(all accepted) * a exceeds this
    include: float = 0.0  # keep an already drafted token while P(all accepted) exceeds this
    # a token after which the answer ends: nothing drafted past it can ever be used
    ends_answer: Callable[[int], bool] | None = None
    model: bool = True  # False while the guard has the draft model paused: lookups only


class Drafter(Protocol):
    name: str

    @property
    def confidence_driven(self) -> bool: ...

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        """Within one request ``committed`` only grows between calls (``prefill`` starts a
        request), so a drafter's per-step work need not grow with the conversation."""
        ...

    def observe(self, block: DraftBlock, accepted: int) -> None: ...

    def prefill(self, prompt: list[int], *, drafting: bool = True) -> None:
        """Take in the prompt with the target's prefill. ``drafting`` False: the guard has
        the drafter paused from the answer's start, so a pass that only readies a draft
        model waits for the step that next drafts (its catch-up)."""
        ...


class _Base:
    name = "drafter"

    def observe(self, block: DraftBlock, accepted: int) -> None:
        return None

    def prefill(self, prompt: list[int], *, drafting: bool = True) -> None:
        return None


def _through_end(tokens: list[int], ends_answer: Callable[[int], bool]) -> list[int]:
    """``tokens`` up to and including the first one that ends the answer."""
    for index, token in enumerate(tokens):
        if ends_answer(token):
            return tokens[: index + 1]
    return tokens


class NgramDrafter(_Base):
    """Prompt lookup over the whole conversation: no model, no draft pass, no confidence.

    With adaptive lengths and a cost model, a match is verified only as far as it pays for
    its verification at this depth, or held back (``LookupGate``).
    """

    name = "n-gram"

    def __init__(
        self, spec: SpecConfig, *, min_match: int = 1, costs: CostModel | None = None
    ) -> None:
        self.index = ngram.NgramIndex(spec.ngram_n)
        self.min_match = min_match
        self.gate = LookupGate(costs) if costs is not None and spec.adaptive else None

    @property
    def confidence_driven(self) -> bool:
        return self.gate is not None  # the gate sizes each block; the controller the ceiling

    def prefill(self, prompt: list[int], *, drafting: bool = True) -> None:
        """Index the prompt with the prompt's processing: the steps then index only what
        they add, and the first is no slower than the rest. Indexed even while paused:
        gated lookups go on while the guard has the model paused."""
        self.index.sync(prompt)

    def match(self, committed: list[int], limits: DraftLimits) -> list[int]:
        """The lookup's match after ``committed``, ungated (empty: none)."""
        tokens = self.index.follow(committed, k=limits.k, min_n=self.min_match)
        if limits.ends_answer is not None:
            tokens = _through_end(tokens, limits.ends_answer)
        return tokens

    def judge_held(self, committed: list[int]) -> None:
        if self.gate is not None:
            self.gate.judge_held(committed)

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        began = time.perf_counter()
        tokens = self.match(committed, limits)
        if self.gate is not None:
            self.gate.judge_held(committed)
            keep = self.gate.length(len(tokens), limits.k)
            if not keep:
                self.gate.hold(len(committed), tokens, priced=True)
            tokens = tokens[:keep]
        block = DraftBlock(tokens=tokens, probs=[None] * len(tokens), source=self.name)
        block.confidences = [None] * len(tokens)
        block.ms = (time.perf_counter() - began) * 1000.0
        return block

    def hold_back(self, committed: list[int], block: DraftBlock) -> None:
        """A proposed block that will not be verified: judge it by what the target writes."""
        if self.gate is not None:
            self.gate.hold(len(committed), block.tokens)

    def observe(self, block: DraftBlock, accepted: int) -> None:
        if self.gate is not None:
            self.gate.observe(len(block.tokens), accepted)


class SampledDrafter(_Base):
    """Drafts token by token from a model's logits and stops when one more pass would not pay.

    Subclasses say how the first pass catches up with the committed tokens (``_start``) and
    how one drafted token is fed back (``_advance``); both return the next position's row:
    the device chain's candidates, or the full logits where the chain runs on the host.
    """

    name = "sampled drafter"
    confidence_driven = True

    def __init__(
        self,
        *,
        sampler: SamplerConfig,
        spec: SpecConfig,
        randomness: Randomness,
        costs: CostModel,
        calibration: ConfidenceCalibration,
        target_vocab: int,
        want_probs: bool,
    ) -> None:
        self.sampler = sampler
        self.spec = spec
        self.randomness = randomness
        self.costs = costs
        self.calibration = calibration
        # a draft vocabulary may be up to 128 tokens larger than the target's
        self.target_vocab = target_vocab
        self.want_probs = want_probs
        # With temperature > 0 the draft samples from q under both rules: rejection sampling
        # needs it, and it makes sample-and-match's acceptance sum(p*q) <= sum(min(p, q)).
        self.stochastic = not sampler.greedy
        self.bias = AnswerBias()
        # leading positions of the draft's cache known to equal the committed sequence: each
        # step compares only what can have changed since the last one, not the whole answer
        self._agrees = 0

    def observe(self, block: DraftBlock, accepted: int) -> None:
        for confidence, was_accepted in judged(block.confidences, accepted):
            self.bias.observe(self.calibration.acceptance(confidence), was_accepted)

    def _start(self, committed: list[int], block: DraftBlock) -> Row:
        """The first pass: catch up with ``committed`` and return the next position's row."""
        raise NotImplementedError

    def _advance(self, token: int) -> Row:
        """Feed one drafted token and return the next position's row."""
        raise NotImplementedError

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        began = time.perf_counter()
        block = DraftBlock(source=self.name)
        row = self._start(committed, block)
        block.passes = 1
        adaptive = limits.keep_drafting > 0.0 or limits.include > 0.0
        want_confidence = self.spec.p_min > 0.0 or adaptive or self.want_probs
        position = len(committed)
        all_accepted = 1.0  # calibrated probability that every drafted token is accepted
        while True:
            q = row.distribution(self.sampler) if self.stochastic else None
            qx = 0.0
            if q is not None:
                confidence: float | None = float(q.probs[0])
                token, qx = q.draw(self.randomness.uniform(position, DRAW))
            else:
                token = row.greedy()
                confidence = row.top_probability(token) if want_confidence else None
            if token >= self.target_vocab:
                break
            acceptance = 1.0
            if confidence is not None:
                if confidence < self.spec.p_min:
                    break
                if adaptive:
                    acceptance = self.bias.adjust(self.calibration.acceptance(confidence))
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
            row = self._advance(token)
            block.passes += 1
            position += 1
        block.ms = (time.perf_counter() - began) * 1000.0
        return block


class ModelDrafter(SampledDrafter):
    """A small model drafts token by token and stops when one more pass would not pay."""

    name = "draft model"

    def __init__(self, ctx: LlamaContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx

    def prefill(self, prompt: list[int], *, drafting: bool = True) -> None:
        """Bring the draft's cache up to the prompt with the target's prefill, not in step 1.

        Not while paused from the start: a draft that can never pay, or whose pause carried
        over from the last answer, would read the whole prompt for nothing (SmolLM2 F16 with
        its Q4_1 draft, a draft pass 80-100 % of a target pass: the median time to the first
        token of 32 short prompts went from 182 to 75 ms without it); a probe's catch-up
        reads it if drafting resumes."""
        if not drafting:
            return
        self.ctx.truncate(min(self.ctx.common_prefix(prompt), len(prompt) - 1))
        self.ctx.decode(prompt[self.ctx.n_past : -1], logits="none")
        self._agrees = self.ctx.n_past

    def _catch_up_from(self, committed: list[int]) -> int:
        """``min(ctx.common_prefix(committed), len(committed) - 1)``, comparing only the
        positions past those known to agree."""
        cached = self.ctx.tokens
        end = min(len(cached), len(committed))
        n = min(self._agrees, end)
        if n and cached[n - 1] != committed[n - 1]:  # not the sequence it followed
            return min(self.ctx.common_prefix(committed), len(committed) - 1)
        while n < end and cached[n] == committed[n]:
            n += 1
        return min(n, len(committed) - 1)

    def _pass(self, tokens: list[int]) -> float:
        began = time.perf_counter()
        self.ctx.decode(tokens, logits="last")
        ms = (time.perf_counter() - began) * 1000.0
        self.costs.observe_draft_pass(len(tokens), ms)
        return ms

    def _start(self, committed: list[int], block: DraftBlock) -> Row:
        ctx = self.ctx
        ctx.truncate(self._catch_up_from(committed))
        block.catch_up = len(committed) - ctx.n_past
        block.catch_up_ms = self._pass(committed[ctx.n_past :])
        self._agrees = len(committed)
        return ctx.row(-1)

    def _advance(self, token: int) -> Row:
        self._pass([token])
        return self.ctx.row(-1)


class CombinedDrafter:
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

    confidence_driven = True  # the controller gives the ceiling; each source drafts within it
    LOOKUP_SHARE = 0.9
    _RECOVERY = 0.05  # per model step, the lookup's rate moves this share toward the model's

    def __init__(self, lookup: NgramDrafter, model: SampledDrafter) -> None:
        self.lookup = lookup
        self.model = model
        self.name = f"{lookup.name} + {model.name}"
        self.rates = {lookup.name: Ema(alpha=0.3), model.name: Ema(alpha=0.3)}

    def prefill(self, prompt: list[int], *, drafting: bool = True) -> None:
        self.lookup.prefill(prompt)
        self.model.prefill(prompt, drafting=drafting)

    def _lookup_goes_first(self, k_max: int) -> bool:
        lookup, model = self.rates[self.lookup.name], self.rates[self.model.name]
        if lookup.value is None or model.value is None:
            return True
        if lookup.value >= self.LOOKUP_SHARE * model.value:
            return True
        # matches held back while the model drafted were judged by what the target wrote:
        # where they say a lookup pays again (an answer that started copying), it goes first
        promised = self.lookup.gate.best_rate(k_max) if self.lookup.gate is not None else None
        if promised is not None and promised >= self.LOOKUP_SHARE * model.value:
            lookup.value = promised
            return True
        lookup.value += self._RECOVERY * (model.value - lookup.value)
        return False

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        if not limits.model and self.lookup.gate is None:
            # a fixed length has no gate to judge lookups by: the guard pauses them too
            return DraftBlock(source=self.lookup.name)
        self.lookup.judge_held(committed)
        lookups = DraftLimits(limits.k, ends_answer=limits.ends_answer)
        if not limits.model or self._lookup_goes_first(limits.k):
            block = self.lookup.propose(committed, lookups)
            if len(block.tokens) >= 2 or not limits.model:
                return block
            self.lookup.hold_back(committed, block)
        else:  # not asked, still held: what the target writes next judges it for free
            self.lookup.hold_back(
                committed, DraftBlock(tokens=self.lookup.match(committed, lookups))
            )
        return self.model.propose(committed, limits)

    def observe(self, block: DraftBlock, accepted: int) -> None:
        from_lookup = block.source == self.lookup.name
        source = self.lookup if from_lookup else self.model
        source.observe(block, accepted)
        if not block.tokens:
            return
        verify_ms = self.model.costs.verify_ms(len(block.tokens) + 1)
        if verify_ms is not None:
            produced = accepted + 1  # the target's own token comes with every verification
            self.rates[source.name].update(produced / max(block.ms + verify_ms, 1e-3))
