"""How "Change pair…" asks for a pair: a saved pair, the pair wizard, or file pickers.

Files are checked from their headers as they are picked (``files_problem``), as the wizard
checks the drafts it lists: a pair llama.cpp would refuse is refused here, before anything is
unloaded for it.

Everything ends in a ``PairChoice``; a saved pair (and so the wizard's) also brings the
``PairSettings`` it was saved with, which the window applies before it loads the pair. Which
saved pair is current is the settings' ``pair_name`` (see ``app.store.current_pair``): the
window keeps it, and the functions here only look the name up in the library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.config import KV_TYPES, MAX_DRAFT_LEN, DraftSource
from app.errors import SpecDeckError
from app.gguf.check import check_local_pair
from app.gguf.compat import IncompatiblePairError
from app.models.drafting import local_drafting
from app.models.library import Library, LibraryError, Profile
from app.remote.chat import RemotePair
from app.remote.client import RemoteError
from app.serve.server import is_loopback
from app.ui.box_layouts import button_row, column
from app.ui.plain_text import ask, plain_label
from app.workers.messages import describe_error

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
MAX_PAIR_NAME = 120
KEPT = "Nothing was loaded: the pair loaded now stays loaded."
REMOTE_KINDS = (
    ("llama-server", "llama-server (timings per answer)"),
    ("vllm", "vLLM (/metrics counters)"),
    ("openai", "SGLang or another OpenAI-compatible server"),
)


@dataclass(frozen=True)
class PairSettings:
    """What a saved pair brings besides its files: the wizard's choices and calibration."""

    name: str
    n_ctx: int
    kv_type: str
    draft_max: int

    def settings_changes(self) -> dict[str, object]:
        """Fields of ``Settings`` to change before the pair loads."""
        return {"n_ctx": self.n_ctx, "draft_max": self.draft_max}


@dataclass(frozen=True)
class PairChoice:
    target_path: str
    draft_path: str | None  # None: no draft model (n-gram or MTP drafting)
    draft_source: DraftSource
    settings: PairSettings | None = None  # None: keep the window's own settings


def pair_settings(profile: Profile) -> PairSettings:
    """A profile's settings, each checked: a hand-edited library must not break a load."""
    n_ctx = profile.n_ctx if 256 <= profile.n_ctx <= 1 << 20 else 4096
    kv_type = profile.kv_type if profile.kv_type in KV_TYPES else "f16"
    draft_max = profile.draft_max if 1 <= profile.draft_max <= MAX_DRAFT_LEN else 8
    return PairSettings(profile.name, n_ctx, kv_type, draft_max)


def choice_for_profile(library: Library, name: str) -> PairChoice:
    """The saved pair ``name``; raises ``LibraryError`` when it cannot load."""
    profile = library.profiles.get(name)
    if profile is None:
        raise LibraryError(f"there is no saved pair named {name!r}")
    target, draft = library.model_specs(profile)
    return PairChoice(
        target.path,
        draft.path if draft is not None else None,
        profile.source,
        pair_settings(profile),
    )


def drafting_words(library: Library, profile: Profile) -> str:
    """How a saved pair drafts, in a few words: "draft model", "n-gram (prompt lookup)" or
    "its own heads (MTP, 1 head)"."""
    if profile.source is DraftSource.MODEL:
        return "draft model"
    if profile.source is DraftSource.NGRAM:
        return "n-gram (prompt lookup)"
    target = library.models.get(profile.target)
    drafting = target.drafting if target is not None else None
    if drafting is None and target is not None:
        found = local_drafting(target.path)
        drafting = found.name if found is not None else None
    return f"its own heads ({drafting})" if drafting else "its own heads (MTP)"


def active_pair_name(name: str, target_path: str | None) -> str | None:
    """``name`` when it is a saved pair whose target is ``target_path``, else None."""
    try:
        profile = Library().current_profile(name, target_path)
    except LibraryError:
        return None
    return profile.name if profile is not None else None


def active_pair_kv_type(name: str, target_path: str) -> str:
    """The KV cache type to reload ``target_path`` with: the saved pair ``name``'s when that
    pair's target it is (the other settings persist in the window's own settings)."""
    try:
        profile = Library().current_profile(name, target_path)
    except LibraryError:
        return "f16"
    return pair_settings(profile).kv_type if profile is not None else "f16"


def _from_wizard(parent: QWidget) -> PairChoice | None | bool:
    """The wizard's choice, ``None`` when cancelled, ``False`` when there is no wizard."""
    try:
        from app.ui.wizard.wizard import PairWizard
    except ImportError:
        return False
    wizard = PairWizard(parent=parent)
    saved: list[str] = []
    wizard.profile_saved.connect(saved.append)
    wizard.exec()
    # A pair saved without being made active (the person kept the current one) does not load.
    if not saved or wizard.page_finish.activated != saved[-1]:
        return None
    return choice_for_profile(wizard.library, saved[-1])


