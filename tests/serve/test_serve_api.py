"""``python -m app serve`` through the official ``openai`` client: the real server process,
the real engine process and a tiny real pair."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.serve.conftest import ROOT, ServeProcess, app_env

pytestmark = pytest.mark.timeout(300)

ASK = [{"role": "user", "content": "the code of the model"}]


def _streamed(client, **kwargs) -> tuple[str, list]:
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def _clean_piece(text: str, length: int) -> str:
    """A stop string from the middle of ``text``: ``length`` plain characters whose first
    occurrence is past the start."""
    for start in range(len(text) // 3, len(text) - length):
        piece = text[start : start + length]
        if piece.isascii() and piece.isprintable() and text.find(piece) == start:
            return piece
    raise AssertionError(f"no plain piece in {text!r}")


def test_models_lists_the_loaded_pair(tiny_server: ServeProcess, chat_pair) -> None:
    models = tiny_server.client().models.list().data
    assert [m.id for m in models] == [chat_pair[0].name]
    meta = models[0].model_extra["meta"]
    assert meta["draft"] == chat_pair[1].name and meta["draft_source"] == "model"


def test_non_streamed_and_streamed_answers_agree_with_timings(tiny_server: ServeProcess) -> None:
    client = tiny_server.client()
    whole = client.chat.completions.create(model="any", messages=ASK, temperature=0, max_tokens=40)
    text = whole.choices[0].message.content
    assert whole.object == "chat.completion" and whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason == "length"  # the server ignores end-of-generation
    assert whole.usage.completion_tokens == 40 and whole.usage.prompt_tokens > 5
    timings = whole.model_extra["timings"]
    assert timings["predicted_n"] == 40
    assert timings["prompt_n"] + timings["cache_n"] == whole.usage.prompt_tokens
    assert timings["predicted_per_second"] > 0 and timings["predicted_ms"] > 0
    assert 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
    if timings["draft_n"]:
        assert timings["acceptance"] == pytest.approx(
            timings["draft_n_accepted"] / timings["draft_n"]
        )
    assert timings["tokens_per_pass"] > 0

    streamed, chunks = _streamed(
        client,
        model="any",
        messages=ASK,
        temperature=0,
        max_tokens=40,
        stream_options={"include_usage": True},
    )
    assert streamed == text and len(text) > 10
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["length"]
    assert finals[0].model_extra["timings"]["predicted_n"] == 40
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 40


def test_stop_strings_cut_exactly_streamed_or_not(tiny_server: ServeProcess) -> None:
    client = tiny_server.client()
    full = (
        client.chat.completions.create(model="any", messages=ASK, temperature=0, max_tokens=48)
        .choices[0]
        .message.content
    )
    stop = _clean_piece(full, 3)
    expected = full[: full.index(stop)]
    for stops in (stop, [stop, "never-in-it-\u00e9"]):
        whole = client.chat.completions.create(
            model="any", messages=ASK, temperature=0, max_tokens=48, stop=stops
        )
        assert whole.choices[0].message.content == expected
        assert whole.choices[0].finish_reason == "stop"
        streamed, chunks = _streamed(
            client, model="any", messages=ASK, temperature=0, max_tokens=48, stop=stops
        )
        # a held-back prefix of the stop string would show here as extra text
        assert streamed == expected
        assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [
            "stop"
        ]
    # a stop string whose start occurs but never its end: the held-back text comes out whole
    tease = stop + "\u2603 never follows"
    streamed, _ = _streamed(
        client, model="any", messages=ASK, temperature=0, max_tokens=48, stop=[tease]
    )
    assert streamed == full
    completion = (
        client.completions.create(
            model="any", prompt="the code of the model", temperature=0, max_tokens=48
        )
        .choices[0]
        .text
    )
    stop = _clean_piece(completion, 2)
    cut = client.completions.create(
        model="any", prompt="the code of the model", temperature=0, max_tokens=48, stop=[stop]
    )
    assert cut.choices[0].text == completion[: completion.index(stop)]
    assert cut.object == "text_completion" and cut.choices[0].finish_reason == "stop"


def test_seeded_sampling_is_reproducible(tiny_server: ServeProcess) -> None:
    client = tiny_server.client()
    settings = dict(
        model="any",
        messages=ASK,
        temperature=0.9,
        top_p=1.0,
        extra_body={"top_k": 0, "min_p": 0.0},  # llama-server's fields, beyond OpenAI's
    )

    def answer(seed: int) -> str:
        return (
            client.chat.completions.create(seed=seed, max_tokens=40, **settings)
            .choices[0]
            .message.content
        )

    first = answer(1234)
    assert answer(1234) == first
    assert _streamed(client, seed=1234, max_tokens=40, **settings)[0] == first
    others = {answer(seed) for seed in (1, 2, 3)}
    assert others != {first} and len(others | {first}) > 1
    greedy = (
        client.chat.completions.create(model="any", messages=ASK, temperature=0, max_tokens=40)
        .choices[0]
        .message.content
    )
    assert first != greedy


def test_completions_stream_and_whole_agree(tiny_server: ServeProcess) -> None:
    client = tiny_server.client()
    whole = client.completions.create(model="any", prompt="data token draft", max_tokens=30)
    chunks = list(
        client.completions.create(
            model="any", prompt="data token draft", max_tokens=30, stream=True
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert whole.usage.completion_tokens == 30
    assert chunks[-1].model_extra["timings"]["predicted_n"] == 30


def test_greedy_answer_equals_the_generate_command(tiny_server: ServeProcess, chat_pair) -> None:
    prompt = "what is the draft model for"
    target, draft = chat_pair
    direct = subprocess.run(
        [sys.executable, "-m", "app", "generate", "--target", str(target), "--draft", str(draft)]
        + ["--threads", "1", "--ignore-eos", "--max-tokens", "40", "--no-colour", prompt],
        cwd=ROOT,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert direct.returncode == 0, direct.stderr
    assert re.search(r"\[speculative\] 40 tokens", direct.stderr)
    served = tiny_server.client().chat.completions.create(
        model="any", messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=40
    )
    assert served.choices[0].message.content == direct.stdout.removesuffix("\n")
