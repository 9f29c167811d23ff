"""One decoding step, one record.

The loop drafts, verifies, accepts, then builds a ``StepRecord``: which drafter proposed how
many tokens, how many the target kept, and what each stage cost. The controller and its
guard, the run figures, the charts' step events, the bench and the Lab read that record and
nothing else (as every reader of vLLM's ``SpecDecodingStats`` reads one record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.engine.events import DrafterFigures, StepEvent

if TYPE_CHECKING:
    from app.engine.drafters.base import DraftBlock
    from app.engine.loop.acceptance import Outcome


@dataclass(frozen=True)
class StepRecord:
    step: int
    drafter: str  # the source that drafted (a block's source); "" when no drafter ran
    depth: int  # tokens in the context before this step
    proposed: int  # draft tokens sent to verification
    accepted: int  # of them, the accepted prefix: positions 0 .. accepted - 1
    verified: int  # tokens the verification produced: the accepted ones and the target's own
    emitted: int  # tokens the step added to the answer (fewer when it ended the answer)
    draft_passes: int  # draft-model passes paid (0 for prompt lookup)
    draft_ms: float  # drafting, catch-up included
    catch_up: int  # tokens the draft's first pass decoded to catch up with the answer
    catch_up_ms: float
    verify_ms: float
    host_ms: float  # the step's time outside llama_decode
    step_ms: float
    paused: bool = False  # the guard had drafting paused: the target ran alone
    confidences: tuple[float | None, ...] = ()  # the draft's confidence per proposed token
    # a token the draft declined to propose: (its confidence, whether the target agreed)
    declined: tuple[float, bool] | None = None
    # the positions one draft pass drafted, each priced as a single pass (``DraftBlock``)
    positions_per_pass: int = 1

    @property
    def paid(self) -> bool:
        """A drafting step: draft passes or a longer verification batch were paid for."""
        return self.draft_passes > 0 or self.proposed > 0

    @property
    def other_ms(self) -> float:
        return max(self.step_ms - self.draft_ms - self.verify_ms, 0.0)

    def event(
        self, *, next_draft_len: int, rolling_acceptance: float, break_even: float
    ) -> StepEvent:
        """The charts' view of this record, with the controller's state after it."""
        return StepEvent(
            step=self.step,
            drafted=self.proposed,
            accepted=self.accepted,
            draft_ms=self.draft_ms,
            verify_ms=self.verify_ms,
            other_ms=self.other_ms,
            next_draft_len=next_draft_len,
            rolling_acceptance=rolling_acceptance,
            break_even=break_even,
            drafter=self.drafter,
        )

    @classmethod
    def of(
        cls,
        step: int,
        drafter: str,
        block: DraftBlock | None,
        outcome: Outcome,
        *,
        depth: int,
        emitted: int,
        verify_ms: float,
        step_ms: float,
        decode_ms: float,
        paused: bool,
    ) -> StepRecord:
        declined = None
        if block is not None and block.declined and outcome.accepted == len(block.tokens):
            token, confidence = block.declined
            declined = (confidence, outcome.tokens[-1].token_id == token)
        return cls(
            step=step,
            drafter=block.source if block is not None else drafter,
            depth=depth,
            proposed=len(block.tokens) if block is not None else 0,
            accepted=outcome.accepted,
            verified=len(outcome.tokens),
            emitted=emitted,
            draft_passes=block.passes if block is not None else 0,
            draft_ms=block.ms if block is not None else 0.0,
            catch_up=block.catch_up if block is not None else 0,
            catch_up_ms=block.catch_up_ms if block is not None else 0.0,
            verify_ms=verify_ms,
            host_ms=max(step_ms - decode_ms, 0.0),
            step_ms=step_ms,
            paused=paused,
            confidences=tuple(block.confidences) if block is not None else (),
            declined=declined,
            positions_per_pass=block.positions_per_pass if block is not None else 1,
        )


def per_position(records: Sequence[StepRecord]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(drafted, accepted) per draft position: blocks that reached position i, and those
    whose token at position i was accepted."""
    longest = max((r.proposed for r in records), default=0)
    drafted = tuple(sum(1 for r in records if r.proposed > i) for i in range(longest))
    accepted = tuple(sum(1 for r in records if r.accepted > i) for i in range(longest))
    return drafted, accepted


def per_drafter(records: Sequence[StepRecord]) -> tuple[DrafterFigures, ...]:
    """What each draft source proposed and what the target kept of it, in order of use."""
    figures: dict[str, DrafterFigures] = {}
    for r in records:
        if not r.paid:
            continue
        had = figures.get(r.drafter) or DrafterFigures(r.drafter)
        figures[r.drafter] = DrafterFigures(
            r.drafter,
            steps=had.steps + 1,
            drafted=had.drafted + r.proposed,
            accepted=had.accepted + r.accepted,
            draft_passes=had.draft_passes + r.draft_passes,
            draft_ms=had.draft_ms + r.draft_ms,
        )
    return tuple(figures.values())
