"""The engine drafting with a target's own next-token (MTP) layer, through the real llama.cpp
in the engine process: a tiny synthetic ``qwen35`` (hybrid recurrent + attention, so every
rejected draft rolls the recurrent state back) whose MTP block agrees with it only partly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import (
    write_tiny_llama,
    write_tiny_qwen35,
    write_tiny_step35,
)
from app.devtools.test_models.synthetic_eagle3 import write_tiny_eagle3_pair
from app.devtools.test_models.synthetic_gemma4 import write_tiny_gemma4, write_tiny_gemma4_assistant
from app.engine.config import (
    AcceptRule,
    DraftSource,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.engine.process.host import EngineCrashed, EngineHost, LoadRequest
from app.errors import ModelLoadError
from app.gguf.compat import IncompatiblePairError
from tests.processes import host_pair, host_summary

PROMPTS = (
    (1, 300, 310, 320, 330, 301),
    (1, 305, 306, 307),
    (1, 320, 321, 300, 310, 320, 2, 3, 311, 312, 313, 314),
)
ROOT = Path(__file__).resolve().parents[2]
FORCED = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False, ngram_first=False)


@pytest.fixture(scope="module")
def qwen35_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mtp") / "qwen35-mtp.gguf"
    return write_tiny_qwen35(path, branch_scale=0.3)


@pytest.fixture(scope="module")
def step35_chained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_step35(tmp_path_factory.mktemp("mtp") / "step35-3heads.gguf")


@pytest.fixture(scope="module")
def gemma4_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("assistant")
    target = write_tiny_gemma4(folder / "gemma4.gguf")
    return target, write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf", target)


@pytest.fixture(scope="module")
def eagle3_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_eagle3_pair(tmp_path_factory.mktemp("eagle3"))


@pytest.fixture
def host():
    engine_host = EngineHost()
    yield engine_host
    engine_host.close()


def _spec(path: Path) -> ModelSpec:
    return ModelSpec(str(path), n_ctx=1024, n_threads=1)


def test_greedy_mtp_output_is_the_targets_token_for_token(host, qwen35_mtp) -> None:
    info = host.load(LoadRequest(_spec(qwen35_mtp), None, DraftSource.MTP))
    assert info.draft_source is DraftSource.MTP and info.draft_path is None
    drafted = accepted = 0
    for prompt in PROMPTS:
        request = GenerationRequest(prompt, max_tokens=220, spec=FORCED, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        assert len(speculative.token_ids) == 220
        # rejections on the way: the recurrent state was rolled back many times
        assert 0 < speculative.accepted < speculative.drafted
        names = [d.name for d in speculative.per_drafter]
        assert names == ["MTP"]
        # per-position acceptance, position 1 reached by every block
        assert speculative.drafted_per_position[0] == speculative.steps
        assert len(speculative.acceptance_per_position) == 4
        drafted += speculative.drafted
        accepted += speculative.accepted
    assert drafted > 600 and accepted > 60


def test_default_settings_and_ngram_first_stay_exact(host, qwen35_mtp) -> None:
    host.load(LoadRequest(_spec(qwen35_mtp), None, DraftSource.MTP))
    for spec in (SpecConfig(), SpecConfig(draft_max=8, collapse_guard=False)):
        request = GenerationRequest(PROMPTS[0] * 3, max_tokens=200, spec=spec, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids


def test_the_second_answer_reuses_the_heads_cache_and_stays_exact(host, qwen35_mtp) -> None:
    host.load(LoadRequest(_spec(qwen35_mtp), None, DraftSource.MTP))
    first = GenerationRequest(PROMPTS[2], max_tokens=60, spec=FORCED, ignore_eos=True)
    answer = host_summary(host, first)
    # a follow-up that extends the conversation, then one that diverges early
    for prompt in (PROMPTS[2] + answer.token_ids + (2, 300, 301), PROMPTS[2][:3] + (330, 331)):
        request = GenerationRequest(prompt, max_tokens=80, spec=FORCED, ignore_eos=True)
        speculative = host_summary(host, request)
        baseline = host_summary(
            host, GenerationRequest(prompt, 80, ignore_eos=True, speculative=False)
        )
        assert speculative.token_ids == baseline.token_ids


@pytest.mark.parametrize("source", [DraftSource.MTP, DraftSource.NGRAM])
def test_a_hybrid_target_reusing_its_cache_restarts_what_it_cannot_roll_back(
    host, qwen35_mtp, source
) -> None:
    """A recurrent state rolls back only into the last decode's batch: asking the same prompt
    after a short answer (8 positions to drop, the last batch one token) must not restore a
    snapshot another batch left. Before the fix the bench's first prompt diverged at its
    second token, with a 0.6 logit margin."""
    host.load(LoadRequest(_spec(qwen35_mtp), None, source))
    for prompt in PROMPTS:
        host_summary(host, GenerationRequest(prompt, 8, spec=FORCED))  # both caches end 8 past it
        host_summary(host, GenerationRequest(prompt, 8, spec=FORCED, speculative=False))
        request = GenerationRequest(prompt, max_tokens=64, spec=FORCED, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        fresh = EngineHost()
        try:
            fresh.load(LoadRequest(_spec(qwen35_mtp), None, source))
            expected = host_summary(fresh, replace(request, speculative=False))
        finally:
            fresh.close()
        assert baseline.token_ids == expected.token_ids
        assert speculative.token_ids == expected.token_ids


def test_seeded_sampling_under_match_reproduces_target_only(host, qwen35_mtp) -> None:
    """T > 0: with position-keyed randomness, sample-and-match speculation draws the same
    token as target-only sampling at every position (the exactness rule in place)."""
    host.load(LoadRequest(_spec(qwen35_mtp), None, DraftSource.MTP))
    sampler = SamplerConfig(temperature=0.9, top_k=20, top_p=0.95, min_p=0.0, seed=7)
    spec = SpecConfig(
        draft_max=4, adaptive=False, collapse_guard=False, ngram_first=False, rule=AcceptRule.MATCH
    )
    request = GenerationRequest(PROMPTS[1], 150, sampler=sampler, spec=spec, ignore_eos=True)
    baseline, speculative = host_pair(host, request)
    assert speculative.token_ids == baseline.token_ids
    assert speculative.drafted > 0


def test_a_model_without_next_token_layers_is_refused_in_words(host, tmp_path) -> None:
    plain = write_tiny_llama(tmp_path / "plain.gguf")
    with pytest.raises(ModelLoadError, match="no next-token"):
        host.load(LoadRequest(_spec(plain), None, DraftSource.MTP))


def test_killing_the_engine_mid_mtp_answer_is_a_message(host, qwen35_mtp) -> None:
    big = ModelSpec(str(qwen35_mtp), n_ctx=8192, n_threads=1)
    host.load(LoadRequest(big, None, DraftSource.MTP))
    request = GenerationRequest(PROMPTS[0], 8000, spec=FORCED, ignore_eos=True)
    stream = host.generate(request)
    next(stream)
    host.kill()
    with pytest.raises(EngineCrashed) as crash:
        for _ in stream:
            pass
    assert crash.value.stage == "generating"
    deadline = time.monotonic() + 10
    while host.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    host.load(LoadRequest(_spec(qwen35_mtp), None, DraftSource.MTP))  # a fresh engine
    again = host_summary(host, GenerationRequest(PROMPTS[0], 20, spec=FORCED, ignore_eos=True))
    assert len(again.token_ids) == 20


def test_chained_heads_draft_one_token_each_and_stay_exact(host, step35_chained) -> None:
    """A model with three next-token blocks (step35): head k drafts the k-th token over the
    drafted prefix; a block never exceeds the number of heads, even when more is allowed."""
    info = host.load(LoadRequest(_spec(step35_chained), None, DraftSource.MTP))
    assert info.draft_source is DraftSource.MTP
    spec = SpecConfig(draft_max=8, adaptive=False, collapse_guard=False, ngram_first=False)
    for prompt in PROMPTS:
        request = GenerationRequest(prompt, max_tokens=220, spec=spec, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        assert 0 < speculative.accepted < speculative.drafted
        assert len(speculative.drafted_per_position) == 3  # three heads, three positions
        assert speculative.drafted_per_position[2] > 0


def test_a_gemma4_assistant_drafts_from_the_targets_hidden_rows(host, gemma4_pair) -> None:
    """A second file, picked as the draft, that is a Gemma 4 assistant: it keeps no cache of
    its own (it attends through the target's) and drafts every token at one position."""
    target, assistant = gemma4_pair
    info = host.load(LoadRequest(_spec(target), _spec(assistant)))
    assert info.draft_path == str(assistant)
    for prompt in PROMPTS:
        request = GenerationRequest(prompt, max_tokens=220, spec=FORCED, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        assert 0 < speculative.accepted < speculative.drafted
        assert [d.name for d in speculative.per_drafter] == ["assistant"]
        first, *_rest, last = speculative.acceptance_per_position
        assert first > last  # a later position is reached less and accepted less


def test_an_eagle3_head_drafts_from_three_target_layers(host, eagle3_pair) -> None:
    """An EAGLE-3 head picked as the draft: after every target decode the inputs of its three
    target layers go through its encoder; drafts are exact, rejections on the way."""
    target, head = eagle3_pair
    host.load(LoadRequest(_spec(target), _spec(head)))
    for prompt in PROMPTS:
        for spec in (FORCED, SpecConfig(draft_max=8, collapse_guard=False)):
            request = GenerationRequest(prompt, max_tokens=220, spec=spec, ignore_eos=True)
            baseline, speculative = host_pair(host, request)
            assert speculative.token_ids == baseline.token_ids
            if spec is FORCED:
                assert 0 < speculative.accepted < speculative.drafted
                assert [d.name for d in speculative.per_drafter] == ["EAGLE-3"]
    # the next conversation reuses the target's cache; the head's rows follow it
    again = PROMPTS[2] + (2, 300, 301)
    request = GenerationRequest(again, max_tokens=120, spec=FORCED, ignore_eos=True)
    baseline, speculative = host_pair(host, request)
    assert speculative.token_ids == baseline.token_ids


def test_a_head_for_a_deeper_target_is_refused_before_it_runs(host, eagle3_pair, tmp_path) -> None:
    """llama.cpp aborts the process when a head reads a layer the target lacks: the engine
    host refuses the pair in check-pair's words first, before the engine process sees it."""
    shallow = write_tiny_llama(tmp_path / "two-layers.gguf")  # the head reads layers 1, 2, 3
    with pytest.raises(IncompatiblePairError, match=r"reads target layers \[1, 2, 3\], but the"):
        host.load(LoadRequest(_spec(shallow), _spec(eagle3_pair[1])))


@pytest.mark.parametrize("model", ["qwen35_mtp", "step35_chained", "gemma4_pair"])
def test_llama_servers_own_mtp_gives_the_same_tokens(model, request) -> None:
    """llama.cpp's ``llama-server --spec-type draft-mtp`` (built from the vendored sources) and
    SpecDeck's engine answer with the same greedy tokens: one head, three chained, or an
    assistant. Speed is the bench's business (``python -m app.devtools.mtp_reference``), not a
    timed test's."""
    fixture = request.getfixturevalue(model)
    path, extra = (
        (fixture, [])
        if isinstance(fixture, Path)
        else (fixture[0], ["--assistant", str(fixture[1])])
    )
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.mtp_reference", str(path), *extra]
        + ["--tokens", "128", "--rounds", "1", "--draft-max", "3"],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["identical_to_server"] is True
    assert report["identical_to_target_only"] is True
    assert 0.0 < report["server_acceptance"] < 1.0
    assert 0.0 < report["specdeck_acceptance"] < 1.0
