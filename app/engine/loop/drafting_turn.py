"""The drafting side of one request: the drafter and the controller that sizes and pauses it.

The loop asks it for a block before each verification and hands it each step's record
after; it answers with nothing where no drafter runs (target-only decoding), where the
guard has drafting paused (prompt lookups excepted where they go on), and where no single
target pass was measured near the step's depth (that step measures one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from app.engine.drafters.base import DraftBlock, Drafter, DraftLimits
from app.engine.events import GuardEvent, StepEvent
from app.engine.policy.controller import DraftController
from app.engine.policy.costs import CostModel
from app.engine.policy.guard import GuardMemory
from app.engine.step_record import StepRecord


class DraftingTurn:
    """One request's drafter (None: the target alone) and its controller, restored from
    what the last request on the pair with the same drafter left (``memory``)."""

    def __init__(
        self,
        drafter: Drafter | None,
        controller: DraftController,
        costs: CostModel,
        *,
        ends_answer: Callable[[int], bool] | None,
        memory: dict[str, GuardMemory | None],
    ) -> None:
        self.drafter = drafter
        self.controller = controller
        self.costs = costs
        self.ends_answer = ends_answer
        self.name = drafter.name if drafter is not None else ""
        # while the guard has the model paused, a combined drafter's prompt lookups go on
        self.lookups_go_on = drafter is not None and drafter.lookups_while_paused
        self.pauses: list[GuardEvent] = []  # the guard's pauses, for the run's summary
        # with a draft model the first step writes with the target alone, before the draft has
        # read the prompt, so the first token comes as soon as without it; no prompt lookup
        # drafts in it either (verifying a block costs more than one token's pass). The
        # draft's catch-up is paid in the second step
        self._first_step_alone = False
        self._memory = memory
        controller.restore(memory.get(self.name))

    @property
    def paused(self) -> bool:
        """The guard has the drafter paused (this step, the target writes alone)."""
        return self.drafter is not None and self.controller.paused

    def prefill(self, prompt: list[int], *, busy_machine: bool = False) -> GuardEvent | None:
        """Before the answer's first step: pause a drafter the costs say can never pay, and
        let the drafter take in the prompt. The pause, if any, is said after the prefill.
        ``busy_machine``: other programs kept the cores busy while the costs' latest prices
        were taken (the last answer, this prompt's processing), so such a pause is noisy."""
        drafter = self.drafter
        if drafter is None:
            return None
        pause = None
        if drafter.pays_passes:
            pause = self.controller.pause_if_never_pays(
                step=0, depth=len(prompt), noisy=busy_machine
            )
        self._first_step_alone = drafter.reads_prompt_late
        drafter.prefill(prompt)
        self._rest_while_paused()
        return pause

    def opening_pause(self, pause: GuardEvent | None, depth: int) -> GuardEvent | None:
        """The pause to say before the first token: the prefill's, or one carried over from
        an earlier answer."""
        if pause is None and self.drafter is not None:
            pause = self.controller.carried_pause(step=0, depth=depth)
        self._rest_while_paused()
        return None if pause is None else self._paused(pause)

    def propose(self, committed: list[int], cap: int) -> DraftBlock | None:
        """The block to verify after ``committed``, at most ``cap`` tokens (None: none)."""
        drafter, controller = self.drafter, self.controller
        depth = len(committed)
        first_alone, self._first_step_alone = self._first_step_alone, False
        paused = self.paused
        if (
            drafter is None
            or first_alone
            or (paused and not self.lookups_go_on)
            or self.costs.needs_single_pass(depth)
        ):
            return None
        ceiling = controller.next_draft_len(depth, confidence_driven=drafter.confidence_driven)
        want = min(ceiling, cap)
        if want <= 0:
            return None
        # the thresholds size a block of draft passes: lookups alone, or lookups while the
        # model is paused, are judged by their own gate (pricing the thresholds anyway was a
        # fifth of such a step's host time, and a quarter of a lookups-only step's)
        sized = drafter.pays_passes and not paused
        limits = DraftLimits(
            want,
            keep_drafting=controller.keep_drafting_threshold(depth) if sized else 0.0,
            include=controller.include_threshold(depth) if sized else 0.0,
            ends_answer=self.ends_answer,
            model=not paused,
            guard_paused=paused,
        )
        return drafter.propose(committed, limits)

    def learn(
        self, record: StepRecord, block: DraftBlock | None, *, last: bool = False
    ) -> Iterator[StepEvent | GuardEvent]:
        """After one step: the drafter and the controller learn from it; the step's event
        for the charts, and the guard's pause or probe when it decides one. A probe due
        after the answer's ``last`` step is not said: no step of this answer drafts after it
        (the banner read "resumed at step 34" beside "drafting paused for 48 of 48 tokens");
        the next answer on the pair starts unpaused all the same. Nor is a probe skipped there."""
        controller = self.controller
        if self.drafter is not None and block is not None:
            self.drafter.observe(block, record.accepted)
        controller.observe(record)
        if record.proposed:
            yield record.event(
                next_draft_len=controller.draft_len,
                rolling_acceptance=controller.rolling_acceptance,
                break_even=controller.pause_threshold(record.depth),
            )
        guard = controller.guard(record)
        self._rest_while_paused()
        if guard is None or (last and (not guard.paused or guard.probe_skipped)):
            return
        if guard.probe_skipped:  # still paused, for longer: no new pause
            yield replace(guard, lookups_go_on=self.lookups_go_on)
        else:
            yield self._paused(guard) if guard.paused else guard

    def _rest_while_paused(self) -> None:
        """A paused draft pays nothing, not even a head's reading of the target's rows after
        each decode: it rests, between steps, so a resumed head's reading of what it kept is
        no step's time (its passes are timed in the run's decoding)."""
        if self.drafter is not None:
            self.drafter.rest(self.paused)

    def _paused(self, pause: GuardEvent) -> GuardEvent:
        pause = replace(pause, lookups_go_on=self.lookups_go_on)
        self.pauses.append(pause)
        return pause

    def finish(self, *, busy_machine: bool = False) -> None:
        """Leave the guard's state for the next request on the pair with this drafter
        (``busy_machine``: other programs kept half a core or more busy during this one)."""
        self._memory[self.name] = self.controller.snapshot(busy_machine=busy_machine)
