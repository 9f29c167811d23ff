"""``PairWizard``: choose, download and verify a draft/target pair in a few clicks."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget, QWizard

from app.models.catalog import Catalog
from app.models.fit import Hardware
from app.models.hub import Token
from app.models.library import Library, models_dir
from app.ui.wizard.common import WizardState
from app.ui.wizard.pages_run import DownloadPage, FinishPage, ReviewPage, VerifyPage
from app.ui.wizard.pages_select import DraftPage, HardwarePage, QuantPage, TargetPage
from app.workers.hub_worker import HubClient


class PairWizard(QWizard):
    profile_saved = Signal(str)

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
        self.client = HubClient(self.models_root, endpoint=endpoint, token=token,
                                offline=offline, parent=self)
        self.page_hardware = HardwarePage(self)
        self.page_target = TargetPage(self)
        self.page_quant = QuantPage(self)
        self.page_draft = DraftPage(self)
        self.page_review = ReviewPage(self)
        self.page_download = DownloadPage(self)
        self.page_verify = VerifyPage(self)
        self.page_finish = FinishPage(self)
        for page in (self.page_hardware, self.page_target, self.page_quant, self.page_draft,
                     self.page_review, self.page_download, self.page_verify, self.page_finish):
            self.addPage(page)
        self._closed = False

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
