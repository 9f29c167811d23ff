"""Saved pairs in the pair bar (listed by name, active one shown, rename, delete) and the
wizard's choices reaching the loaded pair (context size, KV cache type, draft length)."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QMenu

from app.engine.config import DraftSource
from app.models.library import Library, Profile
from app.ui.pair_bar import PairBar
from app.ui.pair_chooser import SavedPairsDialog, choice_for_profile
from tests.ui.conftest import load


def saved_library(tmp_path: Path, tiny_pair: tuple[Path, Path]) -> Library:
    target, draft = (shutil.copy(p, tmp_path / p.name) for p in tiny_pair)
    library = Library()
    t, d = library.import_gguf(Path(target)), library.import_gguf(Path(draft))
    library.save_profile(
        Profile("Coding pair", t.id, d.id, n_ctx=1024, kv_type="f32", draft_max=4),
        make_active=False,
    )
    library.save_profile(Profile("Chat pair", t.id, None, n_ctx=768), make_active=True)
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
    bar.fill_menu()
    texts = menu_texts(bar.menu)
    assert texts[:2] == ["Chat pair", "Coding pair"]
    checked = [a.text() for a in bar.menu.actions() if a.isChecked()]
    assert checked == ["Chat pair"]
    with qtbot.waitSignal(bar.saved_pair_requested) as chosen:
        next(a for a in bar.menu.actions() if a.text() == "Coding pair").trigger()
    assert chosen.args == ["Coding pair"]

    # The active pair's name is shown when its target is the loaded model.
    target = library.models[library.profiles["Chat pair"].target].path
    bar.show_pair(target, None, DraftSource.NGRAM)
    assert bar.pair_name.text() == "Chat pair"

    dialog = SavedPairsDialog(Library(), bar)
    qtbot.addWidget(dialog)
    assert dialog.list.count() == 2 and "(active)" in dialog.list.item(0).text()
    assert not dialog.rename("Chat pair", "Coding pair")  # taken: said, nothing lost
    assert "already a pair named" in dialog.message.text()
    assert dialog.rename("Chat pair", "Evening chat")
    dialog.delete("Coding pair")
    reloaded = Library()
    assert sorted(reloaded.profiles) == ["Evening chat"] and reloaded.active == "Evening chat"
    bar.fill_menu()
    assert menu_texts(bar.menu)[0] == "Evening chat"
    bar.show_pair(target, None, DraftSource.NGRAM)
    assert bar.pair_name.text() == "Evening chat"


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
        lambda: bool(errors) or window.loaded is not None and window.loaded.n_ctx == 1024,
        timeout=60_000,
    )
    assert not errors, errors
    assert window.loaded.n_ctx == 1024  # the models were loaded with the pair's context
    assert window.settings.n_ctx == 1024 and window.settings.draft_max == 4
    assert window.pair_kv_type == "f32"
    assert window.pair_bar.pair_name.text() == "Coding pair"
    assert Library().active == "Coding pair"
    window.close()
    # A restart reloads the pair with all its settings, the KV cache type included.
    again = make_window()
    assert again.pair_kv_type == "f32" and again.settings.n_ctx == 1024
    qtbot.waitUntil(lambda: again.loaded is not None, timeout=60_000)


def test_demo_tooltip_names_the_pair_it_loads(qtbot, isolated: Path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from app.models.gguf_header import model_facts, read_local_header
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
