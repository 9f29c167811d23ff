"""Saved pairs in the pair bar (listed by name, active one shown, rename, delete) and the
wizard's choices reaching the loaded pair (context size, KV cache type, draft length)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from PySide6.QtWidgets import QApplication, QMenu

from app.engine.config import DraftSource
from app.models.library import Library, Profile
from app.ui.pair_bar import PairBar
from app.ui.pair_chooser import PairChoice, SavedPairsDialog, choice_for_profile
from tests.ui.conftest import load


def saved_library(tmp_path: Path, tiny_pair: tuple[Path, Path]) -> Library:
    target, draft = (shutil.copy(p, tmp_path / p.name) for p in tiny_pair)
    library = Library()
    t, d = library.import_gguf(Path(target)), library.import_gguf(Path(draft))
    library.save_profile(Profile("Coding pair", t.id, d.id, n_ctx=1024, kv_type="f32", draft_max=4))
    library.save_profile(Profile("Chat pair", t.id, None, n_ctx=768))
    return library


def menu_texts(menu: QMenu) -> list[str]:
    return [a.text() for a in menu.actions() if a.text() and not a.isSeparator()]


def test_change_pair_menu_lists_saved_pairs(
    qtbot,
    isolated: Path,  # type: ignore[no-untyped-def]
    tiny_pair: tuple[Path, Path],
) -> None:
    library = saved_library(isolated, tiny_pair)
    bar = PairBar()
    qtbot.addWidget(bar)
    # The current pair's name is shown when its target is the loaded model (both saved pairs
    # share that target: the name says which one is current).
    target = library.models[library.profiles["Chat pair"].target].path
    bar.show_pair(target, None, DraftSource.NGRAM, "Chat pair")
    assert bar.pair_name.text() == "Chat pair"
    bar.fill_menu()
    texts = menu_texts(bar.menu)
    assert texts[:2] == ["Chat pair", "Coding pair"]
    checked = [a.text() for a in bar.menu.actions() if a.isChecked()]
    assert checked == ["Chat pair"]
    with qtbot.waitSignal(bar.saved_pair_requested) as chosen:
        next(a for a in bar.menu.actions() if a.text() == "Coding pair").trigger()
    assert chosen.args == ["Coding pair"]

    dialog = SavedPairsDialog(Library(), bar, bar.current_name)
    qtbot.addWidget(dialog)
    assert dialog.list.count() == 2 and "(active)" in dialog.list.item(0).text()
    assert not dialog.rename("Chat pair", "Coding pair")  # taken: said, nothing lost
    assert "already a pair named" in dialog.message.text()
    assert dialog.rename("Chat pair", "Evening chat")
    dialog.delete("Coding pair")
    reloaded = Library()
    assert sorted(reloaded.profiles) == ["Evening chat"] and dialog.current == "Evening chat"
    with qtbot.waitSignal(bar.current_renamed) as renamed:
        bar.follow_saved_pairs(dialog.current)
    assert renamed.args == ["Evening chat"]
    bar.fill_menu()
    assert menu_texts(bar.menu)[0] == "Evening chat"
    assert bar.pair_name.text() == "Evening chat"
    assert [a.text() for a in bar.menu.actions() if a.isChecked()] == ["Evening chat"]


def test_saved_pair_loads_with_its_settings(
    make_window,
    qtbot,
    isolated: Path,  # type: ignore[no-untyped-def]
    tiny_pair: tuple[Path, Path],
) -> None:
    library = saved_library(isolated, tiny_pair)
    window = make_window()
    coding = library.profiles["Coding pair"]
    assert coding.draft is not None
    target, draft = library.models[coding.target].path, library.models[coding.draft].path
    load(window, qtbot, Path(target), Path(draft))  # a pair of plain files, default settings
    assert window.settings.n_ctx == 4096 and window.settings.draft_max == 16
    choice = choice_for_profile(Library(), "Coding pair")
    assert choice.settings is not None and choice.settings.kv_type == "f32"
    errors: list[object] = []
    window.failed.connect(errors.append)
    window.apply_pair_choice(choice)
    qtbot.waitUntil(
        lambda: bool(errors) or window.loaded is not None and window.loaded.pair.n_ctx == 1024,
        timeout=60_000,
    )
    assert not errors, errors
    assert window.loaded.pair.n_ctx == 1024  # the models were loaded with the pair's context
    assert window.settings.n_ctx == 1024 and window.settings.draft_max == 4
    assert window.pair_kv_type == "f32"
    assert window.pair_bar.pair_name.text() == "Coding pair"
    assert window.settings.pair_name == "Coding pair"  # the one place the current pair lives
    window.close()
    # A restart reloads the pair with all its settings, the KV cache type included.
    again = make_window()
    assert again.pair_kv_type == "f32" and again.settings.n_ctx == 1024
    qtbot.waitUntil(lambda: again.loaded is not None, timeout=60_000)
    assert again.pair_bar.pair_name.text() == "Coding pair"


def test_demo_tooltip_names_the_pair_it_loads(qtbot, isolated: Path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from app.gguf.facts import model_facts
    from app.gguf.reader import read_local_header
    from app.models.shipped import ModelUnavailableError, demo_pair

    try:
        target, draft = demo_pair()
    except ModelUnavailableError as exc:
        pytest.skip(f"demo pair not available: {exc}")
    bar = PairBar()
    qtbot.addWidget(bar)
    tip = bar.demo.toolTip()
    facts = [model_facts(read_local_header(p)) for p in (target, draft)]
    assert "Qwen2.5-Coder-0.5B" in tip and facts[0].name.startswith("Qwen2.5 Coder 0.5B")
    assert f"{facts[0].quantization} target" in tip
    assert f"own {facts[1].quantization} quantization" in tip
    assert "SmolLM2" not in tip


def write_version_1_files(library: Library, active: str, target: str, draft: str) -> None:
    """settings.json and library.json as version 1 wrote them: the current pair's files in
    the settings, the active pair's name in the library."""
    from dataclasses import asdict

    from app.store.settings import Settings, SettingsStore

    written = json.loads(library.file.read_text())
    written.update(version=1, active=active)
    library.file.write_text(json.dumps(written, indent=2))
    document = {k: v for k, v in asdict(Settings()).items() if k != "pair_name"}
    document.update(version=1, target_path=target, draft_path=draft, draft_source="model")
    store = SettingsStore()
    store.path.write_text(json.dumps(document, indent=2, sort_keys=True))