def files_problem(target: str, draft: str | None) -> str | None:
    """Why these files cannot load as a pair, from their headers (``check_local_pair``, the
    check every load passes: ``check-pair``'s), in words; None when they can. Read here,
    before the pair that works is unloaded for them."""
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)  # two headers: under a second
    try:
        check_local_pair(Path(target), Path(draft) if draft else None)
    except IncompatiblePairError as error:
        advice = (
            "Choose a draft made with the target's tokenizer, usually a smaller model of the "
            "same family."
            if error.advice == IncompatiblePairError.advice
            else error.advice  # a head or an assistant made for another target
        )
        return (
            f"{Path(draft or '').name} cannot draft for {Path(target).name}: "
            f"{_in_words(error.mismatch or str(error))}. {advice}"
        )
    except (SpecDeckError, OSError, ValueError) as error:
        title, message = describe_error(error)
        return f"{title}. {message}"
    finally:
        QApplication.restoreOverrideCursor()
    return None


def _in_words(mismatch: str) -> str:
    """The wizard's words for a vocabulary mismatch (the sentence itself without a wizard)."""
    try:
        from app.ui.wizard.words import mismatch_in_words
    except ImportError:
        return mismatch
    return mismatch_in_words(mismatch)


def _refuse(parent: QWidget, title: str, problem: str, retry: str | None) -> bool:
    """Say why the files were refused (as plain text: file names are not markup); True when
    the person wants to choose again (``retry`` names that button)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(f"{problem}\n\n{KEPT}")
    again = box.addButton(retry, QMessageBox.ButtonRole.AcceptRole) if retry else None
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return again is not None and box.clickedButton() is again


def _from_files(parent: QWidget, start: str) -> PairChoice | None:
    """A target and a draft file, each checked before anything loads; a refused draft can be
    chosen again."""
    target, _ = QFileDialog.getOpenFileName(parent, "Target model (GGUF)", start, GGUF_FILTER)
    if not target:
        return None
    problem = files_problem(target, None)
    if problem is not None:
        _refuse(parent, "This model cannot be loaded", problem, None)
        return None
    folder = str(Path(target).parent)
    while True:
        draft, _ = QFileDialog.getOpenFileName(
            parent, "Draft model (GGUF) — cancel to draft with n-grams instead", folder, GGUF_FILTER
        )
        if not draft:
            own = local_drafting(target)
            if own is not None and own.method == "mtp":
                question = (
                    f"Let {Path(target).name} draft for itself with its next-token layers "
                    f"({own.name})? No draft download is needed. No: n-gram drafting."
                )
                if ask(parent, "No draft model", question):
                    return PairChoice(target, None, DraftSource.MTP)
            question = "Use n-gram (prompt lookup) drafting with this target?"
            if not ask(parent, "No draft model", question):
                return None
            return PairChoice(target, None, DraftSource.NGRAM)
        problem = files_problem(target, draft)
        if problem is None:
            return PairChoice(target, draft, DraftSource.MODEL)
        if not _refuse(parent, "These models cannot be paired", problem, "Choose another draft…"):
            return None
        folder = str(Path(draft).parent)


def choose_pair(
    parent: QWidget, start_dir: str = "", *, files: bool = False, saved: str | None = None
) -> PairChoice | None:
    """Ask for a pair: the saved pair ``saved``, the wizard, or file pickers when ``files``
    or when there is no wizard."""
    if saved is not None:
        return choice_for_profile(Library(), saved)
    choice = False if files else _from_wizard(parent)
    if choice is False:
        return _from_files(parent, start_dir)
    return choice if isinstance(choice, PairChoice) else None


class RemoteServerDialog(QDialog):
    """A server to chat with: its address, its kind, and optionally a second server with the
    same model and no speculation, as the baseline. ``last`` fills in the one chosen last;
    ``own_url`` is this window's own serving address, which is refused (the window would wait
    on itself)."""

    def __init__(
        self, parent: QWidget | None = None, last: RemotePair | None = None, own_url: str = ""
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote server")
        self.pair: RemotePair | None = None
        self._own_url = own_url
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://gpu-box:8080")
        self.kind = QComboBox()
        for name, label in REMOTE_KINDS:
            self.kind.addItem(label, name)
        self.baseline = QLineEdit()
        self.baseline.setPlaceholderText("optional: the same model without speculation")
        if last is not None:
            self.url.setText(last.url)
            self.kind.setCurrentIndex(max(0, self.kind.findData(last.server)))
            self.baseline.setText(last.baseline_url or "")
        self.message = plain_label()  # names what the person typed
        self.message.setWordWrap(True)
        note = plain_label(
            "The conversation is sent to these addresses only; a redirect elsewhere is "
            "refused. llama-server reports its drafted and accepted tokens per answer, vLLM "
            "through /metrics; none says which tokens were drafted, so none are coloured."
        )
        note.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Server address", self.url)
        form.addRow("Kind", self.kind)
        form.addRow("Baseline address", self.baseline)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.message)
        layout.addWidget(buttons)

    def accept(self) -> None:
        try:
            pair = RemotePair.checked(
                self.url.text(), str(self.kind.currentData()), self.baseline.text()
            )
        except RemoteError as exc:
            self._say(str(exc))
            return
        own = [u for u in (pair.url, pair.baseline_url) if u and same_server(u, self._own_url)]
        if own:
            self._say(
                f"{own[0]} is this window's own serving address (Serve on localhost): the "
                "chat would wait on itself. Choose another server, or chat with the loaded "
                "pair directly."
            )
            return
        self.pair = pair
        super().accept()

    def _say(self, text: str) -> None:
        """Why the address is refused, with the dialog grown to hold it: at its old height
        the words squeezed the fields above them to half their height."""
        self.message.setText(text)
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        wanted = (
            layout.totalHeightForWidth(self.width())
            if layout.hasHeightForWidth()
            else layout.totalSizeHint().height()
        )
        if wanted > self.height():
            self.resize(self.width(), wanted)


def same_server(url: str, other: str) -> bool:
    """Whether two http(s) addresses reach the same server on this machine: the same port,
    and the same host or two names of the loopback interface (localhost, 127.x, ::1)."""
    try:
        a, b = urlsplit(url), urlsplit(other)
        ports = (a.port or _DEFAULT_PORTS.get(a.scheme), b.port or _DEFAULT_PORTS.get(b.scheme))
    except ValueError:
        return False
    if not a.hostname or not b.hostname or ports[0] != ports[1]:
        return False
    return a.hostname == b.hostname or (_loopback_name(a.hostname) and _loopback_name(b.hostname))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _loopback_name(host: str) -> bool:
    """The serving rule's loopback names, and the .localhost names that resolve there."""
    return is_loopback(host) or host.lower().endswith(".localhost")


