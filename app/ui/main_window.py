"""The main window: pair bar, the chat, settings and charts docks, status bar.

The window builds its parts and wires them; it answers the engine's messages (a pair
loaded, a batch of tokens, an answer done, an error) and runs the chat. Its other rooms:

- ``window_menus``: the menu bar, its actions and shortcuts (``WindowMenus``)
- ``window_docks``: the pair toolbar, the docks and how they share the width
- ``window_theme``: light, dark or the system's theme
- ``pair_loading``: choosing and loading a pair, and undoing a failed load (``window.pairs``)
- ``conversation_saving``: saving with retries, and the save banner
- ``serving``: "Serve on localhost"; ``resource_monitor``: the memory a pair takes, and the
  cyclic collector kept off what lives with it
- ``open_guard``: reopening the latest conversation, unless the window died showing it
"""

from __future__ import annotations

import html
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent, QIcon, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QMainWindow, QPushButton, QScrollArea, QTabWidget

from app.engine.config import DraftSource
from app.engine.events import TextTail, TokenEvent
from app.models.drafting import pair_drafting
from app.remote.chat import RemotePair
from app.store.conversations import Conversation, ConversationStore
from app.store.pending_saves import PendingSaves
from app.store.settings import Settings, SettingsStore
from app.store.unsent import UnsentMessage
from app.ui.answer_verdict import judge_answer
from app.ui.charts import ChartsPanel
from app.ui.chat_panel import ChatPanel
from app.ui.conversation_list import ConversationList
from app.ui.conversation_saving import ConversationSaving
from app.ui.first_run import HubProbe
from app.ui.open_guard import OpenGuard
from app.ui.pair_bar import PairBar
from app.ui.pair_chooser import PairChoice, active_pair_kv_type
from app.ui.pair_loading import PairLoading
from app.ui.plain_text import markup
from app.ui.resource_monitor import CollectorFreeze, memory_in_use
from app.ui.serving import ServingControl
from app.ui.settings_panel import SettingsPanel
from app.ui.status_bar import StatusFields, loaded_message
from app.ui.window_docks import WindowDocks
from app.ui.window_layout import WindowLayout
from app.ui.window_menus import WindowCommands, WindowMenus
from app.ui.window_theme import WindowTheme
from app.workers.chat_session import ChatSession
from app.workers.engine_client import EngineClient
from app.workers.messages import (
    Busy,
    ChatJob,
    EventBatch,
    JobDone,
    PairLoaded,
    Verdict,
    WorkerError,
)

ICON_DIR = Path(__file__).resolve().parents[2] / "resources" / "icons"
NOTES_SHOWN = 6


def is_existing_file(path: str) -> bool:
    """``Path.is_file`` raises for an unreadable folder on the way or a NUL in the text."""
    try:
        return bool(path) and Path(path).is_file()
    except (OSError, ValueError):
        return False


def app_icon() -> QIcon:
    icon = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        path = ICON_DIR / f"specdeck-{size}.png"
        if path.is_file():
            icon.addFile(str(path))
    return icon


