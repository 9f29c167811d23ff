"""The MTP draft source in the window: the pair bar offers it only for a target with
next-token layers (and says why not), a saved "mtp" round-trips, and a stored "mtp" for a
target without heads falls back to n-gram drafting with a message, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QApplication

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.engine.config import DraftSource
from app.models.library import Library, Profile
from app.store.settings import Settings, SettingsStore
from app.ui.pair_bar import PairBar
from app.ui.pair_chooser import SavedPairsDialog, choice_for_profile

FAST = Settings(max_tokens=16, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def shoot(widget: object, name: str) -> None:
    folder = os.environ.get("SPECDECK_SCREENSHOTS")
    if folder:
        QApplication.processEvents()  # the layout follows the new texts first
        Path(folder).mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(Path(folder) / f"{name}.png"))  # type: ignore[attr-defined]


def mtp_item(bar: PairBar):  # noqa: ANN201
    model = bar.source.model()
    assert isinstance(model, QStandardItemModel)
    return model.item(bar.source.findData(DraftSource.MTP.value))


def test_pair_bar_offers_mtp_only_for_a_target_with_heads(
    qtbot,  # type: ignore[no-untyped-def]
    isolated: Path,
    tiny_pair: tuple[Path, Path],
) -> None:
    mtp = write_tiny_qwen35(isolated / "self-drafting.gguf")
    bar = PairBar()
    qtbot.addWidget(bar)
    bar.resize(1100, 40)
    bar.show()
    bar.show_pair(str(mtp), None, DraftSource.MTP)
    assert mtp_item(bar).isEnabled()
    assert bar.source.currentData() == DraftSource.MTP.value
    assert bar.source.currentText() == "MTP (the target's own heads)"
    assert bar.draft.text() == "MTP, 1 head"
    shoot(bar, "pair_bar_mtp")

    bar.show_pair(str(tiny_pair[0]), str(tiny_pair[1]), DraftSource.MODEL)
    assert not mtp_item(bar).isEnabled()
    assert "target.gguf has no next-token (MTP) layers (plain model)" in mtp_item(bar).toolTip()
    assert "cannot draft for itself" in bar.source.toolTip()
    assert bar.source.currentData() == DraftSource.MODEL.value
    bar.source.showPopup()
    shoot(bar.source.view().window(), "pair_bar_mtp_disabled_popup")
    bar.source.hidePopup()

    bar.show_pair(None, None, DraftSource.MODEL)
    assert not mtp_item(bar).isEnabled() and "No target is loaded" in mtp_item(bar).toolTip()


def test_a_saved_mtp_pair_round_trips(
    qtbot,  # type: ignore[no-untyped-def]
    isolated: Path,
) -> None:
    mtp = write_tiny_qwen35(isolated / "self-drafting.gguf")
    library = Library()
    model = library.import_gguf(mtp)
    assert model.drafting == "MTP, 1 head"
    library.save_profile(Profile("Heads", model.id, None, draft_source="mtp"))
    again = Library()
    assert again.profiles["Heads"].source is DraftSource.MTP
    choice = choice_for_profile(again, "Heads")
    assert (choice.target_path, choice.draft_path, choice.draft_source) == (
        str(mtp),
        None,
        DraftSource.MTP,
    )
    dialog = SavedPairsDialog(again)
    qtbot.addWidget(dialog)
    assert dialog.list.item(0).text() == "Heads · drafts with its own heads (MTP, 1 head)"
    SettingsStore().save(Settings(target_path=str(mtp), draft_source="mtp"))
    assert SettingsStore().load().draft_source == "mtp"


def test_a_stored_mtp_for_a_target_without_heads_falls_back_to_ngram(
    make_window,  # type: ignore[no-untyped-def]
    qtbot,
    tiny_pair: tuple[Path, Path],
) -> None:
    from dataclasses import replace

    settings = replace(FAST, target_path=str(tiny_pair[0]), draft_source="mtp")
    window = make_window(settings)
    qtbot.waitUntil(lambda: window.loaded is not None, timeout=60_000)
    assert window.loaded.pair.draft_source is DraftSource.NGRAM
    notes = window.chat.notes_banner.text()
    assert "Drafting with n-gram lookup instead:" in notes
    assert "target.gguf has no next-token (MTP) layers" in notes
    assert window.settings.draft_source == "ngram"
    # choosing MTP in the pair bar anyway (its item is off; a keyboard or a script may still
    # pick it) says why and keeps the pair loaded as it is
    box = window.pair_bar.source
    box.setCurrentIndex(box.findData(DraftSource.MTP.value))
    assert "cannot draft for itself" in window.chat.error_banner.text()
    assert box.currentData() == DraftSource.NGRAM.value
    assert window.loaded.pair.draft_source is DraftSource.NGRAM
    shoot(window, "window_mtp_fallback")


def test_local_files_offer_the_target_s_own_heads_when_no_draft_is_picked(
    qtbot,  # type: ignore[no-untyped-def]
    isolated: Path,
    tiny_pair: tuple[Path, Path],
) -> None:
    from PySide6.QtWidgets import QWidget

    from app.ui.pair_chooser import choose_pair
    from tests.ui.dialogs import Dialogs, pick, press

    mtp = write_tiny_qwen35(isolated / "self-drafting.gguf")
    parent = QWidget()
    qtbot.addWidget(parent)

    def no_draft(dialog: QWidget) -> None:
        dialog.reject()  # type: ignore[attr-defined]

    with Dialogs(pick(mtp), no_draft, press("Yes")) as dialogs:
        choice = choose_pair(parent, str(isolated), files=True)
    assert choice is not None
    assert (choice.target_path, choice.draft_path, choice.draft_source) == (
        str(mtp),
        None,
        DraftSource.MTP,
    )
    assert "draft for itself with its next-token layers (MTP, 1 head)" in dialogs.seen[-1]
    # a target without heads is asked only about n-gram drafting, as before
    with Dialogs(pick(tiny_pair[0]), no_draft, press("Yes")) as dialogs:
        choice = choose_pair(parent, str(isolated), files=True)
    assert choice is not None and choice.draft_source is DraftSource.NGRAM
    assert "n-gram" in dialogs.seen[-1] and "MTP" not in dialogs.seen[-1]