def choose_remote(
    parent: QWidget, last: RemotePair | None = None, own_url: str = ""
) -> RemotePair | None:
    dialog = RemoteServerDialog(parent, last, own_url)
    return dialog.pair if dialog.exec() else None


class SavedPairsDialog(QDialog):
    """Rename and delete saved pairs (the models stay in the library). ``current`` is the
    current pair's name, followed through renames (None once it is deleted)."""

    def __init__(
        self, library: Library, parent: QWidget | None = None, current: str | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Saved pairs")
        self.library = library
        self.current = current
        self.list = QListWidget()
        self.list.currentItemChanged.connect(lambda *_: self._enable())
        self.message = plain_label()  # library errors name pairs and files
        self.message.setWordWrap(True)
        self.rename_button = QPushButton("Rename…")
        self.rename_button.clicked.connect(self._ask_rename)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self._ask_delete)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        buttons = button_row(self.rename_button, self.delete_button)
        column(self, self.list, self.message, buttons, close, stretch=False)
        self.refresh()

    def refresh(self, select: str | None = None) -> None:
        self.list.clear()
        for name in sorted(self.library.profiles, key=str.lower):
            active = " (active)" if name == self.current else ""
            drafting = drafting_words(self.library, self.library.profiles[name])
            item = QListWidgetItem(f"{name}{active} · drafts with {drafting}")
            item.setData(256, name)
            self.list.addItem(item)
            if name == select:
                self.list.setCurrentItem(item)
        self._enable()

    def selected(self) -> str | None:
        item = self.list.currentItem()
        return item.data(256) if item is not None else None

    def _enable(self) -> None:
        on = self.selected() is not None
        self.rename_button.setEnabled(on)
        self.delete_button.setEnabled(on)

    def _ask_rename(self) -> None:
        old = self.selected()
        if old is None:
            return
        new, ok = QInputDialog.getText(self, "Rename pair", "New name", text=old)
        if ok:
            self.rename(old, new)

    def rename(self, old: str, new: str) -> bool:
        try:
            renamed = self.library.rename_profile(old, new.strip()[:MAX_PAIR_NAME])
        except LibraryError as exc:
            self.message.setText(str(exc))
            return False
        if self.current == old:
            self.current = renamed.name
        self.message.setText("")
        self.refresh(select=new.strip()[:MAX_PAIR_NAME])
        return True

    def _ask_delete(self) -> None:
        name = self.selected()
        if name is None:
            return
        question = f"Delete the saved pair “{name}”? Its models stay in the library."
        if ask(self, "Delete pair", question):
            self.delete(name)

    def delete(self, name: str) -> None:
        self.library.delete_profile(name)
        if self.current == name:
            self.current = None
        self.refresh()
