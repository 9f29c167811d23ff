"""Exactness check: does speculative output equal target-only output token for token?

On CPU (and GPU) a batched verification pass and a single-token pass use different
arithmetic, so a greedy run can flip a near-tie. Such a divergence is reported with the
target's top-two logit margin at that position: a small margin means a near-tie, a large
one means a bug. Nothing is hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.engine.config import AcceptRule
from app.engine.events import RunSummary, StepEvent
from app.engine.figures import rate
from app.engine.thread_fit import OUTSIDE_LOAD

if TYPE_CHECKING:
    from app.engine.engine import Engine

NEAR_TIE_LOGIT_MARGIN = 0.5  # below this the flip is attributed to batched arithmetic


def is_near_tie(margin: float | None) -> bool:
    return margin is not None and margin < NEAR_TIE_LOGIT_MARGIN


def near_tie_words(margin: float | None) -> str:
    """What a greedy divergence with this top-two logit margin is called (chat and Lab)."""
    return "near-tie" if is_near_tie(margin) else "NOT a near-tie"


@dataclass(frozen=True)
class Comparison:
    identical: bool
    first_divergence: int | None  # index in the generated tokens
    margin: float | None  # target's top-1 minus top-2 logit at the divergence
    compared: int  # tokens compared (the shorter of the two outputs)

    def describe(self) -> str:
        if self.identical:
            return "identical"
        kind = near_tie_words(self.margin)
        return f"diverged at token {self.first_divergence} ({kind}, margin {self.margin:.4f})"


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None


def compare(
    prompt: Sequence[int], speculative: Sequence[int], baseline: Sequence[int], engine: Engine
) -> Comparison:
    """Compare two outputs of the same prompt; measure the target's margin where they split.

    Outputs of different lengths that agree on their common part (one hit max tokens or a
    stop string first) count as identical over the compared span.
    """
    compared = min(len(speculative), len(baseline))
    index = first_divergence(speculative, baseline)
    if index is None:
        return Comparison(True, None, None, compared)
    _, _, margin = engine.target_margin([*prompt, *baseline[:index]])
    return Comparison(False, index, margin, compared)


# --- the verdict the window shows (one text, built here, shown and exported everywhere) ------

SHORT_RUN = 0.5  # a run under half the other's length gets its token count beside its speed
# The two runs did not get the same machine when one run's threads got this many times the
# CPU share of the other's (run_stats.MachineMeter). Measured on a 2-core machine already
# busy with other work: 0.19 and 0.19 for two runs side by side; 0.10 against 0.22 with
# busy loops on the cores during one of them.
UNEVEN_SHARE = 1.3


@dataclass(frozen=True)
class StepCosts:
    """Measured cost of the speculative run's verification steps (from its StepEvents)."""

    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    other_ms: float = 0.0

    @classmethod
    def of(cls, steps: Sequence[StepEvent]) -> StepCosts:
        return cls(
            len(steps),
            sum(s.drafted for s in steps),
            sum(s.accepted for s in steps),
            sum(s.draft_ms for s in steps),
            sum(s.verify_ms for s in steps),
            sum(s.other_ms for s in steps),
        )

    def reason(self, spec: RunSummary, baseline_tok_s: float) -> str:
        """Why speculation was slower, in measured milliseconds that add up: the answer's
        time a token (prefill excluded, as in its tok/s) against the target's alone, split
        into the drafting steps and everything outside them (steps that drafted nothing,
        sampling, the time between steps)."""
        if not self.steps or spec.tokens <= 0 or spec.tok_s <= 0:
            return ""
        total_ms = spec.tokens * 1000.0 / spec.tok_s
        text = f"{_ms(total_ms / spec.tokens)} a token"
        if baseline_tok_s > 0:
            text += f" against {_ms(1000.0 / baseline_tok_s)} target-only"
        steps_ms = self.draft_ms + self.verify_ms + self.other_ms
        made = min(self.accepted + self.steps, spec.tokens)  # accepted drafts + each own token
        per_step = (
            f"a step: {_ms(self.draft_ms / self.steps)} drafting + "
            f"{_ms(self.verify_ms / self.steps)} verifying"
        )
        if self.other_ms / self.steps >= 0.05:
            per_step += f" + {_ms(self.other_ms / self.steps)} other"
        per_step += f" for {(self.accepted + self.steps) / self.steps:.2f} tokens"
        text += (
            f". {_tokens(made)} came from {self.steps} drafting "
            f"step{'s' * (self.steps != 1)} at {_ms(steps_ms / max(made, 1))} a token "
            f"({per_step})"
        )
        rest_tokens, rest_ms = spec.tokens - made, max(total_ms - steps_ms, 0.0)
        if rest_tokens > 0:
            text += (
                f"; the other {_tokens(rest_tokens)} and the time between steps took "
                f"{_ms(rest_ms)} ({_ms(rest_ms / rest_tokens)} a token)"
            )
        elif rest_ms >= 0.05:
            text += f"; the time between steps took {_ms(rest_ms)}"
        return text


def _ms(value: float) -> str:
    """Milliseconds with a decimal below 10 ms, so 3.2 against 1.1 is not "3 against 1"."""
    return f"{value:.1f} ms" if value < 10 else f"{value:,.0f} ms"


def _tokens(count: int) -> str:
    return f"{count} token{'s' * (count != 1)}"


