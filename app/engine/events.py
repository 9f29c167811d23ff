"""Typed events yielded by the engine's ``generate()``.

Every event is a frozen dataclass so it can cross a Qt signal boundary unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum


class TokenKind(str, Enum):
    ACCEPTED = "accepted"  # a draft token the target agreed with
    RESAMPLED = "resampled"  # drawn from the target after the draft token was rejected
    BONUS = "bonus"  # drawn from the target after the whole draft block was accepted
    TARGET = "target"  # plain target-only decoding (baseline, or speculation paused)


class StopReason(str, Enum):
    EOG = "eog"
    MAX_TOKENS = "max_tokens"
    STOP_STRING = "stop_string"
    CANCELLED = "cancelled"
    CONTEXT_FULL = "context_full"


@dataclass(frozen=True)
class PrefillEvent:
    prompt_tokens: int
    reused_tokens: int  # prompt tokens whose KV cache was kept from the previous turn
    ms: float


@dataclass(frozen=True)
class TokenEvent:
    index: int  # position in the generated sequence, from 0
    token_id: int
    piece: str  # UTF-8-safe text delta; may be "" while a multi-byte character is incomplete
    kind: TokenKind
    step: int
    draft_prob: float | None = None  # q(x) of the draft for this token, when it was drafted
    target_prob: float | None = None  # p(x) of the target for this token
    rejected_token: int | None = None
    rejected_piece: str | None = None


@dataclass(frozen=True)
class StepEvent:
    step: int
    drafted: int
    accepted: int
    draft_ms: float
    verify_ms: float
    other_ms: float
    next_draft_len: int
    rolling_acceptance: float
    break_even: float  # acceptance below which drafting costs more than it saves


@dataclass(frozen=True)
class GuardEvent:
    """Drafting paused (or resumed) by the collapse guard, with the measured reason."""

    paused: bool
    acceptance: float  # per-token agreement over the guard's window
    break_even: float  # agreement below which drafting costs more than it saves
    step: int
    reason: str = "disagreement"  # "disagreement" | "cost" | "probe"
    speed_ratio: float | None = None  # measured drafting speed / target-only speed
    draft_cost_fraction: float | None = None  # one draft pass / one target pass
    probe_in: int = 0  # target-only tokens before the draft is probed again

    @property
    def advice(self) -> str:
        """What a person can do about it."""
        if self.reason == "cost":
            return (
                "Try a smaller draft (a lower quantization or fewer parameters), fewer CPU "
                "threads for the draft, or n-gram drafting."
            )
        return "Try a draft from the same model family, or n-gram drafting for repetitive text."

    @property
    def message(self) -> str:
        if not self.paused:
            return "probing the draft again"
        probe = f"probing again in {self.probe_in} tokens" if self.probe_in else "probing later"
        if self.reason == "cost":
            cost = (
                f"the draft costs {self.draft_cost_fraction:.0%} of a target pass"
                if self.draft_cost_fraction is not None
                else "drafting costs more than it saves"
            )
            # the measured speed is cited only where it supports the claim
            speed = (
                f", drafting ran at {self.speed_ratio:.2f}× of target-only speed"
                if self.speed_ratio is not None and self.speed_ratio < 1.0
                else ""
            )
            return (
                f"drafting paused: {cost}{speed}, so it cannot pay at this agreement "
                f"({self.acceptance:.1%}); {probe}. {self.advice}"
            )
        return (
            f"drafting paused: draft agreement {self.acceptance:.1%} is below break-even "
            f"{self.break_even:.1%}; decoding with the target alone, {probe}"
        )


@dataclass(frozen=True)
class TextTail:
    """Text released only at the end (held-back stop-string prefix, dangling bytes)."""

    text: str


@dataclass(frozen=True)
class RunSummary:
    mode: str  # "speculative" or "baseline"
    tokens: int
    elapsed_s: float
    tok_s: float
    ttft_ms: float
    acceptance_rate: float  # accepted draft tokens / drafted tokens (0 when nothing was drafted)
    mean_accepted_length: float  # accepted draft tokens per verification pass
    target_passes_per_token: float
    p50_itl_ms: float
    p95_itl_ms: float
    stop_reason: StopReason
    decode_s: float  # wall time spent inside llama_decode (both models)
    steps: int
    drafted: int
    accepted: int
    token_ids: tuple[int, ...] = field(default=(), repr=False)
    text: str = field(default="", repr=False)
    draft_passes: int = 0  # draft-model passes paid (0 for prompt lookup and the baseline)
    guard_pauses: int = 0  # times the collapse guard paused drafting
    position_keyed: bool = False  # sampled with position-keyed randomness (see randomness.py)
    temperature: float = 0.0
    rule: str = ""  # acceptance rule of a speculative run
    guard_notes: tuple[str, ...] = ()  # what the collapse guard said, in words
    p99_itl_ms: float = 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens per target pass, the bonus token included (vLLM's mean acceptance length)."""
        passes = self.target_passes_per_token * self.tokens
        return self.tokens / passes if passes > 0 else 0.0

    @property
    def host_ms_per_token(self) -> float:
        """Wall time outside llama_decode per generated token, in milliseconds."""
        if self.tokens <= 0:
            return 0.0
        return max(self.elapsed_s - self.decode_s, 0.0) * 1000.0 / self.tokens

    @property
    def overhead_fraction(self) -> float:
        if self.elapsed_s <= 0:
            return 0.0
        return max(0.0, 1.0 - self.decode_s / self.elapsed_s)


Event = PrefillEvent | TokenEvent | StepEvent | GuardEvent | TextTail | RunSummary


def drain(events: Iterable[Event]) -> RunSummary:
    """Run a ``generate()`` stream to its end and keep the ``RunSummary`` that closes it."""
    summary = None
    for event in events:
        if isinstance(event, RunSummary):
            summary = event
    if summary is None:
        raise RuntimeError("the engine ended a run without a summary")
    return summary
