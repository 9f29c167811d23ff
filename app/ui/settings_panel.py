"""The settings panel: every field is checked as it is typed and refused with the reason.

A refused value never reaches the saved settings: the field turns red, the reason is shown
under it, and the last valid value stays in force until the text is fixed. A value that is
accepted but will probably hurt (more threads than cores) is applied with a warning under it.
Numbers are read as the locale writes them too ("0,7" where the decimal mark is a comma).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import replace

from PySide6.QtCore import QLocale, QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import qdebounced

from app.engine.config import AcceptRule
from app.engine.llama.repacking import CHOICES as REPACK_CHOICES
from app.engine.thread_fit import ThreadFit, ThreadGovernor
from app.store.settings import FIELDS, Invalid, Settings, advice, with_field
from app.ui.plain_text import plain_label
from app.ui.theme import CHOICE_LABELS, CHOICES
from app.ui.wheel_focus import wheel_needs_focus

INVALID_STYLE = "QLineEdit { border: 1px solid #D55E00; background: #FDEBE1; }"
PROMPT_DEBOUNCE_MS = 400  # the system prompt is checked and saved once typing pauses
DECIMAL_FIELDS = frozenset(f for f in FIELDS if isinstance(getattr(Settings(), f), float))
REPACK_LABELS = {
    "auto": "Auto (on unless it crashes this CPU)",
    "on": "On",
    "off": "Off",
}


def as_typed(name: str, text: str) -> str:
    """A decimal typed as the locale writes it ("0,7" in German) in the form the settings
    parse ("0.7"); anything else as it is, so the settings' own refusal says what is wrong."""
    locale = QLocale()
    if name not in DECIMAL_FIELDS or locale.decimalPoint() == "." or "." in text:
        return text
    value, ok = locale.toDouble(text.strip())
    return repr(value) if ok else text


