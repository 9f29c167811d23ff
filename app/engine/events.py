"""Typed events yielded by the engine's ``generate()``.

Every event is a frozen dataclass so it can cross a Qt signal boundary unchanged. They are
plain data and import nothing of the engine: the step record builds its ``StepEvent``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


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
    drafter: str = ""  # the source that drafted the step ("n-gram", "DFlash", …)


class GuardReason(str, Enum):
    """Why the collapse guard paused (or resumed) drafting, as measured."""

    DISAGREEMENT = "disagreement"  # the draft's recent agreement is below the break-even
    COST = "cost"  # a draft pass costs too much for the agreement it gets
    PROBE = "probe"  # the pause ran its course: the draft is tried again


@dataclass(frozen=True)
class GuardEvent:
    """Drafting paused (or resumed) by the collapse guard: the measured fields only.

    The words for people are built from these fields and the pair's drafting method above
    the engine (``app.models.guard_words``), for the window's banner and the CLI alike.
    """

    paused: bool
    acceptance: float  # the guard's agreement: accepted ÷ judged draft tokens over its window
    break_even: float  # agreement below which drafting costs more than it saves
    step: int
    reason: GuardReason = GuardReason.DISAGREEMENT
    speed_ratio: float | None = None  # measured drafting speed / target-only speed
    draft_cost_fraction: float | None = None  # one draft pass / one target pass
    probe_in: int = 0  # target-only tokens before the draft is probed again
    window: int = 0  # verification steps the agreement was measured over
    never_pays: bool = False  # by the measured pass costs, no length beats the target alone
    lookups_go_on: bool = False  # prompt lookups keep drafting while the draft is paused
    noisy: bool = False  # a pause for cost measured while other programs slowed the machine
    few_passes: bool = False  # a pause for cost priced on the first few verifications here
    # still paused: the probe due at this step was skipped (by the costs at this depth the
    # draft cannot pay at its last agreement); ``probe_in`` is the new wait
    probe_skipped: bool = False

    @property
    def measured_loss(self) -> bool:
        """The measured speed supports the pause (a speed of 1× or more never does)."""
        ratio = self.speed_ratio
        return ratio is not None and math.isfinite(ratio) and 0.0 <= ratio < 1.0


def guard_record(event: GuardEvent) -> dict[str, Any]:
    """A guard event's measured fields as plain JSON values (bench rows)."""
    return {
        "paused": event.paused,
        "step": event.step,
        "reason": event.reason.value,
        "agreement": round(event.acceptance, 4),
        "break_even": round(event.break_even, 4),
        "speed_ratio": None if event.speed_ratio is None else round(event.speed_ratio, 4),
        "draft_cost_fraction": (
            None if event.draft_cost_fraction is None else round(event.draft_cost_fraction, 4)
        ),
        "window": event.window,
        "lookups_go_on": event.lookups_go_on,
        "noisy": event.noisy,
        "few_passes": event.few_passes,
    }


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
    guard_events: tuple[GuardEvent, ...] = ()  # the collapse guard's pauses, as measured
    p99_itl_ms: float = 0.0
    paused_tokens: int = 0  # tokens written while the guard paused drafting
    paused_lookup_tokens: int = 0  # of them, prompt lookups' accepted tokens (lookups go on)
    # of them, those of the steps after the answer's last step with drafting on: how long
    # drafting had stayed paused when the answer ended
    paused_at_end: int = 0
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
    # time outside llama_decode in the decoding steps (no prefill), each step's learning from
    # its record included
    step_host_s: float = 0.0
    # where the sampler chain ran: "device" (llama.cpp returned each row's candidates), or
    # "host (why)" (full rows of logits crossed into Python)
    sampling: str = ""
    # target passes of the decoding steps, and the tokens they produced: each pass's accepted
    # drafts and its own token, the end of the answer and tokens past the limit included
    passes: int = 0
    verified: int = 0
    # the fewest threads the passes ran on, where they went below the load's to leave other
    # programs their cores (thread_fit.ThreadGovernor); None when they never did
    fewest_threads: int | None = None

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
        """Tokens per target pass, the bonus token included (vLLM's mean acceptance length):
        1 + accepted ÷ passes, never below 1. Counted from what the passes produced: a pass
        whose token ends the answer (end of text, the token limit) adds no token to the
        answer, yet it was one pass making one token."""
        if self.passes > 0:
            return self.verified / self.passes
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
