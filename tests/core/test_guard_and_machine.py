"""Issue 20, with real models: the collapse guard on a fresh engine's first answer, and two
runs timed on machines that were not the same (another process busy on the cores).

Timings here come from a shared machine, so the assertions are about what the fixes
guarantee whatever the load: the cost lines never price a pass absurdly, the guard never
claims a cheap draft can never pay, and a run starved by busy processes is told apart.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from app.engine.chat_template import Message
from app.engine.config import AcceptRule, GenerationRequest, ModelSpec
from app.engine.engine import Engine
from app.engine.events import GuardEvent, RunSummary, drain
from app.engine.exactness import judge
from app.models.guard_words import message
from tests.cores import THREADS

PALINDROME = "Write a Python function that checks whether a string is a palindrome, with tests"

pytestmark = pytest.mark.real


def _cited(message: str) -> tuple[list[float], list[float]]:
    """(speeds cited as "N×", cost shares cited as "N % of a target pass")."""
    speeds = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)×", message)]
    shares = [float(x) for x in re.findall(r"(\d+) % of a target pass", message)]
    return speeds, shares


CALM = 0.7  # a run whose threads got this share of their CPU time or more had the machine


def test_a_fresh_engines_first_answer_is_not_paused_by_warm_up(qwen_pair) -> None:  # noqa: ANN001
    """The demo pair on a fresh load: "Drafting paused at step 1: a draft pass costs
    2693993 % of a target pass" on 3 of 4 loads, on a quiet machine. A single pass of each
    model is priced at load, so the first answer's cost lines never extrapolate one; the
    guard's figures stay bounded; and on a run that had the machine (its own CPU share says
    so) the Q2_K draft, a fraction of its F32 target's price, is never judged unable to pay.
    """
    target, draft = qwen_pair
    calm = 0
    for load in range(3):
        engine = Engine(
            ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
            ModelSpec(str(draft), n_ctx=1024, n_threads=THREADS),
        )
        try:
            costs = engine.costs
            priced_at_load = costs.verify_ms(1, 0) is not None and costs.draft_ms(1, 0) is not None
            prompt = engine.tokenize_chat([Message("user", PALINDROME)])
            events = list(engine.generate(GenerationRequest(prompt, max_tokens=32)))
            summary = events[-1]
            assert isinstance(summary, RunSummary) and summary.cpu_share is not None
            pauses = [e for e in events if isinstance(e, GuardEvent) and e.paused]
            for pause in pauses:
                # the Q2_K draft is far cheaper than its F32 target; even timings distorted
                # by a busy machine put it nowhere near ten target passes
                fraction = pause.draft_cost_fraction
                words = message(pause, None)
                assert fraction is not None and fraction < 10.0, words
                speeds, shares = _cited(words)
                assert all(speed < 1.0 for speed in speeds), words
                assert all(share <= 1000 for share in shares), words
            assert priced_at_load
            print(f"load {load}: CPU share {summary.cpu_share:.2f}, {len(pauses)} pause(s)")
            if summary.cpu_share < CALM:
                continue  # another process had the cores: its timings say nothing of the pair
            calm += 1
            assert not [message(p, None) for p in pauses if p.never_pays], f"load {load}"
            ended = len(prompt) + summary.tokens  # the depth of the answer's last steps
            single, draft_pass = costs.verify_ms(1, ended), costs.draft_ms(1, ended)
            assert single is not None and draft_pass is not None and draft_pass < single
            assert costs.can_ever_pay(16, ended)
        finally:
            engine.close()
    print(f"{calm} of 3 fresh loads had the machine")


@contextmanager
def busy_cores(per_core: int = 2) -> Iterator[list[psutil.Process]]:
    """Busy-loop child processes pinned on the cores this process may use."""
    cores = sorted(os.sched_getaffinity(0))
    children = []
    try:
        for _ in range(per_core * len(cores)):
            child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            process = psutil.Process(child.pid)
            process.cpu_affinity(cores)
            children.append((child, process))
        yield [process for _, process in children]
    finally:
        for child, _ in children:
            child.kill()
            child.wait(timeout=10)


def test_background_load_during_the_baseline_is_detected_and_flagged(smollm2_pair) -> None:  # noqa: ANN001
    """With another process on a core, the window showed and stored "0.05× — 95 % slower"
    (2.1 vs 41.8 tok/s). The runs' own measures tell the starved run apart, and the verdict
    then compares no speeds."""
    from app.store.settings import Settings
    from app.workers.chat_session import ChatSession
    from app.workers.messages import JobDone

    target, draft = smollm2_pair
    # one thread: two would spin at llama.cpp's barriers against the busy children and take
    # ten times as long to show the same starvation
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=1),
        ModelSpec(str(draft), n_ctx=1024, n_threads=1),
    )
    try:
        prompt = engine.tokenize_chat([Message("user", PALINDROME)])
        request = GenerationRequest(prompt, max_tokens=24, ignore_eos=True)
        spec = drain(engine.generate(request))
        with busy_cores() as children:
            base = drain(engine.generate(replace(request, speculative=False)))
            busy_cpu = sum(sum(child.cpu_times()[:2]) for child in children)
        assert busy_cpu > 0.2, "the busy children never ran"
        assert spec.cpu_share is not None and base.cpu_share is not None
        assert spec.outside_cores is not None and base.outside_cores is not None
        assert base.cpu_share * 1.3 <= spec.cpu_share, (spec.cpu_share, base.cpu_share)
        assert base.outside_cores > spec.outside_cores
        verdict = judge(spec, base, None, temperature=0.0, rule=AcceptRule.REJECTION)
        assert verdict.uneven_machine
        assert verdict.text.startswith("speeds not comparable"), verdict.text
        assert "the target-only run got less of the CPU" in verdict.text
        assert "×" not in verdict.text

        session = ChatSession()
        session.add_user(PALINDROME)
        session.start(Settings())
        session.judge(verdict)
        message = session.finish(JobDone(1, False, spec, base, len(prompt)), [], None)
        assert message is not None and message.stats["uneven_machine"] is True
    finally:
        engine.close()


def test_the_verdict_counts_the_tokens_written_while_drafting_was_paused(
    smollm2_pair: tuple[Path, Path],
) -> None:
    """A draft as dear as its target (the SmolLM2 F16 target drafting for itself) is paused;
    the summary counts the tokens the target then wrote alone, and the verdict says so."""
    target, _ = smollm2_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
    )
    try:
        prompt = engine.tokenize_chat([Message("user", "Explain why the sky is blue.")])
        events = list(engine.generate(GenerationRequest(prompt, max_tokens=96, ignore_eos=True)))
        summary = events[-1]
        assert isinstance(summary, RunSummary)
        pauses = [e for e in events if isinstance(e, GuardEvent) and e.paused]
        pauses = [e for e in pauses if not e.probe_skipped]  # a skipped probe is no new pause
        assert pauses and summary.guard_pauses == len(pauses)
        first_pause = events.index(pauses[0])
        resumes = [e for e in events[first_pause:] if isinstance(e, GuardEvent) and not e.paused]
        assert 0 < summary.paused_tokens <= summary.tokens
        if not resumes:  # paused to the end: every token after the pause was the target's
            after = [e for e in events[first_pause:] if hasattr(e, "kind")]
            assert summary.paused_tokens == len(after)
        text = judge(summary, None, None, temperature=0.0, rule=AcceptRule.REJECTION).text
        assert f"drafting paused for {summary.paused_tokens} of {summary.tokens} tokens" in text
    finally:
        engine.close()


def test_the_verdict_says_when_other_programs_kept_the_machine_busy(
    tiny_pair: tuple[Path, Path],
) -> None:
    """A run's outside cores are said beside its verdict from half a core up, and not twice
    where the speeds are not comparable anyway (that text names them already)."""
    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=256, n_threads=1),
        ModelSpec(str(draft), n_ctx=256, n_threads=1),
    )
    try:
        prompt = engine.tokenize("the code of the model")
        spec = drain(engine.generate(GenerationRequest(prompt, max_tokens=16)))
        base = drain(engine.generate(GenerationRequest(prompt, max_tokens=16, speculative=False)))
    finally:
        engine.close()

    def verdict(outside: float, base_share: float = 1.0) -> str:
        busy = replace(spec, outside_cores=outside, cpu_share=1.0)
        even = replace(base, outside_cores=outside, cpu_share=base_share)
        return judge(busy, even, None, temperature=0.0, rule=AcceptRule.REJECTION).text

    assert "ran while other programs kept 1.2 cores busy" in verdict(1.2)
    assert "thread" not in verdict(1.2)  # the passes kept the load's threads
    fewer = replace(spec, outside_cores=1.2, cpu_share=1.0, fewest_threads=1)
    even = replace(base, outside_cores=1.2, cpu_share=1.0)
    words = judge(fewer, even, None, temperature=0.0, rule=AcceptRule.REJECTION).text
    assert "kept 1.2 cores busy, its passes on as few as 1 thread" in words
    assert "other programs" not in verdict(0.2)
    uneven = verdict(1.2, base_share=0.5)
    assert uneven.startswith("speeds not comparable") and uneven.count("other processes") == 1
    assert "ran while other programs" not in uneven


def test_a_draft_priced_while_other_programs_kept_the_cores_busy_stays_marked_so(
    smollm2_pair: tuple[Path, Path],
) -> None:
    """An answer that paid draft passes while busy children kept the cores leaves the draft's
    price marked as taken on a busy machine; a target-only answer after it prices no draft
    pass and leaves the mark (a paused draft is not priced again until it drafts)."""
    from app.engine.config import SpecConfig

    target, draft = smollm2_pair
    engine = Engine(  # one thread: two spin at llama.cpp's barriers against the busy children
        ModelSpec(str(target), n_ctx=1024, n_threads=1),
        ModelSpec(str(draft), n_ctx=1024, n_threads=1),
    )
    try:
        prompt = engine.tokenize_chat([Message("user", PALINDROME)])
        request = GenerationRequest(
            prompt, max_tokens=24, ignore_eos=True, spec=SpecConfig(ngram_first=False)
        )
        assert not engine.draft_priced_busy
        with busy_cores():
            spec = drain(engine.generate(request))
        assert spec.draft_passes > 0
        assert spec.outside_cores is not None and spec.outside_cores >= 0.5
        assert engine.draft_priced_busy
        drain(engine.generate(replace(request, speculative=False)))
        assert engine.draft_priced_busy
    finally:
        engine.close()