@dataclass(frozen=True)
class Judgement:
    """What one answer's two runs say: speed, exactness, and which token to mark."""

    speed: str
    exactness: str
    divergence: int | None  # marked in both panes only where identity is expected
    notes: tuple[str, ...] = ()  # what else the run did (the guard's pauses)
    # the two runs did not get the same machine: the speeds are no speedup (stored as a flag)
    uneven_machine: bool = False

    @property
    def text(self) -> str:
        return " — ".join(part for part in (self.speed, *self.notes, self.exactness) if part)


def uneven_machine(spec: RunSummary, base: RunSummary) -> str:
    """Why the two runs' speeds are not comparable, or "" when they got the same machine."""
    if spec.cpu_share is None or base.cpu_share is None:
        return ""
    low, high = sorted((spec.cpu_share, base.cpu_share))
    if low <= 0.0 or high < UNEVEN_SHARE * low:
        return ""
    starved = "speculative" if spec.cpu_share < base.cpu_share else "target-only"
    text = (
        f"the {starved} run got less of the CPU: its threads got {low * 100:.0f} % of the "
        f"CPU time they could use, against {high * 100:.0f} % in the other run"
    )
    outside = spec.outside_cores, base.outside_cores
    if outside[0] is not None and outside[1] is not None:
        text += (
            f" (other processes kept {outside[0]:.1f} cores busy during the speculative run, "
            f"{outside[1]:.1f} during the target-only run)"
        )
    return text


def speed_text(spec: RunSummary, base: RunSummary | None, costs: StepCosts) -> str:
    """Speed, compared as tokens per second: a rate does not need equal lengths."""
    if base is None:
        return f"baseline not run — speculative {rate(spec.tok_s)} tok/s"
    both = f"{rate(spec.tok_s)} vs {rate(base.tok_s)} tok/s target-only"
    shorter, longer = sorted((spec.tokens, base.tokens))
    if shorter < SHORT_RUN * longer:
        both += f"; {spec.tokens} vs {base.tokens} tokens"
    uneven = uneven_machine(spec, base)
    if uneven:
        return (
            f"speeds not comparable ({both}): {uneven}. Measure again (Regenerate) when the "
            "machine is quieter"
        )
    if spec.drafted == 0:
        return (
            f"nothing was drafted, so both runs were target-only ({both}): "
            "the difference is noise, not a speedup"
        )
    if base.tok_s <= 0 or spec.tok_s <= 0:
        return f"speculative {rate(spec.tok_s)} tok/s, target-only {rate(base.tok_s)} tok/s"
    ratio = spec.tok_s / base.tok_s
    if ratio >= 1.0:
        return f"{ratio:.2f}× faster ({both})"
    reason = costs.reason(spec, base.tok_s)
    slower = f"{ratio:.2f}× — {(1.0 - ratio) * 100:.0f} % slower ({both})"
    return f"{slower}: {reason}" if reason else slower


def pause_note(paused: int, tokens: int, lookups: int = 0) -> str:
    """How much of the answer was written while the guard paused drafting, and how much of
    that prompt lookups still drafted (they go on while a model or heads are paused)."""
    if paused <= 0:
        return ""
    note = f"drafting paused for {paused} of {tokens} tokens"
    if lookups > 0:
        note += f" (prompt lookups still drafted {min(lookups, paused)} of them)"
    return note


def outside_load_note(spec: RunSummary) -> str:
    """That the answer ran while other programs used the machine, as measured: its speed and
    the guard's decisions say as much about them as about the pair."""
    cores = spec.outside_cores
    if cores is None or cores < OUTSIDE_LOAD:
        return ""
    note = f"ran while other programs kept {cores:.1f} cores busy"
    fewest = spec.fewest_threads
    if fewest is not None:
        note += f", its passes on as few as {fewest} thread{'' if fewest == 1 else 's'}"
    return note


def judge(
    spec: RunSummary,
    base: RunSummary | None,
    comparison: Comparison | None,
    *,
    temperature: float,
    rule: AcceptRule,
    position_keyed: bool = False,
    steps: Sequence[StepEvent] = (),
) -> Judgement:
    """The verdict of one answer, from the engine's own summaries and comparison.

    Token identity is expected at temperature 0, and when sampling with sample-and-match
    driven by position-keyed randomness (both runs draw the same number at each position).
    Rejection sampling, and sample-and-match without position-keyed randomness, reproduce
    the target's distribution but not its draws: there the texts differ by design.
    """
    speed = speed_text(spec, base, StepCosts.of(steps))
    compared = comparison if base is not None else None
    exactness, divergence = _exactness(compared, temperature, rule, position_keyed)
    uneven = base is not None and bool(uneven_machine(spec, base))
    paused = pause_note(spec.paused_tokens, spec.tokens, spec.paused_lookup_tokens)
    notes = (paused, "" if uneven else outside_load_note(spec))
    return Judgement(speed, exactness, divergence, tuple(n for n in notes if n), uneven)


def _exactness(
    comparison: Comparison | None, temperature: float, rule: AcceptRule, position_keyed: bool
) -> tuple[str, int | None]:
    """What the two texts say, and the token to mark where identity was expected."""
    if comparison is None:
        return "", None
    if temperature <= 0.0 or (rule is AcceptRule.MATCH and position_keyed):
        if comparison.identical:
            same = "identical to target-only"
            if temperature > 0.0:
                same += " (position-keyed sampling, same seed)"
            return same, None
        return comparison.describe(), comparison.first_divergence
    how = "rejection sampling" if rule is AcceptRule.REJECTION else "sample-and-match"
    design = (
        f"at temperature {temperature:g} {how} draws different samples than the target-only "
        "run: texts differ by design; exactness is checked by distribution, not by identity"
    )
    if comparison.identical:
        return "same text by chance — " + design, None
    return design, None
