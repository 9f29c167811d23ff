"""Typed events yielded by the engine's ``generate()``.

Every event is a frozen dataclass so it can cross a Qt signal boundary unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.engine.step_record import StepRecord


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

    @classmethod
    def of(
        cls,
        record: StepRecord,
        *,
        next_draft_len: int,
        rolling_acceptance: float,
        break_even: float,
    ) -> StepEvent:
        """The charts' view of one step record, with the controller's state after it."""
        return cls(
            step=record.step,
            drafted=record.proposed,
            accepted=record.accepted,
            draft_ms=record.draft_ms,
            verify_ms=record.verify_ms,
            other_ms=record.other_ms,
            next_draft_len=next_draft_len,
            rolling_acceptance=rolling_acceptance,
            break_even=break_even,
        )


MAX_SHOWN_COST = 10.0  # a draft pass dearer than ten target passes is "over 10 times the cost"


def percent_pair(a: float, b: float) -> tuple[str, str]:
    """Two fractions as percentages with just enough decimals to tell them apart."""
    for decimals in range(0, 4):
        first, second = f"{a * 100:.{decimals}f} %", f"{b * 100:.{decimals}f} %"
        if first != second or a == b:
            return first, second
    return first, second


def cost_share_text(fraction: float) -> str:
    """One draft pass as a share of one target pass, bounded: a measured ratio comes from
    two timings, and a timing distorted by the machine must not print as 2,693,993 %."""
    if not math.isfinite(fraction) or fraction < 0:
        return "an unknown share"
    if fraction > MAX_SHOWN_COST:
        return f"over {MAX_SHOWN_COST:g} times the cost"
    return f"{fraction * 100:.0f} %"


@dataclass(frozen=True)
class GuardEvent:
    """Drafting paused (or resumed) by the collapse guard, with the measured reason.

    ``message`` is the one text for it, shown in the window's banner, kept in the run's
    notes and printed by the CLI.
    """

    paused: bool
    acceptance: float  # per-token agreement over the guard's window
    break_even: float  # agreement below which drafting costs more than it saves
    step: int
    reason: str = "disagreement"  # "disagreement" | "cost" | "probe"
    speed_ratio: float | None = None  # measured drafting speed / target-only speed
    draft_cost_fraction: float | None = None  # one draft pass / one target pass
    probe_in: int = 0  # target-only tokens before the draft is probed again
    window: int = 0  # verification steps the agreement was measured over
    never_pays: bool = False  # by the measured pass costs, no length beats the target alone

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
    def headline(self) -> str:
        what = "paused" if self.paused else "resumed"
        return f"Drafting {what} at step {self.step}"

    @property
    def measured_loss(self) -> bool:
        """The measured speed supports the pause (a speed of 1× or more never does)."""
        ratio = self.speed_ratio
        return ratio is not None and math.isfinite(ratio) and 0.0 <= ratio < 1.0

    @property
    def explanation(self) -> str:
        if not self.paused:
            return "probing the draft again."
        probe = (
            f"the draft is probed again in {self.probe_in} tokens"
            if self.probe_in
            else "the draft is probed again later"
        )
        then = f"The target answers alone; {probe}."
        if self.reason == "cost":
            fraction = self.draft_cost_fraction
            cost = (
                f"a draft pass costs {cost_share_text(fraction)} of a target pass"
                if fraction is not None
                else "drafting costs more than it saves"
            )
            if self.measured_loss:
                why = (
                    f" and drafting steps ran at {self.speed_ratio:.2f}× the target-only speed, "
                    f"so it cannot pay at this agreement ({self.acceptance * 100:.1f} %)"
                )
            elif self.never_pays:
                why = (
                    ", so by the measured pass costs no draft length can beat the target "
                    "alone, even with every drafted token accepted"
                )
            else:
                agreement, break_even = percent_pair(self.acceptance, self.break_even)
                why = (
                    f", so at this agreement ({agreement}) it cannot pay: that needs "
                    f"{break_even} or more"
                )
            return f"{cost}{why}. {then} {self.advice}"
        agreement, break_even = percent_pair(self.acceptance, self.break_even)
        over = f" over the last {self.window} steps" if self.window else ""
        return (
            f"the draft's recent agreement {agreement} (accepted ÷ judged draft tokens{over}) "
            f"is below the break-even {break_even}. {then} {self.advice}"
        )

    @property
    def message(self) -> str:
        return f"{self.headline}: {self.explanation}"


@dataclass(frozen=True)
class TextTail:
    """Text released only at the end (held-back stop-string prefix, dangling bytes)."""

    text: str


@dataclass(frozen=True)
class DrafterFigures:
    """What one draft source proposed in a run and what the target kept of it."""

    name: str
    steps: int = 0  # drafting steps this source paid for
    drafted: int = 0
    accepted: int = 0
    draft_passes: int = 0
    draft_ms: float = 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


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
    paused_tokens: int = 0  # tokens the target wrote alone while the guard paused drafting
    # the machine the run got (run_stats.MachineMeter): its threads' CPU over what they could
    # use, and the cores other processes kept busy; None when not measured
    cpu_share: float | None = None
    outside_cores: float | None = None
    # from the step records: blocks that reached draft position i, and those accepted there
    drafted_per_position: tuple[int, ...] = ()
    accepted_per_position: tuple[int, ...] = ()
    per_drafter: tuple[DrafterFigures, ...] = ()  # by draft source, in order of first use
    # each step's target pass as (tokens in the batch, ms): the bench judges from their spread
    # whether another program disturbed the run (app.engine.noise)
    verify_passes: tuple[tuple[int, float], ...] = field(default=(), repr=False)
    # the ms of each single target pass of a step that drafted nothing and paid no draft pass:
    # the same work in either mode, so the bench compares the two modes' (app.engine.noise)
    lone_passes: tuple[float, ...] = field(default=(), repr=False)
    step_host_s: float = 0.0  # time outside llama_decode in the decoding steps (no prefill)
    # where the sampler chain ran: "device" (llama.cpp returned each row's candidates), or
    # "host (why)" (full rows of logits crossed into Python)
    sampling: str = ""

    @property
    def acceptance_per_position(self) -> tuple[float, ...]:
        """Share of the blocks that reached position i whose token there was accepted."""
        return tuple(
            a / d if d else 0.0
            for d, a in zip(self.drafted_per_position, self.accepted_per_position, strict=True)
        )

    def acceptance_figures(self) -> dict[str, Any]:
        """Per-position and per-drafter acceptance as plain JSON values (bench rows, Lab)."""
        return {
            "drafted_per_position": list(self.drafted_per_position),
            "accepted_per_position": list(self.accepted_per_position),
            "acceptance_per_position": [round(a, 4) for a in self.acceptance_per_position],
            "per_drafter": {
                d.name: {
                    "steps": d.steps,
                    "drafted": d.drafted,
                    "accepted": d.accepted,
                    "acceptance": round(d.acceptance, 4),
                    "draft_passes": d.draft_passes,
                    "draft_ms": round(d.draft_ms, 3),
                }
                for d in self.per_drafter
            },
        }

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
    def step_host_ms_per_token(self) -> float:
        """``host_ms_per_token`` without the prompt's processing: the part paid per step."""
        return self.step_host_s * 1000.0 / self.tokens if self.tokens > 0 else 0.0

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
