"""A pause for cost carried from one answer to the next on the same pair says so at the next
answer's first step (issue 33 §1: a chat message after a served request was written by the
target alone, and its verdict said only "drafting paused for 49 of 49 tokens")."""

from __future__ import annotations

from app.engine.adaptive import DraftController, GuardMemory
from app.engine.config import SpecConfig


def test_a_restored_pause_for_cost_is_said_at_step_zero_and_carried_again() -> None:
    controller = DraftController(SpecConfig())
    controller.restore(GuardMemory(True, 64, 1, 0.9))
    assert controller.paused
    event = controller.carried_pause(step=0)
    assert event is not None and event.paused and event.step == 0
    assert event.reason == "cost" and event.probe_in == 64
    assert event.message.startswith("Drafting paused at step 0: ")
    assert controller.carried_pause(step=0) is None  # said once


def test_nothing_to_say_when_nothing_was_carried() -> None:
    controller = DraftController(SpecConfig())
    controller.restore(GuardMemory(False, 64, 0, 0.9))
    assert not controller.paused and controller.carried_pause(step=0) is None
