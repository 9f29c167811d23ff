"""``PairWizard``: choose, download and verify a draft/target pair in a few clicks.

Offline it says so once (one short probe, cached for the wizard's session) and works with
the models on this computer: the library, downloaded files, the model cache (where the demo
pair lives) and files the person browses to.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget, QWizard

from app.engine.llama.hardware import Hardware
from app.files.paths import model_cache_dir
from app.models.catalog import Catalog
from app.models.hub import Token
from app.models.library import Library, models_dir
from app.ui.wizard.page_download import DownloadPage
from app.ui.wizard.page_draft import DraftPage
from app.ui.wizard.page_finish import FinishPage
from app.ui.wizard.page_hardware import HardwarePage
from app.ui.wizard.page_quant import QuantPage
from app.ui.wizard.page_review import ReviewPage
from app.ui.wizard.page_target import TargetPage
from app.ui.wizard.page_verify import VerifyPage
from app.ui.wizard.pair_selection import WizardState
from app.workers.hub_jobs import HubSession, ProbeHub
from app.workers.hub_messages import HubProbed
from app.workers.hub_worker import CalibrationClient, HubClient


class PairWizard(QWizard):
    profile_saved = Signal(str)
    online_changed = Signal()

    def __init__(
        self,
        library: Library | None = None,
        catalog: Catalog | None = None,
        *,
        hardware: Hardware | None = None,
        models_root: Path | None = None,
        endpoint: str | None = None,
        token: Token = None,
        offline: bool = False,
        model_cache: Path | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose a model pair")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.resize(820, 600)
        self.library = library or Library()
        self.catalog = catalog or Catalog.load()
        self.models_root = models_root or models_dir()
        self.state = WizardState(hardware=hardware)
        session = HubSession(
            self.models_root, endpoint, token, offline, model_cache or model_cache_dir()
        )
        self.client = HubClient(session, parent=self)
        self.calibration = CalibrationClient(parent=self)
        self._probe_id: int | None = None
        self.page_hardware = HardwarePage(self)
        self.page_target = TargetPage(self)
        self.page_quant = QuantPage(self)
        self.page_draft = DraftPage(self)
        self.page_review = ReviewPage(self)
        self.page_download = DownloadPage(self)
        self.page_verify = VerifyPage(self)
        self.page_finish = FinishPage(self)
        (
            self.id_hardware,
            self.id_target,
            self.id_quant,
            self.id_draft,
            self.id_review,
            self.id_download,
            self.id_verify,
            self.id_finish,
        ) = (
            self.addPage(page)
            for page in (
                self.page_hardware,
                self.page_target,
                self.page_quant,
                self.page_draft,
                self.page_review,
                self.page_download,
                self.page_verify,
                self.page_finish,
            )
        )
        self._closed = False

    # --- online or not ----------------------------------------------------------------

    @property
    def probing(self) -> bool:
        return self._probe_id is not None

    def probe_hub(self) -> None:
        """Ask, once, whether the Hub answers (within 3 s); Retry asks again."""
        self.state.online = None
        self._probe_id = self.client.submit(ProbeHub(), self._on_probe)
        self.online_changed.emit()

    def _on_probe(self, reply: HubProbed) -> None:
        if reply.request_id == self._probe_id:
            self._probe_id = None
            self.state.online = reply.online
            self.state.offline_reason = reply.reason
            self.online_changed.emit()

    def mark_offline(self, reason: str) -> None:
        """A Hub request found no network: remember it for the rest of the session."""
        if self.state.online is not False:
            self.state.online = False
            self.state.offline_reason = reason
            self.online_changed.emit()

    # --- lifetime ---------------------------------------------------------------------

    def done(self, result: int) -> None:
        self.shutdown()
        super().done(result)

    def shutdown(self) -> None:
        """Stop running jobs and join the worker thread (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        self.page_download.shutdown()
        self.page_verify.shutdown()
        self.client.shutdown()
        self.calibration.shutdown()