class MainWindow(QMainWindow):
    pair_loaded = Signal(object)  # PairLoaded
    answer_finished = Signal(object)  # JobDone
    failed = Signal(object)  # WorkerError

    def __init__(
        self,
        *,
        settings_store: SettingsStore | None = None,
        conversation_store: ConversationStore | None = None,
        autoload: bool = True,
        first_run: bool = False,  # probe the Hub / load the demo pair when no pair is known
    ) -> None:
        super().__init__()
        self.setWindowTitle("SpecDeck")
        self.setWindowIcon(app_icon())
        self.settings_store = settings_store or SettingsStore()
        self.settings: Settings = self.settings_store.load()
        self.store = conversation_store or ConversationStore()
        self.saves = PendingSaves(self.settings_store, self.store)
        self.client = EngineClient(self)
        self.loaded: PairLoaded | None = None
        self._collector = CollectorFreeze()
        self._shown_once = False
        self.layout_file = WindowLayout(self.settings_store.directory)
        self._engine_lost = False  # the engine process died; Reload pair brings it back

        self.pair_bar = PairBar()
        self.chat = ChatPanel(self.settings.colour_style, self.settings.baseline)
        self.settings_panel = SettingsPanel(self.settings)
        self.conversations = ConversationList(self.store)
        self.conversations.unsaved = self.saves.unsaved_conversations
        self.saving = ConversationSaving(
            self.saves,
            self.chat,
            self.conversations,
            lambda: self.conversation.id,
            lambda text, ms: self.statusBar().showMessage(text, ms),
            self,
        )
        self.save_retry = self.saving.retry
        self.charts = ChartsPanel()
        self.side = QTabWidget()
        self.side.addTab(self.settings_panel, "Settings")
        self.side.addTab(self.conversations, "Conversations")
        from app.ui.lab_tab import LabTab  # the Lab: wired in this block and _apply_lab only

        self.lab = LabTab(self.settings, chat_settings=lambda: self.settings)
        # scrolled, so the Lab's plots and tables never set the window's minimum size
        lab_scroll = QScrollArea()
        lab_scroll.setObjectName("labScroll")
        lab_scroll.setWidgetResizable(True)
        lab_scroll.setWidget(self.lab)
        self.side.addTab(lab_scroll, "Lab")
        self.lab.apply_requested.connect(self._apply_lab)
        self.setCentralWidget(self.chat)
        self.setDockNestingEnabled(True)
        self.docks = WindowDocks(self, self.pair_bar, self.side, self.charts)
        self.pair_toolbar = self.docks.pair_toolbar
        self.settings_dock, self.charts_dock = self.docks.settings_dock, self.docks.charts_dock
        self.theme = WindowTheme(
            self, self.layout_file, self.settings_panel, self.chat, self.charts, self._sync_actions
        )
        self.status_fields = StatusFields(self.statusBar())
        self.status = self.status_fields.labels
        # "Serve on localhost": its menu action, its status item, kept in step with the pair
        self.serving = ServingControl(
            self.client, lambda: self.settings, self.chat.show_waiting, self
        )
        self.server, self.serving_label = self.serving.server, self.serving.label
        self.status_fields.add(self.serving_label)  # the serving state, beside the rest
        self.serving.message.connect(self.statusBar().showMessage)
        # the pair chosen, the load in progress, what a failed load puts back
        self.pairs = PairLoading(
            self,
            self.client,
            self.chat,
            self.pair_bar,
            self.settings_panel,
            lambda: self.settings,
            lambda: self.server.url if self.server.serving else "",
            self._show_pair_state,
        )

        self._add_engine_actions()
        self._wire()
        self._add_menus()
        layout_notes = self.layout_file.check()
        self.open_guard = OpenGuard(self.layout_file, self)
        scan = self.store.scan()
        self.session = ChatSession()
        skipped = self.open_guard.reopen_latest(self.store, scan.conversations, self._show_session)
        self.unsent = UnsentMessage(self.settings_store.directory)
        unsent, unsent_notes = self.unsent.read()  # typed, not sent, when the window closed
        if unsent:
            self.chat.input.setPlainText(unsent)
        notes = [*self.settings_store.notes, *scan.notes, *layout_notes, *skipped, *unsent_notes]
        self.show_notes(notes)
        self.docks.fit_to_screen()
        self._docks_restored = self.layout_file.restore(self, self.side)
        self.theme.follow()
        if autoload and is_existing_file(self.settings.target_path):
            self.pairs.kv_type = active_pair_kv_type(self.pairs.name, self.settings.target_path)
            self.load_pair(
                self.settings.target_path,
                self.settings.draft_path or None,
                DraftSource(self.settings.draft_source),
            )
        elif not self.settings.target_path:
            self.pair_bar.show_hint("Choose a pair to start →")
            if first_run:
                self._probe = HubProbe(self)
                self._probe.finished.connect(self._first_start)
        self._show_pair_state()

    def _add_engine_actions(self) -> None:
        """Reload pair (in the error banner, after the engine process died) and Cancel
        (next to the load progress bar)."""
        self.reload_button = QPushButton("Reload pair")
        self.reload_button.setObjectName("reloadPair")
        self.reload_button.hide()
        self.reload_button.clicked.connect(self.reload_pair)
        self.chat.add_error_action(self.reload_button)
        self.cancel_load_button = QPushButton("Cancel")
        self.cancel_load_button.setObjectName("cancelLoad")
        self.cancel_load_button.setToolTip("Stop loading the models")
        self.cancel_load_button.hide()
        self.cancel_load_button.clicked.connect(self.client.cancel_load)
        self.pair_bar.add_beside_progress(self.cancel_load_button)

    def _add_menus(self) -> None:
        """The menu bar (app/ui/window_menus.py); the actions tests and shortcuts reach."""
        chat, side = self.chat, self.docks.show_side
        self.menus = WindowMenus(
            self,
            WindowCommands(
                new_chat=self.new_chat,
                send=chat.input.submit,
                stop=self.stop,
                continue_answer=self.continue_answer,
                regenerate=self.regenerate,
                copy_answer=chat.copy_answer,
                show_conversations=lambda: side(self.conversations),
                export=lambda suffix: self.conversations.export(self.conversation.id, suffix),
                quit=self.close,
                show_settings=lambda: side(self.settings_panel),
                show_lab=lambda: side(self.lab),
                toggle_comparison=chat.compare.toggle,
                set_theme=self.set_theme,
                pair_wizard=self.change_pair,
                pair_files=lambda: self.change_pair(files=True),
                load_demo=self.load_demo,
                choose_remote=self.pairs.choose_remote,
                manage_pairs=self.pair_bar.manage_pairs,
                reload_pair=self.reload_pair,
                cancel_load=self.client.cancel_load,
            ),
            [self.settings_dock.toggleViewAction(), self.charts_dock.toggleViewAction()],
            self.serving.action,
        )
        menus = self.menus
        self.new_chat_action, self.send_action = menus.new_chat_action, menus.send_action
        self.stop_action, self.continue_action = menus.stop_action, menus.continue_action
        self.regenerate_action, self.serve_action = menus.regenerate_action, self.serving.action
        self.settings_panel.refusal_changed.connect(lambda _reason: self._sync_actions())

    def _sync_actions(self) -> None:
        client = self.client
        self.menus.sync(
            self.chat,
            generating=client.generating,
            loading=client.loading,
            loaded=self.loaded is not None,
            theme=self.theme_choice,
        )

    def set_theme(self, choice: str) -> None:  # "light", "dark" or "system"
        self.theme.set_theme(choice)

    @property
    def theme_choice(self) -> str:
        return self.theme.choice

    @property
    def dark(self) -> bool:
        return self.theme.dark

    def _wire(self) -> None:
        self.client.busy.connect(self._on_busy)
        self.client.loaded.connect(self._on_loaded)
        self.client.batch.connect(self._on_batch)
        self.client.verdict.connect(self._on_verdict)
        self.client.done.connect(self._on_done)
        self.client.error.connect(self._on_error)
        self.pair_bar.change_requested.connect(self.change_pair)
        self.pair_bar.files_requested.connect(lambda: self.change_pair(files=True))
        self.pair_bar.remote_requested.connect(self.pairs.choose_remote)
        self.pair_bar.saved_pair_requested.connect(lambda name: self.change_pair(saved=name))
        self.pair_bar.current_renamed.connect(self.pairs.renamed)
        self.pair_bar.demo_requested.connect(self.load_demo)
        self.pair_bar.source_changed.connect(self.pairs.source_changed)
        self.chat.send_requested.connect(self.send)
        self.chat.stop_requested.connect(self.stop)
        self.chat.regenerate_requested.connect(self.regenerate)
        self.chat.continue_requested.connect(self.continue_answer)
        self.chat.new_chat_requested.connect(self.new_chat)
        update = self.settings_panel.update_settings
        self.chat.style_changed.connect(lambda style: update(colour_style=style))
        self.chat.baseline_toggled.connect(lambda on: update(baseline=on))
        self.settings_panel.changed.connect(self._settings_changed)
        self.settings_panel.refusal_changed.connect(self.chat.set_refusal)
        self.conversations.open_requested.connect(self.open_conversation)
        self.conversations.deleted.connect(self._conversation_deleted)
        self.conversations.failed.connect(self._conversation_action_failed)

    # --- layout --------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            self.open_guard.settle_later()
            self.layout_file.restore_splitters(self.chat.splitters())
            self.docks.first_shown(self._docks_restored)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self._shown_once:
            self.docks.follow_width()

    def share_width(self) -> None:  # app/devtools/screenshots.py: the first-run layout
        self.docks.share_width()

    # --- pair ------------------------------------------------------------------------------

    def load_pair(self, target: str, draft: str | None, source: DraftSource) -> int:
        return self.pairs.load_pair(target, draft, source)

    def load_demo(self) -> int:  # the pair bar's Demo pair, the menu's and the first start's
        return self.pairs.load_demo()

    def load_remote(self, pair: RemotePair) -> int:
        return self.pairs.load_remote(pair)

    def change_pair(self, files: bool = False, saved: str | None = None) -> None:
        self.pairs.change_pair(files, saved)

    def apply_pair_choice(self, choice: PairChoice) -> None:
        self.pairs.apply_pair_choice(choice)

    @property
    def pair_kv_type(self) -> str:
        return self.pairs.kv_type

    def _first_start(self, hub_reachable: bool) -> None:
        """No pair yet: the wizard when the Hub answers, else the offline demo pair."""
        if hub_reachable:
            self.change_pair()
            if self.settings.target_path or self.client.loading:
                return
        else:  # news, not a failure: the info banner, not the error one
            self.chat.show_notes(
                markup(
                    "The Hugging Face Hub cannot be reached,",
                    "so SpecDeck starts with the offline demo pair. Use Change pair… when you "
                    "are online.",
                )
            )
        self.load_demo()

    def _apply_lab(self, changes: dict) -> None:
        """A Lab recommendation: its settings, and its drafting when the pair differs."""
        self.settings_panel.update_settings(**changes)
        source = DraftSource(changes["draft_source"])
        draft = changes.get("draft_path") if source is DraftSource.MODEL else None
        target = self.loaded.pair.target_path if self.loaded else self.settings.target_path
        current = (
            (self.loaded.pair.draft_source, self.loaded.pair.draft_path) if self.loaded else None
        )
        if target and current != (source, draft):
            self.load_pair(target, draft, source)

    def reload_pair(self) -> None:
        """Start the engine again with the pair it had before it died."""
        if self.loaded is None:
            self.change_pair()
            return
        pair = self.loaded.pair
        self.reload_button.hide()
        self.chat.hide_error()
        self.load_pair(pair.target_path, pair.draft_path, pair.draft_source)

    def _on_busy(self, message: Busy) -> None:
        if not message.text:
            self._set_loading(None)
            return
        self._set_loading(message.text, message.progress)
        self.statusBar().showMessage(message.text)

    def _set_loading(self, text: str | None, progress: float | None = None) -> None:
        """The pair bar's busy indicator: a percentage while llama.cpp reports one."""
        self.pair_bar.set_busy(text)
        self.pair_bar.set_progress(progress)
        self.cancel_load_button.setVisible(text is not None and self.client.loading)

    def _on_loaded(self, message: PairLoaded) -> None:
        self._collector.after_load()
        if message.restored:  # the failed pair's error came first and undid its choice
            self.statusBar().showMessage(
                f"The pair that was loaded is loaded again ({Path(message.pair.target_path).name})",
                10000,
            )
        self.pairs.before = None
        self.loaded = message
        self.status_fields.show_pair(message)  # no figures of the last pair or answer
        info, source = message.pair, DraftSource(message.pair.draft_source)
        drafting = (
            None if message.remote else pair_drafting(info.target_path, info.draft_path, source)
        )
        self.chat.drafting = self.charts.stats.drafting = drafting
        self.pairs.loaded_key = self.settings.load_key()
        self._engine_lost = False
        self.reload_button.hide()
        self._set_loading(None)
        self._show_pair_state()
        self.settings_panel.show_threads(info.threads)  # what the load chose, and why
        if message.remote is not None:
            self.statusBar().showMessage(f"Chatting with {message.remote.url}", 5000)
            self.serving.pair_changed(message)  # stops serving, and says so after the above
            self.pair_loaded.emit(message)
            return
        changes: dict[str, object] = {
            "target_path": message.pair.target_path,
            "draft_source": DraftSource(message.pair.draft_source).value,
            "pair_name": self.pair_bar.current_name or "",
        }
        if message.pair.draft_path:
            changes["draft_path"] = message.pair.draft_path
        self.settings_panel.update_settings(**changes)
        self.lab.follow_pair(message.pair.target_path, message.pair.draft_path)  # unless edited
        self._update_resources()
        if not message.restored:
            self.statusBar().showMessage(loaded_message(message), 5000)
        self.serving.pair_changed(message)  # serving follows the pair, and says so
        self.pair_loaded.emit(message)

    def _show_pair_state(self) -> None:
        """The pair bar names the pair that is loaded (not one still loading), and Send is
        on only when an answer can start: a pair is loaded, or loading (the message waits)."""
        loaded = self.loaded
        if loaded is None:
            self.pair_bar.show_pair(None, None, DraftSource(self.settings.draft_source))
        elif loaded.remote is not None:
            self.pair_bar.show_remote(loaded.remote)
        else:
            self.pair_bar.show_pair(
                loaded.pair.target_path,
                loaded.pair.draft_path,
                loaded.pair.draft_source,
                self.pairs.name,
            )
        if self.client.loading:
            missing = ""
        elif self._engine_lost:
            missing = "The engine stopped: click Reload pair to start it again"
        elif loaded is None:
            missing = "No model pair is loaded: choose one with Change pair… or click Demo pair"
        else:
            missing = ""
        self.chat.set_no_pair(missing)
        self._sync_actions()

    def _update_resources(self) -> None:
        if self.loaded is None:
            return
        rss = memory_in_use(self.client.engine_pid)
        self.pair_bar.show_resources(self.loaded.pair.device, self.loaded.pair.weights_bytes, rss)
        if self.loaded.remote is None:
            self.status_fields.show_memory(rss, self.loaded.pair.weights_bytes)

    def _on_error(self, message: WorkerError) -> None:
        if message.can_reload:
            self._engine_lost = True
        if message.request_id == self.pairs.request:  # the pair loaded before is kept
            self.pairs.undo()
            if message.unloaded:
                self.loaded = None
                self.serving.pair_changed(None)
        self._set_loading(None)
        self._show_pair_state()
        self.reload_button.setVisible(self._engine_lost and self.loaded is not None)
        self.chat.show_error(f"{message.title}.", message.message)
        self.statusBar().showMessage(f"{message.title}: {message.message}", 10000)
        self.failed.emit(message)

    # --- settings --------------------------------------------------------------------------

    def _settings_changed(self, settings: Settings) -> None:
        old, self.settings = self.settings, settings
        self.saving.save_settings(settings)
        self.pairs.settings_changed(old, settings, self.loaded)

    # --- chat ------------------------------------------------------------------------------

    def send(self, text: str) -> None:
        if self.client.generating or not self._ready_to_answer():
            return
        self.chat.clear_input()
        self.unsent.keep("")  # sent: not offered again after a crash
        self.session.add_user(text)
        # Acknowledged: on disk it survives a crash; when it cannot be written it stays in
        # memory (and in the transcript) and is written at the next save that works.
        self.saving.save_conversation(self.conversation)
        self.conversations.refresh(self.conversation.id)
        self._start_answer(self.session.start(self.settings))

    def continue_answer(self) -> None:
        """More of an answer cut off at the token limit or stopped, appended to the same
        message."""
        if self.client.generating or not self.session.can_continue:
            return
        if self._ready_to_answer():
            self._start_answer(self.session.start_continue(self.settings))

    def _ready_to_answer(self) -> bool:
        """A pair to answer with and settings that were accepted; else the banner says why."""
        if self.loaded is None and not self.client.loading:
            self.chat.show_error(
                "No model pair loaded.", "Click Demo pair (works offline) or Change pair…"
            )
            return False
        if self._engine_lost and not self.client.loading:
            self.chat.show_error(
                "The engine is not running.", "Click Reload pair; your message is kept."
            )
            self.reload_button.setVisible(self.loaded is not None)
            return False
        self.settings_panel.flush_pending()
        refused = self.settings_panel.refusal()
        if refused:
            self.chat.show_error("Not sent.", refused)
            return False
        return True

    def _start_answer(self, job: ChatJob) -> None:
        # a continuation extends the last message: no new "answering…" message below it
        continuing = self.session.continuing
        self.chat.transcript.show_messages(
            self.conversation.messages, pending=not continuing, continuing=continuing
        )
        remote = self.loaded.remote if self.loaded is not None else None
        # a remote pair runs a baseline only on the baseline server it was given
        baseline = job.baseline and (remote is None or remote.baseline_url is not None)
        self.chat.begin_answer(baseline, remote=remote is not None)
        self.status_fields.begin_answer()
        self.charts.reset()
        self.charts.set_remote(remote is not None)
        self.chat.set_generating(True)
        self.serving.chat_sent()  # waiting behind served requests: the pending answer says so
        self.client.chat(job)
        self._sync_actions()

    def stop(self) -> None:
        self.client.cancel()
        self.statusBar().showMessage("Stopping…", 2000)

    def regenerate(self) -> None:
        # checked before the last answer is dropped: a refused regenerate keeps it
        if self.client.generating or not self._ready_to_answer():
            return
        if not self.session.drop_last_answer():
            return
        self.saving.save_conversation(self.conversation)
        self._start_answer(self.session.start(self.settings))

    def new_chat(self) -> None:
        if self.client.generating:
            return
        self.session = ChatSession()
        self.chat.begin_answer(self.settings.baseline)
        self.chat.clear_placeholders()
        self.charts.reset()
        self.status_fields.clear_answer()
        self._show_conversation()

    def open_conversation(self, conversation_id: str) -> None:
        if self.client.generating:
            return
        unsaved = self.saves.unsaved(conversation_id)
        try:
            conversation = unsaved or self.store.load(conversation_id)
        except (OSError, ValueError) as error:
            self.chat.show_error("Could not open the conversation.", str(error))
            return
        self.open_guard.opening(conversation_id)
        try:
            self._show_session(ChatSession(conversation))
        except Exception as error:  # noqa: BLE001 - a stored file must not take the window down
            self._show_session(ChatSession())
            self.chat.show_error(
                "Could not show the conversation.", f"{type(error).__name__}: {error}"
            )
        self.open_guard.settle_later()

    @property
    def conversation(self) -> Conversation:
        return self.session.conversation

    def _show_session(self, session: ChatSession) -> None:
        self.session = session
        self.chat.show_stored_answer(session.last_reply)
        self._show_conversation()

    def _conversation_deleted(self, conversation_id: str) -> None:
        self.saves.forget_conversation(conversation_id)
        if conversation_id == self.conversation.id and not self.client.generating:
            self.new_chat()

    def _conversation_action_failed(self, message: str) -> None:
        self.chat.show_error(message)

    # --- stored state ----------------------------------------------------------------------

    def show_notes(self, notes: list[str]) -> None:
        """What loading refused or repaired, in a banner the person can dismiss."""
        if not notes:
            return
        shown = [html.escape(note) for note in notes[:NOTES_SHOWN]]
        if len(notes) > NOTES_SHOWN:
            shown.append(f"… and {len(notes) - NOTES_SHOWN} more")
        self.chat.show_notes(
            "<b>Some stored data could not be used as it was:</b><br>" + "<br>".join(shown)
        )
        for note in notes:
            print(f"specdeck: {note}", file=sys.stderr)

    def _show_conversation(self, last_events: Sequence[TokenEvent | TextTail] = ()) -> None:
        messages = self.conversation.messages
        session = self.session
        self.chat.set_conversation_state(bool(messages), session.last_answer, session.can_continue)
        self.chat.transcript.show_messages(messages, last_events=last_events)
        self.conversations.refresh(self.conversation.id)
        self._sync_actions()

    def _on_batch(self, batch: EventBatch) -> None:
        self.chat.ingest(batch)
        self.charts.ingest(batch)
        self.status_fields.ingest(batch)

    def _on_verdict(self, verdict: Verdict) -> None:
        judgement = judge_answer(self.charts.stats, verdict.comparison, self.session, self.settings)
        if judgement is None:
            return
        self.chat.show_judgement(judgement)
        self.charts.set_verdict(judgement.text)

    def _on_done(self, done: JobDone) -> None:
        self.chat.set_generating(False)
        stream = self.chat.answer_stream()
        if self.session.finish(done, stream, self.loaded) is not None:
            self.saving.save_conversation(self.conversation)
        self._show_conversation(stream)
        judgement = self.session.judgement
        self.chat.answer_done(judgement is not None and judgement.divergence is not None)
        spec, base = done.speculative, done.baseline
        self.status_fields.done(spec, base)
        self.charts.settle()
        if done.cancelled:
            lost = self._engine_lost
            self.statusBar().showMessage("The engine crashed." if lost else "Stopped.", 4000)
            if judgement is None:
                what = "engine crashed" if lost else "stopped"
                self.chat.show_stopped(
                    f"{what} — no verdict", f"{what.capitalize()} before the first token."
                )
            if self.session.baseline_asked and base is None:
                self.chat.baseline_not_run("Not run: the answer was stopped before the baseline.")
        self._update_resources()
        self._sync_actions()
        self.answer_finished.emit(done)

    # --- closing ---------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.open_guard.settled()
        self.settings_panel.flush_pending()
        self.layout_file.save(self, self.side, self.chat.splitters())
        if self.client.generating:  # what streamed is kept, as an engine crash keeps it
            stream, spec = self.chat.answer_stream(), self.chat.speculative_summary
            if self.session.interrupt(stream, self.loaded, spec) is not None:
                self.saves.save_conversation(self.conversation)  # written below, or rescued
        self.chat.stop_timers()
        self.charts.stop()
        self.save_retry.stop()
        self.serving.close()  # before the engine: what it runs is cancelled, the thread ends
        if self.client.running:
            self.statusBar().showMessage("Stopping the engine…")
            self.client.shutdown()
        unsent = self.unsent.keep(self.chat.input.toPlainText())
        if unsent:
            print(f"specdeck: {unsent}", file=sys.stderr)
        failure = self.saves.save_settings(self.settings)
        if failure is not None:  # closing never raises; what is unsaved goes somewhere safe
            rescued = self.saves.rescue()
            where = f"copied to {rescued}" if rescued else "lost: no folder could be written"
            print(
                f"specdeck: {failure.describe()}; {failure.waiting} unsaved item(s) {where}",
                file=sys.stderr,
            )
        event.accept()
