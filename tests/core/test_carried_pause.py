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


def test_the_verdict_says_how_much_prompt_lookups_drafted_while_the_model_was_paused() -> None:
    """Steps written while the model was paused, some by prompt lookups: the summary counts
    the lookups' accepted tokens among the paused ones and the verdict's pause note says so
    (the walk found "drafting paused for 48 of 48 tokens" where lookups had drafted 35)."""
    from app.engine.config import AcceptRule
    from app.engine.events import StopReason
    from app.engine.exactness import judge
    from app.engine.loop.run_clock import RunClock
    from app.engine.step_record import StepRecord

    def step(n: int, *, paused: bool, proposed: int = 0, accepted: int = 0, passes: int = 0):  # noqa: ANN202
        return StepRecord(step=n, drafter="n-gram" if proposed and not passes else "draft model",
                          depth=10 + n, proposed=proposed, accepted=accepted,
                          verified=accepted + 1, emitted=accepted + 1, draft_passes=passes,
                          draft_ms=0.0, catch_up=0, catch_up_ms=0.0, verify_ms=1.0, host_ms=0.1,
                          step_ms=1.2, paused=paused)  # fmt: skip

    records = [
        step(0, paused=True),  # the target alone: 1 token
        step(1, paused=True, proposed=4, accepted=4),  # a lookup while paused: 5 tokens
        step(2, paused=True, proposed=3, accepted=1),  # 2 tokens
        step(3, paused=False, proposed=4, accepted=2, passes=4),  # the model, resumed: 3
    ]
    clock = RunClock([], mode="speculative")
    clock.prefill_done()
    summary = clock.summary(StopReason.MAX_TOKENS, "", list(range(11)), records)
    assert summary.paused_tokens == 8 and summary.paused_lookup_tokens == 5
    assert summary.paused_at_end == 0  # the model drafted again in the last step
    ended_paused = clock.summary(StopReason.MAX_TOKENS, "", list(range(8)), records[:3])
    assert ended_paused.paused_at_end == 8
    text = judge(summary, None, None, temperature=0.0, rule=AcceptRule.REJECTION).text
    assert "drafting paused for 8 of " in text
    assert "(prompt lookups still drafted 5 of them)" in text


@pytest.mark.parametrize("max_tokens", [12, 20])
def test_a_probe_due_after_the_last_step_is_not_said(tiny_pair, max_tokens: int) -> None:  # noqa: ANN001
    """Paused for 12 tokens: with 12 to write, the probe falls after the last step and no
    "resumed" is said beside "paused for 12 of 12 tokens"; with 20 it resumes in the answer."""
    from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
    from app.engine.engine import Engine
    from app.engine.events import GuardEvent, RunSummary

    target, draft = tiny_pair
    eng = Engine(
        ModelSpec(str(target), n_ctx=512, n_threads=1),
        ModelSpec(str(draft), n_ctx=512, n_threads=1),
    )
    spec = SpecConfig(ngram_first=False)  # one token a step while paused
    request = GenerationRequest(
        tuple(eng.tokenize("the code of the model")), max_tokens=max_tokens, spec=spec,
        ignore_eos=True,
    )  # fmt: skip
    try:
        list(eng.generate(request))
        for key in eng._guard_memory:
            eng._guard_memory[key] = GuardMemory(True, 12, 0, 0.9)
        events = list(eng.generate(request))
    finally:
        eng.close()
    resumed = [e for e in events if isinstance(e, GuardEvent) and not e.paused]
    summary = events[-1]
    assert isinstance(summary, RunSummary)
    if max_tokens == 12:
        assert summary.paused_tokens == summary.paused_at_end == 12 and not resumed
    else:
        assert resumed and resumed[0].step == 11  # after the 12th token, then it drafts
        assert summary.paused_tokens < summary.tokens
