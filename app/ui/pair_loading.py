"""Choosing and loading the window's pair, and putting the window back when a load fails.

``PairLoading`` keeps what the window says about its pair while a new one loads: the saved
pair's name (``name``, "" for plain files), the KV cache type it was saved with
(``kv_type``), the load settings the loaded pair runs with (``loaded_key``) and the load in
progress (``request``). Until a pair has loaded the pair bar, Send and the answers stay
with the pair loaded now; a pair that fails to load leaves that one loaded, and ``undo``
then describes it again with the name, KV cache type and settings it had (``BeforeLoad``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from PySide6.QtWidgets import QWidget

from app.engine.config import DraftSource
from app.models.drafting import self_drafting_problem
from app.remote.chat import RemotePair
from app.store.settings import LOAD_FIELDS, Settings
from app.ui.chat_panel import ChatPanel
from app.ui.pair_bar import PairBar
from app.ui.pair_chooser import PairChoice, choose_pair, choose_remote
from app.ui.plain_text import markup
from app.ui.settings_panel import SettingsPanel
from app.workers.engine_client import EngineClient
from app.workers.messages import LoadPair, PairLoaded


@dataclass(frozen=True)
class BeforeLoad:
    """What the window had before it started a load, put back when that load fails (the
    pair loaded before stays loaded, so the window must describe it again)."""

    pair_name: str
    kv_type: str
    loaded_key: tuple[object, ...] | None
    settings: dict[str, object] = field(default_factory=dict)  # changed fields, old values


class PairLoading:
    def __init__(
        self,
        parent: QWidget,  # the window: the dialogs' parent
        client: EngineClient,
        chat: ChatPanel,
        pair_bar: PairBar,
        settings_panel: SettingsPanel,
        settings: Callable[[], Settings],  # the window's settings now
        own_url: Callable[[], str],  # the window's own server, "" when it is not serving
        show_pair_state: Callable[[], None],
    ) -> None:
        self._parent = parent
        self._client = client
        self._chat = chat
        self._pair_bar = pair_bar
        self._settings_panel = settings_panel
        self._settings = settings
        self._own_url = own_url
        self._show_pair_state = show_pair_state
        self.kv_type = "f16"  # the KV cache type of the chosen saved pair
        self.name = settings().pair_name  # the chosen saved pair ("" for plain files)
        self.loaded_key: tuple[object, ...] | None = None
        self.request = -1  # the pair load in progress
        self.before: BeforeLoad | None = None  # put back when that load fails

    def load_pair(self, target: str, draft: str | None, source: DraftSource) -> int:
        """Load a pair. Until it has loaded, the pair bar, Send and the answers stay with the
        pair loaded now; a pair that fails to load leaves that one loaded."""
        source = DraftSource(source)
        if source is DraftSource.MTP:
            problem = self_drafting_problem(target)
            if problem is not None:  # a saved "mtp" for a file without heads: n-gram instead
                self._chat.show_notes(markup("Drafting with n-gram lookup instead:", problem))
                source, draft = DraftSource.NGRAM, None
        s = self._settings()
        kv = self.kv_type
        draft_spec = replace(s.draft_spec(draft), kv_type=kv) if draft else None
        self._pair_bar.set_busy(f"Loading {Path(target).name}…")
        return self._load(LoadPair(replace(s.target_spec(target), kv_type=kv), draft_spec, source))

    def load_demo(self) -> int:
        s = self._settings()
        self._pair_bar.set_busy("Preparing the demo pair…")
        before = self._before()
        self.name = ""
        self.kv_type = "f16"
        spec = s.target_spec("")
        load = self._load(LoadPair(spec, s.draft_spec(""), DraftSource.MODEL, demo=True))
        self.before = before
        return load

    def _load(self, request: LoadPair) -> int:
        self.request = self._client.load(request)
        self.before = None
        self._show_pair_state()
        return self.request

    def _before(self, settings: dict[str, object] | None = None) -> BeforeLoad:
        return BeforeLoad(self.name, self.kv_type, self.loaded_key, settings or {})

    def choose_remote(self) -> None:
        s = self._settings()
        last = RemotePair(s.remote_url, s.remote_server, s.remote_baseline_url or None)
        pair = choose_remote(self._parent, last if s.remote_url else None, self._own_url())
        if pair is not None:
            self._settings_panel.update_settings(
                remote_url=pair.url,
                remote_server=pair.server,
                remote_baseline_url=pair.baseline_url or "",
            )
            self.load_remote(pair)

    def load_remote(self, pair: RemotePair) -> int:
        """Chat with a server instead of the local engine (the settings keep the local pair)."""
        self._pair_bar.set_busy(f"Connecting to {pair.url}…")
        self.name = ""
        return self._client.load(LoadPair(self._settings().target_spec(""), None, remote=pair))

    def change_pair(self, files: bool = False, saved: str | None = None) -> None:
        target = self._settings().target_path
        start = str(Path(target).parent) if target else ""
        try:
            choice = choose_pair(self._parent, start, files=files, saved=saved)
        except Exception as error:  # noqa: BLE001 - a broken wizard must not take the app down
            self._chat.show_error("Could not choose a pair.", str(error))
            return
        if choice is not None:
            self.apply_pair_choice(choice)

    def apply_pair_choice(self, choice: PairChoice) -> None:
        """Load a chosen pair with the settings it was saved with (context size, KV cache
        type, draft length); a pair of plain files keeps the window's settings."""
        changes = choice.settings.settings_changes() if choice.settings else {}
        settings = self._settings()
        before = self._before({name: getattr(settings, name) for name in changes})
        self.kv_type = choice.settings.kv_type if choice.settings else "f16"
        self.name = choice.settings.name if choice.settings else ""
        if changes:
            # The new pair loads with these below: the old one is not reloaded for them.
            self.loaded_key = replace(settings, **changes).load_key()  # type: ignore[arg-type]
            self._settings_panel.update_settings(**changes)
        self.load_pair(choice.target_path, choice.draft_path, choice.draft_source)
        self.before = before

    def settings_changed(self, old: Settings, new: Settings, loaded: PairLoaded | None) -> None:
        """A local pair reloads with new load settings; if it cannot, it stays loaded with
        the old ones."""
        local = loaded is not None and loaded.remote is None
        if local and loaded is not None and self.loaded_key != new.load_key():
            before = self._before({name: getattr(old, name) for name in LOAD_FIELDS})
            self.loaded_key = new.load_key()
            pair = loaded.pair
            self.load_pair(pair.target_path, pair.draft_path, pair.draft_source)
            self.before = before

    def undo(self) -> None:
        """A load failed and the pair loaded before is still (or again) loaded: the window
        describes that one again, with the name, KV cache type and settings it had."""
        before, self.before = self.before, None
        if before is None:
            return
        self.name, self.kv_type = before.pair_name, before.kv_type
        if before.settings:
            self.loaded_key = before.loaded_key
            self._settings_panel.update_settings(**before.settings)

    def source_changed(self, source: DraftSource) -> None:
        """The pair bar's drafting choice: the pair loads again drafting that way."""
        settings = self._settings()
        if not settings.target_path:
            return
        draft = settings.draft_path or None
        if source is DraftSource.MTP:
            problem = self_drafting_problem(settings.target_path)
            if problem is not None:
                self._chat.show_error("The target cannot draft for itself:", problem)
                self._show_pair_state()
                return
        if source is DraftSource.MODEL and not draft:
            self._chat.show_error("No draft model chosen yet:", "use Change pair….")
            self._pair_bar.show_pair(settings.target_path, None, DraftSource.NGRAM, self.name)
            return
        self.load_pair(settings.target_path, draft, source)

    def renamed(self, name: str) -> None:
        """The current saved pair was renamed ("" when deleted) in the saved-pairs dialog."""
        self.name = name
        self._settings_panel.update_settings(pair_name=name)
