"""The wizard's first page: the devices and their free memory, the context size and KV cache
type, and a Hugging Face access token."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from app.models.downloads import has_stored_token
from app.models.fit import KV_BYTES_PER_ELEMENT, gib
from app.ui.wizard.common import OfflineNote, Page, WizardHost, error_html, status_label
from app.workers.hub_jobs import DetectHardware, SaveToken
from app.workers.hub_messages import HardwareFound, HubFailure, TokenSaved


class HardwarePage(Page):
    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard, "Your hardware", "SpecDeck sizes the pair for the memory this machine has free."
        )
        self.devices = status_label()
        self.offline = OfflineNote(wizard)
        self.ctx = QSpinBox()
        self.ctx.setRange(512, 262_144)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(wizard.state.n_ctx)
        self.ctx.setSuffix(" tokens")
        self.kv = QComboBox()
        self.kv.addItems(list(KV_BYTES_PER_ELEMENT))
        self.kv.setCurrentText(wizard.state.kv_type)
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("hf_… (only needed for gated models)")
        self.save_token = QPushButton("Save token")
        self.save_token.clicked.connect(self._save_token)
        self.token_status = status_label()

        settings = QFormLayout()
        settings.addRow("Context size", self.ctx)
        settings.addRow("KV cache type", self.kv)
        token_row = QHBoxLayout()
        token_row.addWidget(self.token)
        token_row.addWidget(self.save_token)
        box = QGroupBox("Hugging Face access token")
        box_layout = QVBoxLayout(box)
        box_layout.addLayout(token_row)
        box_layout.addWidget(self.token_status)
        layout = QVBoxLayout(self)
        layout.addWidget(self.offline)
        layout.addWidget(self.devices)
        layout.addLayout(settings)
        layout.addWidget(box)
        layout.addStretch(1)
        self.registerField("n_ctx", self.ctx)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self._show_token_status()
        if self.state.online is None and not self.owner.probing:
            self.owner.probe_hub()
        if self.state.hardware is None:
            self.devices.setText("Detecting devices…")
            self.submit(DetectHardware(), self._hardware_found)
        else:
            self._show_hardware()

    def _show_token_status(self, extra: str = "") -> None:
        stored = "A token is stored." if has_stored_token() else "No token stored."
        self.token_status.setText(
            f"{stored} It is kept in huggingface_hub's own token store, never in SpecDeck's "
            f"settings. {extra}"
        )

    def _show_hardware(self) -> None:
        hw = self.state.hardware
        assert hw is not None
        rows = [f"<b>Backend:</b> {escape(hw.backend)}"]
        for gpu in hw.gpus:
            rows.append(
                f"<b>{escape(gpu.label)}:</b> {gib(gpu.free_bytes)} free of {gib(gpu.total_bytes)}"
            )
        if not hw.gpus:
            rows.append(f"No GPU in use: the models run on the CPU ({hw.cpu_count} cores).")
        rows.append(f"<b>System RAM:</b> {gib(hw.ram_free)} available of {gib(hw.ram_total)}")
        self.devices.setText("<br>".join(rows))

    def _save_token(self) -> None:
        text = self.token.text().strip()
        if not text:
            self.token_status.setText(
                error_html("Paste a token from huggingface.co/settings/tokens first.")
            )
            return
        self.save_token.setEnabled(False)
        self.token_status.setText("Checking the token with the Hub…")
        self.submit(SaveToken(text), self._token_saved)

    def _hardware_found(self, reply: HardwareFound) -> None:
        self.state.hardware = reply.hardware
        self._show_hardware()

    def _token_saved(self, _reply: TokenSaved) -> None:
        self.token.clear()
        self.save_token.setEnabled(True)
        self._show_token_status("Saved.")

    def on_failure(self, failure: HubFailure) -> None:
        self.save_token.setEnabled(True)
        if self.state.hardware is None:
            self.devices.setText(error_html(failure.message))
        else:
            self.token_status.setText(self.failure_text(failure))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.hardware is not None

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.state.n_ctx = self.ctx.value()
        self.state.kv_type = self.kv.currentText()
        return True
