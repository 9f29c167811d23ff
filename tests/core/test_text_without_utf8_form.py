"""Text with no UTF-8 form (a lone surrogate, from a JSON escape in a stored conversation, a
prompt file or a request, or a paste of broken UTF-16) is tokenized and written with the
replacement character in its place, and an
error whose words live in fields of its own still says them when it crosses from the engine
process."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.config import ModelSpec
from app.engine.llama.backend import LlamaModel, utf8
from app.engine.process.protocol import portable_failure, rebuild_error
from app.errors import SpecDeckError
from app.files.fileio import atomic_write_text, read_text_bounded
from app.store.unsent import UnsentMessage

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    assert utf8("hi\ud800!") == "hi\ufffd!".encode()
    assert utf8("\ud83d\ude00") == "\U0001f600".encode()  # a pair is the character it spells
    assert utf8("plain") == b"plain"


def test_a_stored_file_is_written_with_the_replacement_character(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "note.txt", "a\udfff b")
    assert (tmp_path / "note.txt").read_bytes() == "a\ufffd b".encode()


def test_an_unsent_message_with_a_lone_surrogate_is_kept_for_the_next_start(
    tmp_path: Path,
) -> None:
    unsent = UnsentMessage(tmp_path)
    assert unsent.keep("draft \ud800 of a question") == ""
    assert unsent.read() == ("draft \ufffd of a question", [])
    assert read_text_bounded(unsent.path, 1 << 10, what="unsent message").startswith("draft")


def test_the_tokenizer_takes_a_lone_surrogate(tmp_path: Path) -> None:
    model = LlamaModel(ModelSpec(str(write_tiny_llama(tmp_path / "tiny.gguf")), n_ctx=128))
    try:
        replaced = model.tokenize("hi\ufffd!", add_special=False)
        assert model.tokenize("hi\ud800!", add_special=False) == replaced
    finally:
        model.close()


def test_an_error_that_keeps_its_words_in_fields_still_says_them() -> None:
    try:
        "a\ud800".encode("utf-8")
    except UnicodeEncodeError as error:
        rebuilt = rebuild_error(portable_failure(error))
    assert str(rebuilt)
    assert "surrogates not allowed" in str(rebuilt)
    assert isinstance(rebuilt, SpecDeckError)
    assert str(rebuilt).startswith("UnicodeEncodeError: ")


def test_an_ordinary_error_comes_back_as_its_own_class() -> None:
    try:
        raise ValueError("the reason")
    except ValueError as error:
        rebuilt = rebuild_error(portable_failure(error))
    assert type(rebuilt) is ValueError and str(rebuilt) == "the reason"