class FieldEdit(QWidget):
    """A line edit bound to one settings field, with the refusal reason under it."""

    accepted = Signal(str, str)  # field name, text

    def __init__(self, name: str, panel: SettingsPanel) -> None:
        super().__init__(panel)
        self.name = name
        self._panel = panel
        self.edit = QLineEdit(self)
        self.edit.setObjectName(f"field_{name}")
        self.edit.setToolTip(FIELDS[name].hint)
        self.edit.setPlaceholderText("random" if name == "seed" else "")
        self.reason = plain_label(parent=self)  # the reason may quote what was typed
        self.reason.setObjectName(f"reason_{name}")
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet("color: #B34700; font-size: 11px;")
        self.reason.hide()
        self.warning = plain_label(parent=self)  # accepted, but probably not what the person wants
        self.warning.setObjectName(f"warning_{name}")
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color: palette(text); font-size: 11px;")
        self.warning.hide()
        self.note = plain_label(parent=self)  # what the last load made of this value
        self.note.setObjectName(f"note_{name}")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(text); font-size: 11px;")
        self.note.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(1)
        layout.addWidget(self.edit)
        layout.addWidget(self.reason)
        layout.addWidget(self.warning)
        layout.addWidget(self.note)
        self.edit.textEdited.connect(self._check)
        self.edit.editingFinished.connect(self.commit)

    def set_value(self, settings: Settings) -> None:
        """Show ``settings``' value of this field, and its warning if any."""
        value = getattr(settings, self.name)
        self.edit.setText("" if value is None else str(value))
        self._show(None)
        self._warn(settings)

    def _warn(self, settings: Settings) -> None:
        note = advice(settings).get(self.name)
        self.warning.setText(f"⚠ {note}" if note else "")
        self.warning.setVisible(bool(note))

    def error(self) -> str | None:
        return self.reason.text() if not self.reason.isHidden() else None

    def set_note(self, text: str) -> None:
        """A line under the field on what the last load made of it ("" for none)."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _show(self, reason: str | None) -> None:
        self.reason.setText(reason or "")
        self.reason.setVisible(bool(reason))
        self.edit.setStyleSheet(INVALID_STYLE if reason else "")
        self._panel.refusal_changed.emit(self._panel.refusal())

    def _check(self, text: str) -> Settings | None:
        try:
            updated = with_field(self._panel.settings, self.name, as_typed(self.name, text))
        except Invalid as refused:
            self._show(f"Refused: {refused}")
            self.warning.hide()
            return None
        self._show(None)
        self._warn(updated)
        return updated

    def commit(self) -> None:
        """Apply the text as typed when it is valid (also done when editing finishes)."""
        if self._check(self.edit.text()) is not None:
            self.accepted.emit(self.name, as_typed(self.name, self.edit.text()))


class SettingsPanel(QScrollArea):
    changed = Signal(object)  # Settings
    refusal_changed = Signal(str)  # "" when every field holds an accepted value
    theme_changed = Signal(str)  # one of theme.CHOICES

    SAMPLING = ("temperature", "top_k", "top_p", "min_p", "seed", "max_tokens")
    MODELS = ("target_gpu_layers", "draft_gpu_layers", "n_ctx", "n_threads")

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.fields: dict[str, FieldEdit] = {}
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        column = QVBoxLayout(body)
        column.setContentsMargins(6, 6, 6, 6)

        prompt_box = QGroupBox("System prompt")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("system_prompt")
        self.system_prompt.setPlaceholderText("Optional instructions sent before every chat")
        self.system_prompt.setFixedHeight(72)
        self._prompt_later = qdebounced(
            self._commit_prompt, timeout=PROMPT_DEBOUNCE_MS, parent=self
        )
        self.system_prompt.textChanged.connect(self._prompt_later)
        prompt_layout = QVBoxLayout(prompt_box)
        prompt_layout.addWidget(self.system_prompt)
        self.prompt_reason = plain_label()
        self.prompt_reason.setStyleSheet("color: #B34700;")
        self.prompt_reason.hide()
        prompt_layout.addWidget(self.prompt_reason)
        column.addWidget(prompt_box)

        column.addWidget(self._group("Sampling", self.SAMPLING))

        spec_box = self._group("Speculation", ())
        form = spec_box.layout()
        assert isinstance(form, QFormLayout)
        self.draft_mode = QComboBox()
        self.draft_mode.setObjectName("draft_mode")
        self.draft_mode.addItem("Adaptive (measured)", True)
        self.draft_mode.addItem("Fixed N", False)
        self.draft_mode.currentIndexChanged.connect(self._commit_mode)
        form.addRow("Draft length mode", self.draft_mode)
        for name in ("draft_max", "p_min"):
            form.addRow(FIELDS[name].label, self._field(name))
        self.rule = QComboBox()
        self.rule.setObjectName("rule")
        self.rule.addItem("Rejection sampling", AcceptRule.REJECTION.value)
        self.rule.addItem("Sample and match (llama.cpp)", AcceptRule.MATCH.value)
        self.rule.setToolTip(
            "Rejection sampling keeps the target's distribution exactly and accepts more often; "
            "sample-and-match is llama.cpp's rule, shown for comparison"
        )
        self.rule.currentIndexChanged.connect(self._commit_rule)
        form.addRow("Acceptance rule", self.rule)
        column.addWidget(spec_box)

        models = self._group("Models (reload on change)", self.MODELS)
        self.repacking = QComboBox()  # three choices: a choice box, not free text
        self.repacking.setObjectName("weight_repacking")
        for key in REPACK_CHOICES:
            self.repacking.addItem(REPACK_LABELS.get(key, key), key)
        self.repacking.setToolTip(FIELDS["weight_repacking"].hint)
        self.repacking.currentIndexChanged.connect(self._commit_repacking)
        models_form = models.layout()
        assert isinstance(models_form, QFormLayout)
        models_form.addRow(FIELDS["weight_repacking"].label, self.repacking)
        column.addWidget(models)
        look = self._group("Appearance", ())
        self.theme = QComboBox()
        self.theme.setObjectName("theme")
        for key in CHOICES:
            self.theme.addItem(CHOICE_LABELS[key], key)
        self.theme.setToolTip("Light or dark; by default the system's colour scheme")
        self.theme.currentIndexChanged.connect(
            lambda _i: self.theme_changed.emit(str(self.theme.currentData()))
        )
        look_form = look.layout()
        assert isinstance(look_form, QFormLayout)
        look_form.addRow("Theme", self.theme)
        column.addWidget(look)
        column.addStretch(1)
        # long item texts must not widen the panel
        for box in (self.draft_mode, self.rule, self.repacking):
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(8)
        wheel_needs_focus(self.draft_mode, self.rule, self.repacking, self.theme)
        self.setWidget(body)
        # no horizontal scrolling, so never narrower than the form itself
        self.setMinimumWidth(
            body.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        )
        self.set_settings(settings)

    def _group(self, title: str, names: tuple[str, ...]) -> QGroupBox:
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        for name in names:
            form.addRow(FIELDS[name].label, self._field(name))
        return box

    def _field(self, name: str) -> FieldEdit:
        editor = FieldEdit(name, self)
        editor.accepted.connect(self._commit_field)
        self.fields[name] = editor
        return editor

    # --- state ---------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    def set_settings(self, settings: Settings) -> None:
        self._settings = settings
        self._show(settings, None)

    def _show(self, settings: Settings, names: Collection[str] | None) -> None:
        """Put ``settings``' values in their editors (``names`` only, or all), without
        announcing them: whoever calls this decides what is applied."""
        for name, editor in self.fields.items():
            if names is None or name in names:
                editor.set_value(settings)
        if names is None or "system_prompt" in names:
            with QSignalBlocker(self.system_prompt):
                self.system_prompt.setPlainText(settings.system_prompt)
        if names is None or "draft_adaptive" in names:
            with QSignalBlocker(self.draft_mode):
                self.draft_mode.setCurrentIndex(0 if settings.draft_adaptive else 1)
        if names is None or "rule" in names:
            with QSignalBlocker(self.rule):
                self.rule.setCurrentIndex(max(self.rule.findData(settings.rule), 0))
        if names is None or "weight_repacking" in names:
            with QSignalBlocker(self.repacking):
                found = self.repacking.findData(settings.weight_repacking)
                self.repacking.setCurrentIndex(max(found, 0))

    def show_theme(self, choice: str) -> None:
        self.theme.blockSignals(True)
        self.theme.setCurrentIndex(max(self.theme.findData(choice), 0))
        self.theme.blockSignals(False)

    def update_settings(self, **changes: object) -> None:
        """Change fields that other widgets own (pair, view options, a saved pair's context
        size …) and announce it. Their editors show the new values, so that committing what
        is typed (``flush_pending``, on Send and on close) cannot write the old ones back."""
        updated = replace(self._settings, **changes)  # type: ignore[arg-type]
        self._show(updated, changes.keys())
        self._apply(updated)

    def show_threads(self, fit: ThreadFit | None) -> None:
        """Under CPU threads: the threads the last load chose and why (nothing for a remote
        pair, which runs on another machine's threads)."""
        note = f"Last load: {fit.reason}" if fit is not None else ""
        if fit is not None and fit.follows:
            held = f"{ThreadGovernor.SUSTAIN_S:g} s"
            note += f"; while answering, fewer while other programs hold cores for {held} or more"
        self.fields["n_threads"].set_note(note)

    def errors(self) -> dict[str, str]:
        return {name: e for name, f in self.fields.items() if (e := f.error())}

    def refusal(self) -> str:
        """Why an answer cannot start with the settings as typed ("" when it can)."""
        reasons = [f"{FIELDS[name].label}: {error}" for name, error in self.errors().items()]
        if not self.prompt_reason.isHidden():
            reasons.append(f"System prompt: {self.prompt_reason.text()}")
        return "; ".join(reasons)

    def _apply(self, settings: Settings) -> None:
        if settings != self._settings:
            self._settings = settings
            self.changed.emit(settings)

    def _commit_field(self, name: str, text: str) -> None:
        with contextlib.suppress(Invalid):  # the field already shows the reason
            self._apply(with_field(self._settings, name, text))

    def _commit_prompt(self) -> None:
        try:
            updated = with_field(self._settings, "system_prompt", self.system_prompt.toPlainText())
        except Invalid as refused:
            self.prompt_reason.setText(f"Refused: {refused}")
            self.prompt_reason.show()
            self.refusal_changed.emit(self.refusal())
            return
        self.prompt_reason.hide()
        self.refusal_changed.emit(self.refusal())
        self._apply(updated)

    def flush_pending(self) -> None:
        """Apply what is typed and not yet applied: before an answer starts, and on close.

        A system prompt edit still waiting for its debounce, and a field edited without
        Return or leaving it (a closing window does not always take the focus away first).
        """
        self._prompt_later.flush(restart_timer=False)  # no timer left running on close
        for editor in self.fields.values():
            editor.commit()

    def _commit_mode(self, _index: int) -> None:
        self._apply(replace(self._settings, draft_adaptive=bool(self.draft_mode.currentData())))

    def _commit_rule(self, _index: int) -> None:
        self._apply(replace(self._settings, rule=str(self.rule.currentData())))

    def _commit_repacking(self, _index: int) -> None:
        choice = str(self.repacking.currentData())
        self._apply(replace(self._settings, weight_repacking=choice))
