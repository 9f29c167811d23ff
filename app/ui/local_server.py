""" "Serve on localhost": the OpenAI-compatible server of ``python -m app serve``, on the
window's own engine.

uvicorn runs on its own thread (``app.serve.server.ServerThread``); each request becomes a
task on the window's engine worker (``app.workers.window_serving``), so the chat and the
requests share the one loaded pair. From the window the server listens on 127.0.0.1 only,
so it needs no API key. The served name (``model``) is read at each request: a pair change
while serving renames what the server answers as. ``stop`` cancels what runs and waits,
and ends the server's thread within its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.config import SpecConfig
from app.serve.defaults import DEFAULT_HOST, DEFAULT_QUEUE
from app.serve.http import build_app
from app.serve.ledger import Activity
from app.serve.params import Sampling
from app.serve.server import Binding, ServerThread, bind, host_names, url_of
from app.workers.engine_client import EngineClient
from app.workers.window_serving import WindowServing

STATUS_MS = 500  # how often the status item reads the server's counts


class LocalServer(QObject):
    status_changed = Signal(str)  # the status item's text; "" once the server stops

    def __init__(self, client: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._client = client
        self._engine: WindowServing | None = None
        self._thread: ServerThread | None = None
        self._where = ""
        self.url = ""
        self.model = ""  # the served name: the loaded pair's, read at each request
        self._timer = QTimer(self)
        self._timer.setInterval(STATUS_MS)
        self._timer.timeout.connect(self._tick)

    @property
    def serving(self) -> bool:
        return self._thread is not None

    def start(
        self,
        port: int,
        *,
        model: str,
        defaults: Sampling,
        spec: Callable[[], SpecConfig],
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Listen on 127.0.0.1:``port`` (a taken port raises ``SpecDeckError`` now)."""
        self.stop()
        sock = bind(Binding(DEFAULT_HOST, port))
        host, bound = sock.getsockname()[:2]
        self._where, self.url = f"{host}:{bound}", url_of(sock)
        engine = self._client.serving(spec, DEFAULT_QUEUE)
        hosts = host_names(DEFAULT_HOST, bound)
        self.model = model
        app = build_app(engine, model=lambda: self.model, defaults=defaults, hosts=hosts, meta=meta)
        self._thread = ServerThread(app, sock, concurrency=max(64, 4 * DEFAULT_QUEUE))
        self._engine = engine
        self._thread.start()
        self._timer.start()
        self._tick()
        return self.url

    def stop(self, timeout: float = 2.0) -> bool:
        """Refuse new connections, cancel what runs or waits; True when the thread ended."""
        self._timer.stop()
        thread, engine = self._thread, self._engine
        self._thread = self._engine = None
        if thread is None:
            return True
        if engine is not None:
            engine.close()
        ended = thread.stop(timeout)
        self.status_changed.emit("")
        return ended

    def mark(self) -> int | None:
        """The request queue's place now (None when not serving): see ``activity``."""
        engine = self._engine
        return engine.mark() if engine is not None else None

    def activity(self, mark: int) -> Activity | None:
        """What a chat job queued at ``mark`` waits for (None when not serving)."""
        engine = self._engine
        return engine.activity(mark) if engine is not None else None

    def status_text(self) -> str:
        engine = self._engine
        if engine is None:
            return ""
        stats = engine.stats()
        acceptance = stats.live_acceptance if stats.running else None
        last = stats.last
        if acceptance is None and last is not None and last.drafted:
            acceptance = last.acceptance_rate
        if acceptance is not None:
            shown = f"{100 * acceptance:.0f} %"
        else:  # as the window's own figure says it: 0 % of nothing is not a rate
            shown = "— (nothing drafted)" if last is not None and not stats.running else "—"
        plural = "" if stats.served == 1 else "s"
        running = engine.activity(0).serving_s  # first: the elided end is the least needed
        now = f" · answering a request ({running:.0f} s)" if running is not None else ""
        return (
            f"Serving on {self._where}{now} · {stats.served} request{plural} · acceptance {shown}"
        )

    def _tick(self) -> None:
        self.status_changed.emit(self.status_text())
