"""Continue: a conversation ending with an assistant message asks for more of that message.

The unfinished answer is rendered after the generation prompt with no end-of-turn after it
(llama.cpp's "continue final message"), so the model goes on from its own last token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.chat_template import ChatFormatter, Message, render_plain
from app.engine.config import GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary, StopReason
from tests.conftest import CHATML
from tests.cores import THREADS

QUESTION = [Message("system", "You are a helpful assistant."), Message("user", "Hi there")]


def test_an_unfinished_answer_follows_the_generation_prompt_without_end_of_turn() -> None:
    formatter = ChatFormatter(CHATML, bos_text="", eos_text="<|im_end|>")
    asked = formatter.render(QUESTION)
    assert asked.endswith("<|im_start|>assistant\n")
    continued = formatter.render([*QUESTION, Message("assistant", "Hello, how")])
    assert continued == asked + "Hello, how"  # no <|im_end|> after the unfinished answer
    # earlier answers in the history keep their end-of-turn
    history = [*QUESTION, Message("assistant", "Hello."), Message("user", "More")]
    assert "Hello.<|im_end|>" in formatter.render(history)


def test_the_plain_format_continues_the_same_way() -> None:
    formatter = ChatFormatter(None, bos_text="", eos_text="")
    continued = formatter.render([*QUESTION, Message("assistant", " Hello")])
    assert continued == render_plain(QUESTION) + " Hello"


def _run(engine: Engine, prompt: tuple[int, ...], max_tokens: int) -> RunSummary:
    request = GenerationRequest(
        prompt,
        max_tokens=max_tokens,
        sampler=SamplerConfig(temperature=0.0),
        spec=SpecConfig(draft_max=4, adaptive=False),
    )
    return [e for e in engine.generate(request) if isinstance(e, RunSummary)][-1]


@pytest.fixture(scope="module")
def smol(smollm2_pair: tuple[Path, Path]):  # noqa: ANN201
    target, draft = smollm2_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(draft), n_ctx=1024, n_threads=THREADS),
    )
    yield engine
    engine.close()


@pytest.mark.real
@pytest.mark.parametrize(
    "question", ["Write a short poem about the sea.", "List three fruits and their colours."]
)
def test_a_cut_answer_continued_is_the_uninterrupted_answer_at_temperature_0(
    smol: Engine, question: str
) -> None:
    """Real SmolLM2 (byte-level BPE, ChatML template). The cut answer's text, tokenized after
    the generation prompt, gives back its own tokens, so at T = 0 the continuation is token
    for token what one uninterrupted answer of the same total length says."""
    cut_at = 12
    asked = [Message("user", question)]
    prompt = smol.tokenize_chat(asked)
    cut = _run(smol, prompt, cut_at)
    assert cut.stop_reason is StopReason.MAX_TOKENS and cut.tokens == cut_at
    whole = _run(smol, prompt, 2 * cut_at)
    again = smol.tokenize_chat([*asked, Message("assistant", cut.text)])
    assert again == prompt + cut.token_ids  # the unfinished turn re-reads as it was written
    more = _run(smol, again, cut_at)
    assert more.text and (cut.text + more.text).startswith(cut.text)
    assert cut.token_ids + more.token_ids == whole.token_ids
    assert cut.text + more.text == whole.text


def test_continuing_on_the_tiny_pair_extends_the_prompt_with_the_cut_text(
    tiny_pair: tuple[Path, Path],
) -> None:
    """The tiny synthetic models write raw byte tokens that are often not UTF-8: their text
    (with U+FFFD in place of broken bytes) cannot give their tokens back, so here only the
    prompt's shape and a further answer are checked, not identity with one long answer."""
    target, draft = tiny_pair
    engine = Engine(ModelSpec(str(target), n_ctx=512), ModelSpec(str(draft), n_ctx=512))
    try:
        asked = [Message("user", "hello the model")]
        prompt = engine.tokenize_chat(asked)
        cut = _run(engine, prompt, 6)
        again = engine.tokenize_chat([*asked, Message("assistant", cut.text)])
        assert again[: len(prompt)] == prompt and len(again) > len(prompt)
        assert engine.render_chat([*asked, Message("assistant", cut.text)]) == (
            engine.render_chat(asked) + cut.text
        )
        more = _run(engine, again, 6)
        assert more.tokens == 6
    finally:
        engine.close()
