"""A pause for cost carried from one answer to the next on the same pair says so at the next
answer's first step (issue 33 §1: a chat message after a served request was written by the
target alone, and its verdict said only "drafting paused for 49 of 49 tokens")."""

from __future__ import annotations

import pytest

from app.engine.config import SpecConfig
from app.engine.policy.controller import DraftController
from app.engine.policy.guard import GuardMemory
from app.models import guard_words

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_a_restored_pause_for_cost_is_said_at_step_zero_and_carried_again() -> None:
    controller = DraftController(SpecConfig())
    controller.restore(GuardMemory(True, 64, 1, 0.9))
    assert controller.paused
    event = controller.carried_pause(step=0, depth=0)
    assert event is not None and event.paused and event.step == 0
    assert event.reason == "cost" and event.probe_in == 64
    assert guard_words.message(event, None).startswith("Drafting paused at step 0: ")
    assert controller.carried_pause(step=0, depth=0) is None  # said once


def test_nothing_to_say_when_nothing_was_carried() -> None:
    controller = DraftController(SpecConfig())
    controller.restore(GuardMemory(False, 64, 0, 0.9))
    assert not controller.paused and controller.carried_pause(step=0, depth=0) is None


def test_the_engine_says_a_carried_pause_before_the_first_token(tiny_pair) -> None:  # noqa: ANN001
    """The real engine on the tiny pair: the pause an earlier answer left (as a served
    request leaves it for the chat's next message) is the first thing the next answer says,
    and its summary counts it and keeps its words."""
    from app.engine.config import GenerationRequest, ModelSpec
    from app.engine.engine import Engine
    from app.engine.events import GuardEvent, RunSummary, TokenEvent

    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=1),
        ModelSpec(str(draft), n_ctx=512, n_threads=1),
    )
    try:
        request = GenerationRequest(tuple(eng.tokenize("the code of the model")), max_tokens=12)
        list(eng.generate(request))
        assert eng._guard_memory  # what the first answer left, per drafter
        for key in eng._guard_memory:  # it ended paused for cost, as a served request can
            eng._guard_memory[key] = GuardMemory(True, 64, 1, 0.9)
        events = list(eng.generate(request))
    finally:
        eng.close()
    guards = [e for e in events if isinstance(e, GuardEvent)]
    first_token = next(i for i, e in enumerate(events) if isinstance(e, TokenEvent))
    assert guards and events.index(guards[0]) < first_token
    assert guards[0].paused and guards[0].step == 0 and guards[0].reason == "cost"
    summary = events[-1]
    assert isinstance(summary, RunSummary)
    assert summary.guard_pauses >= 1 and guards[0] in summary.guard_events
    assert summary.paused_tokens == summary.tokens  # written alone, and now said why


def test_the_verdict_says_how_much_prompt_lookups_drafted_while_the_model_was_paused(
    tiny_pair,  # noqa: ANN001
) -> None:
    """An answer that repeats itself while the draft model is paused: prompt lookups go on,
    and the verdict's pause note says how many of the paused tokens they drafted (the walk
    found "drafting paused for 48 of 48 tokens" where lookups had drafted 35 of them)."""
    from app.engine.config import AcceptRule, GenerationRequest, ModelSpec
    from app.engine.engine import Engine
    from app.engine.events import RunSummary
    from app.engine.exactness import judge

    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=1),
        ModelSpec(str(draft), n_ctx=512, n_threads=1),
    )
    try:
        prompt = tuple(eng.tokenize("the model the model the model the model the model"))
        request = GenerationRequest(prompt, max_tokens=60)
        list(eng.generate(request))
        for key in eng._guard_memory:  # paused for cost for the whole next answer
            eng._guard_memory[key] = GuardMemory(True, 1024, 1, 0.9)
        summary = list(eng.generate(request))[-1]
    finally:
        eng.close()
    assert isinstance(summary, RunSummary)
    assert summary.paused_tokens == summary.tokens
    assert 0 < summary.paused_lookup_tokens < summary.paused_tokens
    text = judge(summary, None, None, temperature=0.0, rule=AcceptRule.REJECTION).text
    lookups = summary.paused_lookup_tokens
    assert f"(prompt lookups still drafted {lookups} of them)" in text
