"""What a drafter proposes for one step: the tokens, their draft probabilities and
confidences, and what drafting them cost. The verifier judges it and the step record
counts it."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.sampling import Distribution


@dataclass
class DraftBlock:
    tokens: list[int] = field(default_factory=list)
    qdists: list[Distribution] = field(default_factory=list)  # only when sampling from q
    probs: list[float | None] = field(default_factory=list)  # q(x) of each drafted token
    confidences: list[float | None] = field(default_factory=list)  # draft's top probability
    ms: float = 0.0
    passes: int = 0  # draft-model passes paid for this block (0 for prompt lookup)
    catch_up_ms: float = 0.0  # the first pass, over the tokens the draft had not seen
    catch_up: int = 0  # how many tokens that first pass decoded
    # the token the draft computed but declined to propose (confidence too low), with its
    # confidence: the target's next token says whether it would have been accepted
    declined: tuple[int, float] | None = None
    source: str = "model"
