"""What every draft source shares: the interface the loop drafts through (``Drafter``), what
the controller allows for one block (``DraftLimits``), what a drafter proposes
(``DraftBlock``), what a request gives every sampled drafter (``DraftingContext``), and the
drafters that size their own blocks by their calibrated confidence (``ConfidenceDrafter``).

Like llama.cpp's ``common/speculative.cpp``: a drafter proposes up to ``k`` tokens after the
committed sequence and is told afterwards how many the target accepted (what it proposed
and what was kept is counted once, in the loop's step record).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.config import SamplerConfig, SpecConfig
from app.engine.policy.calibration import AnswerBias, ConfidenceCalibration, judged
from app.engine.policy.costs import CostModel
from app.engine.randomness import Randomness
from app.engine.sampling import Distribution


@dataclass
class DraftBlock:
    """What a drafter proposes for one step: the tokens, their draft probabilities and
    confidences, and what drafting them cost. The verifier judges it and the step record
    counts it."""

    tokens: list[int] = field(default_factory=list)
    qdists: list[Distribution] = field(default_factory=list)  # only when sampling from q
    probs: list[float | None] = field(default_factory=list)  # q(x) of each drafted token
    confidences: list[float | None] = field(default_factory=list)  # draft's top probability
    ms: float = 0.0
    passes: int = 0  # draft-model passes paid for this block (0 for prompt lookup)
    # the positions one of its passes drafts, each priced as a single draft pass: a block
    # drafter's whole block, one for the rest
    positions_per_pass: int = 1
    catch_up_ms: float = 0.0  # the first pass, over the tokens the draft had not seen
    catch_up: int = 0  # how many tokens that first pass decoded
    # the token the draft computed but declined to propose (confidence too low), with its
    # confidence: the target's next token says whether it would have been accepted
    declined: tuple[int, float] | None = None
    source: str = "model"
    depth: int = 0  # the context depth it was drafted at: the costs it is judged by


@dataclass(frozen=True)
class DraftLimits:
    """What the controller allows for one block."""

    k: int
    keep_drafting: float = 0.0  # pay another draft pass while P(all accepted) * a exceeds this
    include: float = 0.0  # keep an already drafted token while P(all accepted) exceeds this
    # a token after which the answer ends: nothing drafted past it can ever be used
    ends_answer: Callable[[int], bool] | None = None
    # False: lookups only, while the guard has the draft model paused (``guard_paused``) or
    # in an answer's first step, before the draft model has read the prompt
    model: bool = True
    guard_paused: bool = False


@dataclass(frozen=True)
class DraftingContext:
    """What every sampled drafter of one request drafts with, whatever its source."""

    sampler: SamplerConfig
    spec: SpecConfig
    randomness: Randomness
    costs: CostModel  # the pair's, kept across requests: each draft pass is filed in it
    calibration: ConfidenceCalibration
    target_vocab: int  # a draft vocabulary may be up to 128 tokens larger than the target's
    want_probs: bool  # the request shows q(x) of each drafted token


class Drafter:
    """One draft source. The loop asks it to propose, tells it what was accepted, and asks
    what kind of source it is rather than which class."""

    name = "drafter"

    @property
    def confidence_driven(self) -> bool:
        """It sizes each block itself (the controller gives only the ceiling)."""
        return False

    @property
    def pays_passes(self) -> bool:
        """It may pay draft passes (a model or heads): whether the costs can say drafting
        never pays, before the answer's first step."""
        return False

    @property
    def lookups_while_paused(self) -> bool:
        """Its prompt lookups go on while the guard has its model paused."""
        return False

    @property
    def reads_prompt_late(self) -> bool:
        """It takes the prompt in after the answer's first token, and its first proposal
        catches up with whatever is committed by then: the first step writes with the target
        alone, so the first token waits only for the target's prefill, as with the target
        alone."""
        return False

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        """Within one request ``committed`` only grows between calls (``prefill`` starts a
        request), so a drafter's per-step work need not grow with the conversation."""
        raise NotImplementedError

    def observe(self, block: DraftBlock, accepted: int) -> None:
        return None

    def rest(self, resting: bool) -> None:
        """Whether the guard has its passes paused, from the next target decode on: a head
        that reads the target's rows after every decode keeps them instead, and reads them
        when it is told it drafts again (``FeatureHead``)."""
        return None

    def prefill(self, prompt: list[int]) -> None:
        """Take in the prompt with the target's prefill, without a pass of its own (lookups
        index it, heads keep the target's rows of it). A draft model reads it late: its first
        proposal's catch-up (``reads_prompt_late``)."""
        return None


class ConfidenceDrafter(Drafter):
    """A drafter that sizes its own blocks by its calibrated confidence and pays draft passes
    for them (a model drafting token by token, a block drafter): each block's judged
    confidences teach its answer bias."""

    def __init__(self, context: DraftingContext) -> None:
        self.context = context
        self.bias = AnswerBias()

    @property
    def confidence_driven(self) -> bool:
        return True

    @property
    def pays_passes(self) -> bool:
        return True

    def observe(self, block: DraftBlock, accepted: int) -> None:
        calibration = self.context.calibration
        for confidence, was_accepted in judged(block.confidences, accepted):
            self.bias.observe(calibration.acceptance(confidence), was_accepted)
