"""The pair wizard's two worker threads: the Hub's and the calibration's.

``HubClient`` runs the Hub and download jobs (``app.workers.hub_jobs``) one after another
against the wizard's ``HubSession``; ``CalibrationClient`` runs ``Calibrate``
(``app.workers.calibration``) on a thread of its own, so a calibration never waits behind
a stalled Hub request, and frees the calibration's engine when it shuts down.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.workers.calibration import Calibrator
from app.workers.hub_jobs import HubSession
from app.workers.job_thread import JobThread


class HubClient(JobThread[HubSession]):
    def __init__(self, session: HubSession, parent: QObject | None = None) -> None:
        super().__init__(session, "hub-worker", parent)


class CalibrationClient(JobThread[Calibrator]):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(Calibrator(), "calibration-worker", parent)

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Stop the calibration, quit the thread, and free the models once it is gone."""
        super().shutdown(timeout_ms)
        if not self.running:
            self.context.close()
