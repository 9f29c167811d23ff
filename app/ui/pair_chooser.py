"""How "Change pair…" asks for a pair: the pair wizard when it exists, else file pickers.

Swapping in the wizard means changing only ``choose_pair``: it must return a
``PairChoice`` (or ``None`` when the person cancels).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.engine.config import DraftSource

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"


@dataclass(frozen=True)
class PairChoice:
    target_path: str
    draft_path: str | None  # None: n-gram drafting
    draft_source: DraftSource


def _from_wizard(parent: QWidget) -> PairChoice | None | bool:
    """The wizard's choice, ``None`` when cancelled, ``False`` when there is no wizard."""
    try:
        from app.ui.wizard import PairWizard
    except ImportError:
        return False
    wizard = PairWizard(parent=parent)
    saved: list[str] = []
    wizard.profile_saved.connect(saved.append)
    wizard.exec()
    if not saved:
        return None
    library = wizard.library
    target, draft = library.model_specs(library.profiles[saved[-1]])
    source = DraftSource.MODEL if draft is not None else DraftSource.NGRAM
    return PairChoice(target.path, draft.path if draft is not None else None, source)


def _from_files(parent: QWidget, start: str) -> PairChoice | None:
    target, _ = QFileDialog.getOpenFileName(parent, "Target model (GGUF)", start, GGUF_FILTER)
    if not target:
        return None
    draft, _ = QFileDialog.getOpenFileName(
        parent,
        "Draft model (GGUF) — cancel to draft with n-grams instead",
        str(Path(target).parent),
        GGUF_FILTER,
    )
    if not draft:
        answer = QMessageBox.question(
            parent,
            "No draft model",
            "Use n-gram (prompt lookup) drafting with this target?",
        )
        if answer != QMessageBox.StandardButton.Yes:
            return None
        return PairChoice(target, None, DraftSource.NGRAM)
    return PairChoice(target, draft, DraftSource.MODEL)


def choose_pair(parent: QWidget, start_dir: str = "", *, files: bool = False) -> PairChoice | None:
    """Ask for a pair: the wizard, or file pickers when ``files`` or when there is no wizard."""
    choice = False if files else _from_wizard(parent)
    if choice is False:
        return _from_files(parent, start_dir)
    return choice or None