def test_version_1_files_load_with_the_same_current_pair(
    make_window,
    qtbot,
    isolated: Path,  # type: ignore[no-untyped-def]
    tiny_pair: tuple[Path, Path],
) -> None:
    library = saved_library(isolated, tiny_pair)
    coding = library.profiles["Coding pair"]
    assert coding.draft is not None
    target, draft = library.models[coding.target].path, library.models[coding.draft].path
    write_version_1_files(library, "Coding pair", target, draft)
    window = make_window()
    assert window.settings.pair_name == "Coding pair" and window.pair_kv_type == "f32"
    qtbot.waitUntil(lambda: window.loaded is not None, timeout=60_000)
    assert window.loaded.pair.target_path == target and window.loaded.pair.draft_path == draft
    assert window.pair_bar.pair_name.text() == "Coding pair"
    window.pair_bar.fill_menu()
    assert [a.text() for a in window.pair_bar.menu.actions() if a.isChecked()] == ["Coding pair"]
    window.settings_panel.update_settings(temperature=0.5)  # the next save writes version 2
    stored = json.loads((isolated / "config" / "settings.json").read_text())
    assert stored["version"] == 2 and stored["pair_name"] == "Coding pair"


def test_switching_renaming_and_deleting_the_current_pair(
    make_window,
    qtbot,
    isolated: Path,  # type: ignore[no-untyped-def]
    tiny_pair: tuple[Path, Path],
) -> None:
    from PySide6.QtCore import QTimer

    from app.store.settings import SettingsStore

    saved_library(isolated, tiny_pair)
    window = make_window()
    bar = window.pair_bar
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):
        window.change_pair(saved="Chat pair")  # what the Change pair menu does
    assert window.settings.pair_name == "Chat pair" == bar.pair_name.text()
    assert SettingsStore().load().pair_name == "Chat pair"
    assert "active" not in json.loads(Library().file.read_text())  # only the settings say it

    def in_dialog(act) -> None:  # noqa: ANN001
        def run() -> None:
            dialog = next(
                w for w in QApplication.topLevelWidgets() if w.isModal() and w.isVisible()
            )
            try:  # a failed check must still close the modal dialog, or the test hangs
                assert isinstance(dialog, SavedPairsDialog)
                act(dialog)
            finally:
                dialog.accept()

        QTimer.singleShot(0, run)
        bar.manage_pairs()

    in_dialog(lambda d: d.rename("Chat pair", "Evening chat"))
    assert window.settings.pair_name == "Evening chat" == bar.pair_name.text()
    assert SettingsStore().load().pair_name == "Evening chat"
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):  # a reload keeps the name
        window.settings_panel.update_settings(n_ctx=640)
    assert bar.pair_name.text() == "Evening chat"
    in_dialog(lambda d: d.rename("Coding pair", "Code"))  # not the current pair: nothing moves
    assert window.settings.pair_name == "Evening chat"
    in_dialog(lambda d: d.delete("Evening chat"))
    assert window.settings.pair_name == "" and bar.pair_name.text() == "—"
    assert SettingsStore().load().pair_name == ""
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):
        window.change_pair(saved="Code")
    assert window.settings.pair_name == "Code" and window.pair_kv_type == "f32"
    # A pair of plain files is no saved pair, even with a saved pair's target.
    target, draft = window.settings.target_path, window.settings.draft_path
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):
        window.apply_pair_choice(PairChoice(target, draft, DraftSource.MODEL))
    assert window.settings.pair_name == "" and bar.pair_name.text() == "—"
