"""The window names a head or an assistant used wrongly in ``check-pair``'s words, from the
file picker (before anything is unloaded) and from any other load (a saved pair, the Lab, a
reload), and keeps its engine process and its pair: before, an assistant for gemma4 drafting
for a llama target crashed the engine and a head as the target read "out of memory"."""

from __future__ import annotations

from pathlib import Path

from app.engine.config import DraftSource
from app.store.settings import Settings
from tests.ui.conftest import ask, load
from tests.ui.dialogs import Dialogs, pick, press

FAST = Settings(max_tokens=24, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def test_the_file_picker_names_a_misused_head_before_anything_unloads(
    make_window, qtbot, tiny_pair, misused_heads: dict[str, Path]
) -> None:
    window = make_window(FAST)
    loaded = load(window, qtbot, *tiny_pair)
    engine = window.client.engine_pid
    llama, assistant, head = (misused_heads[k] for k in ("llama", "assistant", "eagle3"))
    with Dialogs(pick(llama), pick(assistant), press("Cancel")) as dialogs:
        window.change_pair(files=True)
    refusal = dialogs.seen[-1]
    assert (
        "gemma4-assistant.gguf cannot draft for llama.gguf: an assistant for gemma4 models "
        "cannot draft for a llama model. Choose the draft made for this target."
    ) in refusal, dialogs.seen
    with Dialogs(pick(head)) as dialogs:  # as the target: refused when it is picked
        window.change_pair(files=True)
    assert dialogs.seen[-1].startswith("This model cannot be loaded: Model could not be loaded.")
    assert (
        "eagle3-head.gguf is not a target: an EAGLE-3 head drafts for another model and "
        "cannot answer by itself"
    ) in dialogs.seen[-1]
    assert not window.client.loading and window.loaded is loaded
    assert window.client.engine_pid == engine


def test_a_misused_head_loaded_otherwise_is_named_and_the_engine_keeps_running(
    make_window, qtbot, tiny_pair, misused_heads: dict[str, Path]
) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    engine = window.client.engine_pid
    cases = [
        (str(misused_heads["llama"]), str(misused_heads["assistant"]), DraftSource.MODEL),
        (str(misused_heads["assistant"]), None, DraftSource.NGRAM),
    ]
    for target, draft, source in cases:
        with (
            qtbot.waitSignal(window.failed, timeout=60_000) as failed,
            qtbot.waitSignal(window.pair_loaded, timeout=60_000) as back,
        ):
            window.load_pair(target, draft, source)
        error = failed.args[0]
        if draft is not None:
            assert error.title == "Incompatible pair"
            assert "an assistant for gemma4 models cannot draft for a llama model" in error.message
        else:
            assert error.title == "Model could not be loaded"
            assert "is not a target: an assistant draft for gemma4 drafts for" in error.message
        assert "crash" not in error.message and "out of memory" not in error.message
        assert back.args[0].restored and window.client.engine_pid == engine
    assert ask(window, qtbot, "hello the model").speculative.tokens > 0
