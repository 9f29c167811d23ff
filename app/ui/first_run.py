"""First start: ask the Hub (without blocking) whether it can be reached.

Reachable: the pair wizard opens. Not reachable: the offline demo pair loads, so a person
without a network still gets a working app on the first click.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QNetworkRequest

from app.models.hub import endpoint_or_default

PROBE_TIMEOUT_MS = 4000


class HubProbe(QObject):
    """One GET of the Hub's model search; ``finished(bool)`` says whether it answered."""

    finished = Signal(bool)

    def __init__(self, parent: QObject, endpoint: str | None = None) -> None:
        super().__init__(parent)
        self._manager = QNetworkAccessManager(self)
        url = QUrl(f"{endpoint_or_default(endpoint)}/api/models?limit=1")
        request = QNetworkRequest(url)
        request.setTransferTimeout(PROBE_TIMEOUT_MS)
        self._reply = self._manager.get(request)
        self._reply.finished.connect(self._done)

    def _done(self) -> None:
        reachable = self._reply.error() == QNetworkReply.NetworkError.NoError
        self._reply.deleteLater()
        self.finished.emit(reachable)
