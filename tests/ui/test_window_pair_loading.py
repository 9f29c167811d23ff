"""Loading and switching pairs in the window: a draft that cannot pair with the target is
refused before anything unloads, a pair that fails to load leaves the one that was loaded,
Send and the pair bar follow what is loaded, the draft source switches and switches back, and
the demo pair is named."""

from __future__ import annotations

import gc
import shutil
import weakref
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.config import DraftSource
from app.engine.events import TokenKind
from app.store.settings import Settings
from tests.cores import THREADS
from tests.ui.conftest import APP_FREEZE, ask, load
from tests.ui.dialogs import Dialogs, pick, press

FAST = Settings(max_tokens=24, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


@pytest.fixture(scope="session")
def foreign_draft(tiny_dir: Path) -> Path:
    """A loadable tiny model whose vocabulary differs from the tiny target's."""
    from app.devtools.test_models.synthetic import write_tiny_llama

    words = ("zebra", "quartz")
    return write_tiny_llama(tiny_dir / "foreign-vocab.gguf", seed=3, extra_words=words)


def test_the_file_picker_refuses_a_foreign_draft_before_anything_unloads(
    make_window, qtbot, tiny_pair, foreign_draft
) -> None:
    window = make_window(FAST)
    target, draft = tiny_pair
    loaded = load(window, qtbot, target, draft)
    engine = window.client.engine_pid
    with Dialogs(pick(target), pick(foreign_draft), press("Cancel")) as dialogs:
        window.change_pair(files=True)
    refusal = dialogs.seen[-1]
    assert refusal.startswith("These models cannot be paired"), dialogs.seen
    assert f"{foreign_draft.name} cannot draft for {target.name}" in refusal
    assert "spell token" in refusal and "stays loaded" in refusal
    assert not window.client.loading and window.loaded is loaded  # nothing was even asked
    assert window.client.engine_pid == engine
    assert window.pair_bar.draft.text() == draft.name and window.settings.draft_path == str(draft)
    assert window.chat.send.isEnabled()
    assert ask(window, qtbot, "hello the model").speculative.drafted > 0

    # "Choose another draft…" picks again at once, and a good draft loads
    answers = (pick(target), pick(foreign_draft), press("Choose another draft…"), pick(draft))
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000), Dialogs(*answers) as dialogs:
        window.change_pair(files=True)
    assert len(dialogs.seen) == 4 and "cannot be paired" in dialogs.seen[2]


def test_a_pair_that_fails_to_load_leaves_the_pair_that_was_loaded(
    make_window, qtbot, tiny_pair, foreign_draft
) -> None:
    window = make_window(FAST)
    target, draft = tiny_pair
    load(window, qtbot, target, draft)
    with (
        qtbot.waitSignal(window.failed, timeout=60_000) as failed,
        qtbot.waitSignal(window.pair_loaded, timeout=60_000) as back,
    ):  # not through the file picker: a saved pair, the Lab, a reload for new settings
        window.load_pair(str(target), str(foreign_draft), DraftSource.MODEL)
        # until a pair has loaded, the window shows the one it has
        assert window.pair_bar.draft.text() == draft.name
    assert failed.args[0].title == "Incompatible pair"
    restored = back.args[0]
    assert restored.restored and restored.pair.draft_path == str(draft)
    assert window.loaded is restored and window.settings.draft_path == str(draft)
    assert window.pair_bar.draft.text() == draft.name and window.chat.send.isEnabled()
    assert "Incompatible pair" in window.chat.error_banner.text()
    done = ask(window, qtbot, "hello the model")  # answered, not "No model pair is loaded"
    assert not done.cancelled and done.speculative.drafted > 0


def test_send_and_the_pair_bar_follow_what_is_loaded(
    make_window, qtbot, tiny_pair, tmp_path
) -> None:
    window = make_window(FAST)
    assert not window.chat.send.isEnabled() and "Demo pair" in window.chat.send.toolTip()
    with qtbot.waitSignal(window.failed, timeout=30_000):
        window.load_pair(str(tmp_path / "missing.gguf"), None, DraftSource.NGRAM)
        assert window.chat.send.isEnabled()  # while a pair loads, a message waits for it
        assert window.pair_bar.target.text() == "none loaded"
    assert window.pair_bar.target.text() == "none loaded"
    assert not window.chat.send.isEnabled() and "Change pair" in window.chat.send.toolTip()
    load(window, qtbot, *tiny_pair)
    assert window.chat.send.isEnabled() and window.chat.send.toolTip() == ""
    assert window.pair_bar.target.text() == tiny_pair[0].name


