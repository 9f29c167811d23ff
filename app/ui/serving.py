"""The window's "Serve on localhost", kept in step with the pair and said in words.

``ServingControl`` owns the menu action, the status bar item and the ``LocalServer``. What
the window does with its pair reaches the server here: a local pair change keeps serving
and renames what the server answers as (the served name is the loaded pair's); a switch to
a remote server, or a pair that is gone, stops serving, and the status bar says which.
A chat message queued behind served requests says so while it waits ("Serving a request
from another program (12 s) — your message is next"), instead of a silent "waiting for the
first token…".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from superqt.utils import signals_blocked

from app.errors import SpecDeckError
from app.serve.ledger import Activity
from app.serve.params import Sampling
from app.store.settings import Settings
from app.ui.local_server import LocalServer
from app.ui.status_fit import StatusField, serving_essentials
from app.workers.engine_client import EngineClient
from app.workers.messages import PairLoaded

WAIT_MS = 500  # how often a waiting chat message's note is brought up to date
STOPPED_REMOTE = "Stopped serving: the window now chats with a remote server"
STOPPED_NO_PAIR = "Stopped serving: no pair is loaded"


def served_name(loaded: PairLoaded) -> str:
    """What the server answers as: the loaded target's file name."""
    return Path(loaded.pair.target_path).name


def waiting_words(activity: Activity) -> str:
    """Why a chat message has not started, or "" when nothing served is ahead of it."""
    ahead = activity.ahead
    if activity.serving_s is None and not ahead:
        return ""
    requests = f"{ahead} request{'' if ahead == 1 else 's'} from other programs"
    if activity.serving_s is None:
        return f"Waiting for {requests} — your message is next"
    running = f"Serving a request from another program ({activity.serving_s:.0f} s)"
    if ahead:
        return f"{running} — then {requests}, then your message"
    return f"{running} — your message is next"


class ServingControl(QObject):
    message = Signal(str, int)  # a status bar message and how long it shows (ms)

    def __init__(
        self,
        client: EngineClient,
        settings: Callable[[], Settings],
        show_waiting: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._settings = settings
        self._show_waiting = show_waiting  # the pending answer's note ("" when it started)
        self.server = LocalServer(client, self)
        # the serving state is never hidden; its request count and acceptance shorten first
        self.label = StatusField("", priority=0, short=serving_essentials)
        self.label.setObjectName("status_serving")
        self.label.setStyleSheet("QLabel { border-left: 1px solid palette(mid); padding: 0 8px; }")
        self.label.hide()
        self.action = QAction("&Serve on localhost", self)
        tip = "An OpenAI-compatible server on 127.0.0.1 for this pair; the chat shares it"
        self.action.setToolTip(tip)
        self.action.setStatusTip(tip)
        self.action.setCheckable(True)
        self.action.triggered.connect(self._toggled)
        self.server.status_changed.connect(self._show_status)
        self.loaded: PairLoaded | None = None
        self._mark: int | None = None  # the queue's place when the waiting chat job was sent
        self._wait_timer = QTimer(self)
        self._wait_timer.setInterval(WAIT_MS)
        self._wait_timer.timeout.connect(self._tell_wait)
        client.started.connect(self.chat_started)
        client.done.connect(lambda _done: self.chat_started())

    @property
    def serving(self) -> bool:
        return self.server.serving

    # --- on and off ----------------------------------------------------------------------

    def _toggled(self, on: bool) -> None:
        if on:
            self.start()
        else:
            self.server.stop()

    def start(self) -> bool:
        """Serve the loaded local pair on 127.0.0.1 (the port from the settings)."""
        loaded = self.loaded
        try:
            if loaded is None or loaded.remote is not None:
                raise SpecDeckError("Load a local pair first: the server answers with it")
            s = self._settings()
            defaults = Sampling(**asdict(s.sampler()), max_tokens=s.max_tokens)
            url = self.server.start(
                s.serve_port,
                model=served_name(loaded),
                defaults=defaults,
                spec=lambda: self._settings().spec(),
            )
        except SpecDeckError as error:
            with signals_blocked(self.action):
                self.action.setChecked(False)
            self.message.emit(f"Not serving: {error}", 10000)
            return False
        with signals_blocked(self.action):
            self.action.setChecked(True)
        self.message.emit(f"Serving {url} (OpenAI-compatible)", 5000)
        return True

    def stop(self, why: str = "") -> None:
        """Stop serving; ``why`` goes to the status bar when there was a server to stop."""
        if not self.serving:
            return
        self.server.stop()
        if why:
            self.message.emit(why, 15000)

    def _show_status(self, text: str) -> None:
        self.label.setText(text)  # its StatusFit shows it while it has a text
        if not text and self.action.isChecked():
            with signals_blocked(self.action):
                self.action.setChecked(False)

    # --- the pair ------------------------------------------------------------------------

    def pair_changed(self, loaded: PairLoaded | None) -> None:
        """The window's pair now (None: none is loaded): serving follows it, in words."""
        self.loaded = loaded
        if not self.serving:
            return
        if loaded is None:
            self.stop(STOPPED_NO_PAIR)
        elif loaded.remote is not None:
            self.stop(STOPPED_REMOTE)  # the pair bar names the server: the words must fit
        else:
            name = served_name(loaded)
            if name != self.server.model:
                self.server.model = name
                self.message.emit(f"Serving now answers with {name}", 10000)

    # --- a chat message that waits its turn ----------------------------------------------

    def chat_sent(self) -> None:
        """A chat job is queued now: while the served requests before it go first, say so."""
        self._mark = self.server.mark()
        if self._mark is None:
            return
        self._tell_wait()
        self._wait_timer.start()

    def chat_started(self) -> None:
        """The chat job's turn came (or it ended without one)."""
        if self._mark is None:
            return
        self._mark = None
        self._wait_timer.stop()
        self._show_waiting("")

    def _tell_wait(self) -> None:
        mark = self._mark
        activity = self.server.activity(mark) if mark is not None else None
        self._show_waiting(waiting_words(activity) if activity is not None else "")

    def close(self) -> None:
        self._wait_timer.stop()
        self._mark = None
        self.server.stop()
