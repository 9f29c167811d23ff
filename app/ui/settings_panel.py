"""The settings panel: every field is checked as it is typed and refused with the reason.

A refused value never reaches the saved settings: the field turns red, the reason is shown
under it, and the last valid value stays in force until the text is fixed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import replace

from PySide6.QtCore import QSignalBlocker, Qt, Signal
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
from app.store.settings import FIELDS, Invalid, Settings, with_field
from app.ui.plain_text import plain_label
from app.ui.theme import CHOICE_LABELS, CHOICES

INVALID_STYLE = "QLineEdit { border: 1px solid #D55E00; background: #FDEBE1; }"
PROMPT_DEBOUNCE_MS = 400  # the system prompt is checked and saved once typing pauses


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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(1)
        layout.addWidget(self.edit)
        layout.addWidget(self.reason)
        self.edit.textEdited.connect(self._check)
        self.edit.editingFinished.connect(self.commit)

    def set_value(self, value: object) -> None:
        self.edit.setText("" if value is None else str(value))
        self._show(None)

    def error(self) -> str | None:
        return self.reason.text() if not self.reason.isHidden() else None

    def _show(self, reason: str | None) -> None:
        self.reason.setText(reason or "")
        self.reason.setVisible(bool(reason))
        self.edit.setStyleSheet(INVALID_STYLE if reason else "")
        self._panel.refusal_changed.emit(self._panel.refusal())

    def _check(self, text: str) -> Settings | None:
        try:
            updated = with_field(self._panel.settings, self.name, text)
        except Invalid as refused:
            self._show(f"Refused: {refused}")
            return None
        self._show(None)
        return updated

    def commit(self) -> None:
        """Apply the text as typed when it is valid (also done when editing finishes)."""
        if self._check(self.edit.text()) is not None:
            self.accepted.emit(self.name, self.edit.text())


class SettingsPanel(QScrollArea):
    changed = Signal(object)  # Settings
    refusal_changed = Signal(str)  # "" when every field holds an accepted value
    theme_changed = Signal(str)  # one of theme.CHOICES

    SAMPLING = ("temperature", "top_k", "top_p", "min_p", "seed", "max_tokens")
    MODELS = ("target_gpu_layers", "draft_gpu_layers", "n_ctx", "n_threads", "weight_repacking")

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
        for box in (self.draft_mode, self.rule):  # long item texts must not widen the panel
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(8)
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
                editor.set_value(getattr(settings, name))
        if names is None or "system_prompt" in names:
            with QSignalBlocker(self.system_prompt):
                self.system_prompt.setPlainText(settings.system_prompt)
        if names is None or "draft_adaptive" in names:
            with QSignalBlocker(self.draft_mode):
                self.draft_mode.setCurrentIndex(0 if settings.draft_adaptive else 1)
        if names is None or "rule" in names:
            with QSignalBlocker(self.rule):
                self.rule.setCurrentIndex(max(self.rule.findData(settings.rule), 0))

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