@pytest.mark.real
def test_qwen_f32_with_a_smollm2_draft_is_refused_and_the_pair_stays(
    make_window, qtbot, smollm2_pair, qwen_pair
) -> None:
    """The issue's case: Change pair → Local GGUF files… with the Qwen F32 target and the
    SmolLM2 draft, while the SmolLM2 pair is loaded."""
    window = make_window(replace(FAST, n_threads=THREADS, max_tokens=12))
    smol_target, smol_draft = smollm2_pair
    qwen_target, _ = qwen_pair
    loaded = load(window, qtbot, smol_target, smol_draft)
    with Dialogs(pick(qwen_target), pick(smol_draft), press("Cancel")) as dialogs:
        window.change_pair(files=True)
    refusal = dialogs.seen[-1]
    assert f"{smol_draft.name} cannot draft for {qwen_target.name}" in refusal, dialogs.seen
    # neither adds a BOS token, so, as in llama.cpp, their BOS ids are not compared
    assert "different vocabularies (vocabulary size: target 151936, draft 49152" in refusal
    assert window.loaded is loaded and not window.client.loading
    assert window.pair_bar.target.text() == smol_target.name
    assert window.pair_bar.draft.text() == smol_draft.name
    assert window.chat.send.isEnabled()
    assert ask(window, qtbot, "Say hello.", timeout=120_000).speculative.tokens > 0


def _pick_source(window, qtbot, source: DraftSource):  # noqa: ANN001, ANN202
    box = window.pair_bar.source
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000) as blocker:
        box.setCurrentIndex(box.findData(source.value))
    return blocker.args[0]


def test_draft_source_model_ngram_model_then_answer(make_window, qtbot, tiny_pair) -> None:
    window = make_window(replace(FAST, max_tokens=48))
    load(window, qtbot, *tiny_pair)

    ngram = _pick_source(window, qtbot, DraftSource.NGRAM)
    assert ngram.pair.draft_source is DraftSource.NGRAM and ngram.pair.draft_path is None
    assert window.pair_bar.draft.text().startswith("n-gram")
    assert not window.statusBar().currentMessage().startswith("Loading")
    assert window.settings.draft_source == "ngram"
    assert window.settings.draft_path == str(tiny_pair[1])  # kept for switching back

    model = _pick_source(window, qtbot, DraftSource.MODEL)
    assert model.pair.draft_source is DraftSource.MODEL
    assert model.pair.draft_path == str(tiny_pair[1])
    assert window.pair_bar.draft.text() == "draft.gguf"
    assert window.pair_bar.source.currentData() == DraftSource.MODEL.value

    done = ask(window, qtbot, "hello the model")
    assert done.speculative.drafted > 0  # the draft model drafts again, not n-gram or nothing
    kinds = {e.kind for e in window.chat.spec_view.events}
    assert kinds & {TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS}


def test_the_demo_pair_is_named(make_window, qtbot, tiny_pair, tmp_path, monkeypatch) -> None:
    from app.engine.llama.quantize import quantized_path
    from app.models.shipped import QWEN_CODER_05B

    cache = tmp_path / "models"
    monkeypatch.setenv("SPECDECK_MODEL_CACHE", str(cache))
    cache.mkdir()
    source = cache / QWEN_CODER_05B.filename
    target, draft = quantized_path(source, "F32"), quantized_path(source, "Q2_K")
    shutil.copy(tiny_pair[0], target)  # the demo pair's files, where the demo keeps them
    shutil.copy(tiny_pair[1], draft)
    window = make_window(FAST)
    load(window, qtbot, target, draft)
    assert window.pair_bar.pair_name.text() == "Demo pair"
    assert "Qwen2.5-Coder" in window.pair_bar.pair_name.toolTip()
    assert window.settings.pair_name == ""  # named, not a saved pair


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_cycle_alive_at_one_pair_load_is_collected_after_the_next_once_dropped(
    make_window,
    qtbot,
    tiny_pair,
    monkeypatch,  # noqa: ANN001
) -> None:
    # a pair load freezes what is alive (no collector pauses while tokens stream); a cycle
    # frozen then and dropped later (an old conversation's widgets) must not stay for good
    monkeypatch.setattr(gc, "freeze", APP_FREEZE)  # the window's own, which tests skip
    window = make_window(FAST)
    kept = [_Cycle()]
    cycle = weakref.ref(kept[0])
    try:
        load(window, qtbot, *tiny_pair)
        kept.clear()
        gc.collect()
        assert cycle() is not None  # frozen: out of the collector's reach while this pair lives
        _pick_source(window, qtbot, DraftSource.NGRAM)
        assert cycle() is None
    finally:
        gc.unfreeze()  # the window froze itself too: its cycles go with this test
