"""The collapse guard's words, built from its measured fields and the pair's drafting method.

The engine's ``GuardEvent`` keeps what was measured (the agreement, the break-even, the pass
costs, the reason); what a person reads in the window's banner, in the CLI and in a saved
answer's notes is written here, where the drafter is known: advice to choose "a smaller
draft" fits a draft model, not the target's own MTP heads or the assistant made for it.

Two figures are named apart everywhere: the guard's *agreement* (accepted ÷ judged draft
tokens over its last few steps; tokens after a rejection are not judged) and the answer's
*acceptance* (accepted ÷ drafted over the whole answer, in the status bar and the verdict).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.engine.events import GuardEvent, GuardReason, StepEvent
from app.models.drafting import DrafterKind, PairDrafting

MAX_SHOWN_COST = 10.0  # a draft pass dearer than ten target passes is "over 10 times the cost"
AGREEMENT_MEANS = (
    "agreement: accepted ÷ judged draft tokens over the guard's last steps, not the answer's "
    "acceptance (accepted ÷ drafted over the whole answer)"
)


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


_UNKNOWN = PairDrafting(DrafterKind.DRAFT_MODEL, "draft")


def advice(event: GuardEvent, drafting: PairDrafting | None) -> str:
    """What a person can do about a pause, for this drafter and this measured reason."""
    kind = drafting.kind if drafting is not None else None
    cost = event.reason is GuardReason.COST
    if kind is DrafterKind.MTP:
        return (
            "The target's own heads cannot be made cheaper: lower the draft length, use "
            "prompt lookup, or turn speculation off."
            if cost
            else "The target's own heads disagree on this text: lower the draft length, or "
            "use prompt lookup for repetitive text."
        )
    if kind is DrafterKind.ASSISTANT or kind is DrafterKind.HEAD:
        what = "assistant" if kind is DrafterKind.ASSISTANT else "head"
        return (
            f"The {what} is made for this target, there is no smaller one: lower the draft "
            "length, use prompt lookup, or turn speculation off."
            if cost
            else f"The {what} disagrees with its target on this text: lower the draft length, "
            "or use prompt lookup for repetitive text."
        )
    if kind is DrafterKind.LOOKUP:
        return "Prompt lookup pays on text that repeats the conversation (code edits, quotes)."
    if drafting is not None and drafting.same_model:
        # the headers cannot tell the target in another quantization from a model as large
        same = "The draft has the target's architecture, vocabulary and size"
        return (
            f"{same}: a draft of the family with fewer parameters costs less, or use prompt lookup."
            if cost
            else f"{same}: a higher quantization of the target agrees more, or use prompt "
            "lookup for repetitive text."
        )
    if drafting is not None and drafting.same_family:
        return (
            "Try a draft of the same family with fewer parameters or a lower quantization, "
            "fewer CPU threads for the draft, or prompt lookup."
            if cost
            else "The draft is already of the target's family (same architecture and "
            "vocabulary): a larger one agrees more, or use prompt lookup for repetitive text."
        )
    if cost:
        return (
            "Try a smaller draft (a lower quantization or fewer parameters), fewer CPU threads "
            "for the draft, or prompt lookup."
        )
    return "Try a draft from the same model family, or prompt lookup for repetitive text."


def headline(event: GuardEvent) -> str:
    if event.probe_skipped:
        return f"Probe skipped at step {event.step}"
    what = "paused" if event.paused else "resumed"
    return f"Drafting {what} at step {event.step}"


def _meanwhile(event: GuardEvent, drafting: PairDrafting | None) -> str:
    """What goes on while the draft is paused, and when it is tried again."""
    probed = (drafting or _UNKNOWN).probed
    again = f"in {event.probe_in} tokens" if event.probe_in else "later"
    if event.lookups_go_on:
        return (
            f"Prompt lookups still draft where the answer repeats the conversation; {probed} "
            f"again {again}."
        )
    return f"The target answers alone; {probed} again {again}."


def explanation(event: GuardEvent, drafting: PairDrafting | None) -> str:
    """The measured reason, what goes on meanwhile, and advice for this drafter."""
    if not event.paused:
        return f"probing {(drafting or _UNKNOWN).drafter} again."
    then = f"{_meanwhile(event, drafting)} {advice(event, drafting)}"
    if event.probe_skipped:
        agreement = f"{event.acceptance * 100:.0f} %"
        return (
            f"by the measured pass costs at this depth, the draft cannot pay at its last "
            f"agreement ({agreement}), so the probe due now was skipped. {then}"
        )
    if event.reason is GuardReason.COST:
        fraction = event.draft_cost_fraction
        cost = (
            f"a draft pass costs {cost_share_text(fraction)} of a target pass"
            if fraction is not None
            else "drafting costs more than it saves"
        )
        if event.measured_loss:
            why = (
                f" and drafting steps ran at {event.speed_ratio:.2f}× the target-only speed, "
                f"so it cannot pay at its recent agreement ({event.acceptance * 100:.1f} %"
                f"{_over(event)})"
            )
        elif event.never_pays:
            why = (
                ", so by the measured pass costs no draft length can beat the target "
                "alone, even with every drafted token accepted"
            )
        else:
            agreement, break_even = percent_pair(event.acceptance, event.break_even)
            why = (
                f", so at its recent agreement ({agreement}{_over(event)}) it cannot pay: that "
                f"needs {break_even} or more"
            )
        if event.noisy:
            why += (
                ", measured while other programs were slowing this machine (its target passes "
                "took well over their usual time), so the draft is tried again soon"
            )
        elif event.few_passes:
            why += (
                ", priced on the first few verifications measured at this depth (a pass's "
                "first runs can cost far more than its later ones), so the draft is tried "
                "again soon"
            )
        return f"{cost}{why}. {then}"
    agreement, break_even = percent_pair(event.acceptance, event.break_even)
    return (
        f"the recent agreement {agreement} (accepted ÷ judged draft tokens"
        f"{_over(event)}) is below the break-even {break_even}. {then}"
    )


def _over(event: GuardEvent) -> str:
    if not event.window:
        return ""
    return f" over the last {event.window} steps" if event.window > 1 else " over the last step"


def message(event: GuardEvent, drafting: PairDrafting | None) -> str:
    """The one text for a guard event: the CLI prints it, a saved answer keeps it."""
    return f"{headline(event)}: {explanation(event, drafting)}"


@dataclass
class GuardHistory:
    """The guard's story over one answer: each pause with its reason, what drafted while it
    lasted, and each resume, so the last event never erases why drafting paused."""

    events: list[GuardEvent] = field(default_factory=list)
    lookup_tokens: list[int] = field(default_factory=list)  # drafted while each pause lasted

    def clear(self) -> None:
        self.events.clear()
        self.lookup_tokens.clear()

    def add(self, items: Iterable[object]) -> bool:
        """Take a batch of the answer's events; True when the guard said something new."""
        changed = False
        for item in items:
            if isinstance(item, GuardEvent):
                self.events.append(item)
                self.lookup_tokens.append(0)
                changed = True
            elif isinstance(item, StepEvent) and self._paused and item.drafted:
                self.lookup_tokens[-1] += item.drafted
                changed = True
        return changed

    @property
    def _paused(self) -> bool:
        return bool(self.events) and self.events[-1].paused

    def story(self) -> str:
        """ "paused at step 2 (cost), prompt lookups kept drafting (6 tokens), resumed at
        step 50" """
        parts: list[str] = []
        for event, drafted in zip(self.events, self.lookup_tokens, strict=True):
            if event.probe_skipped:
                parts.append(f"the probe due at step {event.step} was skipped")
                if drafted:
                    parts.append(f"prompt lookups kept drafting ({_tokens(drafted)})")
            elif event.paused:
                parts.append(f"paused at step {event.step} ({event.reason.value})")
                if drafted:
                    parts.append(f"prompt lookups kept drafting ({_tokens(drafted)})")
                elif event.lookups_go_on:
                    parts.append("prompt lookups found nothing to draft")
                else:
                    parts.append("the target answered alone")
            else:
                parts.append(f"resumed at step {event.step}")
        return ", ".join(parts)

    def text(self, drafting: PairDrafting | None) -> tuple[str, str]:
        """(headline, rest) for the banner: the story so far, then the words of the last
        pause (its measured reason and the advice), which a resume does not erase."""
        if not self.events:
            return "", ""
        pauses = [e for e in self.events if e.paused]
        last = self.events[-1]
        if len(self.events) == 1 and not self.lookup_tokens[0]:
            return headline(last), explanation(last, drafting)
        story = self.story()
        head = f"Drafting {story.split(',', 1)[0]}"
        rest = story.split(",", 1)[1].strip() if "," in story else ""
        why = explanation(pauses[-1], drafting) if pauses else ""
        return head, f"{rest}. Last pause: {why}" if why else rest


def _tokens(count: int) -> str:
    return f"{count} token{'s' * (count != 1)}"
