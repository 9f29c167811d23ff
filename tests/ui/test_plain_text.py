"""Text from outside is never Qt rich text.

Hostile strings are planted in every source the window shows — a stored verdict and title, a
chat template's error, a model path, Hub file names and model metadata, GPU names, a Lab suite,
a Lab result file and a remote server's HTTP reason phrase, a saved pair's name — and then every
label, tooltip, item and message box of the window, the wizard and the Lab tab is walked. A
test fails when a widget would take such text for markup, or when anything opens the sentinel
file its ``<img src>`` names (Linux inotify ``IN_OPEN``). Real widgets, the real engine
process, a real local HTTP server and the fake Hub on 127.0.0.1.
"""

from __future__ import annotations

import ctypes
import html
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import QAbstractItemModel, QModelIndex, QObject, QPoint, Qt, QTimer, Slot
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QGraphicsTextItem,
    QGraphicsView,
    QLabel,
    QMessageBox,
    QTabBar,
    QToolTip,
    QWidget,
)

from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.config import DraftSource
from app.engine.llama.hardware import Device, Hardware
from app.models.catalog import Catalog, CatalogModel, CatalogPair
from app.models.library import Library, Profile
from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings
from app.ui.pair_chooser import SavedPairsDialog
from app.ui.window_layout import WindowLayout
from app.ui.wizard.wizard import PairWizard
from tests.ggufs import spm_tokens, write_gguf
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.ui.conftest import load

MARK = "HOSTILE"
RAW = f"<b>{MARK}"  # present only where the text is still markup, not shown as text
SENTINEL = "sentinel.png"
FAST = Settings(max_tokens=8, n_ctx=512, temperature=0.0, seed=1, n_threads=1, baseline=False)
GIB = 1 << 30
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


def hostile(src: str) -> str:
    """Markup that loads ``src`` when rendered, with a link and a script for good measure."""
    return f'<b>{MARK}</b><img src="{src}"><a href="x">link</a><script>alert(1)</script>'


# A file name holds no "/": unclosed tags and an image relative to the working directory.
HOSTILE_NAME = f"<b>{MARK}<img src={SENTINEL}><a href=x>link<script>x"


class OpenWatch:
    """Whether anyone opened a file since the watch began (Linux inotify, IN_OPEN)."""

    IN_OPEN = 0x20

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN) < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {path}")
        self.opens = 0

    def opened(self) -> bool:
        try:
            while os.read(self.fd, 4096):
                self.opens += 1
        except BlockingIOError:
            pass
        return self.opens > 0

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def sentinel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, OpenWatch]]:
    """A real image file the hostile markup points at, watched; relative names resolve to it."""
    path = tmp_path / SENTINEL
    path.write_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
    monkeypatch.chdir(tmp_path)
    watch = OpenWatch(path)
    try:
        yield path, watch
    finally:
        watch.close()


# --- the walk -------------------------------------------------------------------------------


def _indexes(model: QAbstractItemModel, parent: QModelIndex | None = None) -> Iterator[QModelIndex]:
    parent = parent if parent is not None else QModelIndex()
    try:
        columns = model.columnCount(parent)
    except TypeError:  # a list model: one column, and columnCount is private
        columns = 1
    for row in range(model.rowCount(parent)):
        for column in range(columns):
            index = model.index(row, column, parent)
            yield index
            if column == 0 and model.rowCount(index) > 0:
                yield from _indexes(model, index)


def _tips(widget: QWidget) -> list[tuple[str, str]]:
    """(where, tooltip) for the widget, its items and its tabs."""
    name = f"{type(widget).__name__} {widget.objectName()!r}"
    tips = [(name, widget.toolTip())]
    if isinstance(widget, QAbstractItemView) and widget.model() is not None:
        for index in _indexes(widget.model()):
            tip = index.data(Qt.ItemDataRole.ToolTipRole)
            if isinstance(tip, str):
                tips.append((f"{name} item {index.row()},{index.column()}", tip))
    if isinstance(widget, QTabBar):
        tips += [(f"{name} tab {i}", widget.tabToolTip(i)) for i in range(widget.count())]
    return tips


def _as_seen(text: str, rich: bool) -> str:
    """What a person reads: markup the app composed around escaped text, taken apart."""
    return html.unescape(re.sub(r"<[^>]*>", "", text)) if rich else text


def markup_leaks(shown: list[str] | None = None) -> list[str]:
    """Every widget that would take planted text for markup; ``shown`` collects the planted
    text as people read it (so a test knows its sources did reach the widgets)."""
    leaks = []
    for widget in QApplication.allWidgets():
        name = f"{type(widget).__name__} {widget.objectName()!r}"
        if isinstance(widget, QLabel) and MARK in widget.text():
            text = widget.text()
            rich = widget.textFormat() == Qt.TextFormat.RichText or (
                widget.textFormat() == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text)
            )
            if rich and RAW in text:
                leaks.append(f"{name} takes {text[:160]!r} for markup")
            elif shown is not None:
                shown.append(_as_seen(text, rich))
        for where, tip in _tips(widget):
            if RAW in tip:  # a tooltip has no text format: raw markup is rendered
                leaks.append(f"{where}: the tooltip {tip[:160]!r} is markup")
            elif MARK in tip and shown is not None:
                shown.append(_as_seen(tip, GuiQt.mightBeRichText(tip)))
        if isinstance(widget, QGraphicsView) and widget.scene() is not None:
            for item in widget.scene().items():  # pyqtgraph's labels are rich text items
                if not isinstance(item, QGraphicsTextItem):
                    continue
                seen = item.toPlainText()
                if MARK in seen and RAW not in seen:
                    leaks.append(f"{name}: a graphics label rendered {item.toHtml()[:160]!r}")
    return leaks


def render_everything(qapp: QApplication) -> None:
    """Lay out and paint every label and show every tooltip that holds planted text, as a
    person moving the pointer around would."""
    for widget in QApplication.allWidgets():
        if isinstance(widget, QLabel) and MARK in widget.text():
            widget.sizeHint()
            widget.grab()
        for _where, tip in _tips(widget):
            if MARK in tip:
                QToolTip.showText(QPoint(10, 10), tip, widget)
                qapp.processEvents()
    QToolTip.hideText()
    for widget in QApplication.topLevelWidgets():
        if widget.isVisible():
            widget.grab()
    qapp.processEvents()


def check_plain(qapp: QApplication, watch: OpenWatch, *, expect: tuple[str, ...] = ()) -> None:
    render_everything(qapp)
    shown: list[str] = []
    leaks = markup_leaks(shown)
    assert not leaks, "\n".join(leaks)
    if sys.platform.startswith("linux"):
        assert not watch.opened(), f"the sentinel was opened {watch.opens} time(s)"
    for text in expect:  # the sources did reach the widgets, as text
        assert any(text in s for s in shown), f"{text!r} is not shown anywhere: {shown}"


# --- the main window ------------------------------------------------------------------------


def test_stored_verdict_title_and_a_model_path_are_text(
    make_window, qtbot, qapp, sentinel, isolated: Path, tmp_path: Path
) -> None:
    path, watch = sentinel
    text = hostile(str(path))
    answer = ChatMessage(
        "assistant", "an answer", stats={"verdict": text, "baseline": {"text": "an answer"}}
    )
    stored = Conversation("poisoned", text, 1.0, 2.0, (ChatMessage("user", "q"), answer))
    ConversationStore().save(stored)
    window = make_window(FAST, autoload=False)
    qtbot.waitExposed(window)
    assert window.conversation.id == "poisoned"  # opened, not skipped
    assert window.chat.verdict.text() == text

    missing = f"{tmp_path}/models/{text}.gguf"  # a Hub file name may hold <, > and "
    with qtbot.waitSignal(window.failed, timeout=60_000):
        window.load_pair(missing, None, DraftSource.NGRAM)
    assert "File not found" in window.chat.error_banner.label.text()
    window.settings_panel.fields["seed"].edit.setText(text)
    window.settings_panel.fields["seed"].edit.textEdited.emit(text)
    check_plain(qapp, watch, expect=(text, f"no model file at {missing}"))


def test_a_chat_template_error_and_the_title_typed_by_the_person_are_text(
    make_window, qtbot, qapp, sentinel, tmp_path: Path
) -> None:
    path, watch = sentinel
    text = hostile(str(path))
    failing = write_tiny_llama(
        tmp_path / "raises.gguf", seed=1, chat_template=f"{{{{ raise_exception('{text}') }}}}"
    )
    window = make_window(FAST, autoload=False)
    load(window, qtbot, failing, None)
    with qtbot.waitSignal(window.failed, timeout=60_000) as failed:
        window.chat.input.setPlainText(text)  # the first message is the conversation's title
        window.chat.input.submit()
    assert MARK in failed.args[0].message
    qtbot.waitUntil(lambda: not window.client.generating, timeout=30_000)
    assert MARK in window.chat.error_banner.label.text()
    check_plain(qapp, watch, expect=(text,))


def test_a_saved_pair_name_is_text_in_the_dialog_and_its_question(
    qtbot, qapp, sentinel, isolated: Path, tiny_pair: tuple[Path, Path]
) -> None:
    _path, watch = sentinel
    name = hostile(SENTINEL)  # a pair name is at most 120 characters: relative to the cwd
    library = Library()
    model = library.import_gguf(tiny_pair[0])
    library.save_profile(Profile(name=name, target=model.id, draft=None))
    library.save_profile(Profile(name="other", target=model.id, draft=None))
    dialog = SavedPairsDialog(library, None, name)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.rename("other", name)  # "already a pair named …": the name again
    assert MARK in dialog.message.text()
    items = [dialog.list.item(i).data(256) for i in range(dialog.list.count())]
    dialog.list.setCurrentRow(items.index(name))
    asked: list[str] = []
    leaks: list[str] = []

    def answer() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, answer)
            return
        try:  # the question, while it is on screen
            asked.append(box.text())
            render_everything(qapp)
            leaks.extend(markup_leaks())
        finally:
            box.button(QMessageBox.StandardButton.No).click()

    QTimer.singleShot(0, answer)
    dialog._ask_delete()
    assert asked and name in asked[0]
    assert not leaks, "\n".join(leaks)
    assert name in library.profiles  # No was answered
    check_plain(qapp, watch)


# --- the Lab ----------------------------------------------------------------------------------


class _Server(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose second completion fails with ``reason``."""

    protocol_version = "HTTP/1.1"
    reason = ""
    requests = 0
    fail_at = 2

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).requests += 1
        if type(self).requests == type(self).fail_at:
            body = b"{}"
            self.send_response(503, type(self).reason)
        else:
            body = json.dumps(
                {
                    "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"completion_tokens": 4},
                    "timings": {"prompt_ms": 1.0, "predicted_n": 4, "predicted_ms": 8.0},
                }
            ).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class EtaSeen(QObject):
    """What the Lab's ETA label says after each progress report, rendered as shown."""

    def __init__(self, lab: QWidget) -> None:
        super().__init__(lab)
        self.eta: QLabel = lab.eta  # type: ignore[attr-defined]
        self.texts: list[str] = []

    @Slot(object)
    def progressed(self, _progress: object) -> None:
        self.eta.grab()
        rich = GuiQt.mightBeRichText(self.eta.text())
        plain = self.eta.textFormat() == Qt.TextFormat.PlainText
        self.texts.append(self.eta.text() if plain or not rich else "(markup)")


@pytest.fixture
def remote_server() -> Iterator[tuple[str, type[_Server]]]:
    handler = type("Handler", (_Server,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_lab_suite_result_file_and_server_reason_are_text(
    make_window, qtbot, qapp, sentinel, tmp_path: Path, tiny_pair, remote_server
) -> None:
    path, watch = sentinel
    text = hostile(str(path))
    url, handler = remote_server
    handler.reason = text
    window = make_window(FAST, autoload=False)
    window.side.setCurrentIndex(2)  # the Lab
    lab = window.lab
    lab.results_dir = tmp_path / "lab"

    lab.target.setText(f"{tmp_path}/{text}.gguf")
    assert not lab.start() and MARK in lab.message.text()
    check_plain(qapp, watch, expect=(f"<b>{MARK}</b><img",))

    suite = tmp_path / "suite.jsonl"
    category = f"<b>{MARK}</b><img src={SENTINEL}>"
    suite.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "category": category, "prompt": f"Count to {i}."}) + "\n"
            for i in range(3)
        )
    )
    lab.target.setText(str(tiny_pair[0]))
    for row in range(lab.suites.count()):
        lab.suites.item(row).setCheckState(Qt.CheckState.Unchecked)
    lab.add_suite_file(suite)
    lab.configs.setPlainText(f"srv:server={url}")
    lab.max_tokens.setValue(8)
    with qtbot.waitSignal(lab.run_finished, timeout=120_000) as ended:
        assert lab.start()
    assert ended.args[0].error and MARK in ended.args[0].error  # the server's reason phrase
    assert MARK in lab.message.text()
    # the reason phrase is cut to one short line (app.remote.client), so its start is what shows
    check_plain(qapp, watch, expect=(f"<b>{MARK}</b><img",))

    # The result file as someone else wrote it: a hostile claim category, then prompt ids
    # (hostile phases and ids are refused when the file is read: app.lab.results).
    log = lab.log_path
    assert log is not None
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    plan = lines[0]["plan"]
    plan["claim"] = {"threshold": 1.3, "category": category, "config": None}
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines))
    handler.fail_at = 0  # the server answers from now on
    lab.show_results(edited)
    assert MARK in lab.verdict.text(), (lab.message.text(), lab.verdict.text())
    with qtbot.waitSignal(lab.run_finished, timeout=120_000):
        assert lab.resume()
    check_plain(qapp, watch)

    done = {r["prompt"] for r in lines[1:] if r.get("kind") == "prompt"}
    for prompt in plan["prompts"]:
        if prompt["id"] not in done:
            prompt["id"] = f"{text}-{prompt['id']}"
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines))
    lab.show_results(edited)
    assert "Cannot read the results" in lab.message.text()
    check_plain(qapp, watch)

    damaged = tmp_path / f"{HOSTILE_NAME}.jsonl"
    damaged.write_text("not a result file\n")
    lab.show_results(damaged)
    assert MARK in lab.message.text()
    check_plain(qapp, watch, expect=(HOSTILE_NAME,))


# --- the wizard ---------------------------------------------------------------------------------


def test_the_wizard_shows_hub_names_metadata_and_paths_as_text(
    qtbot, qapp, sentinel, fake_hub: FakeHub, tmp_path: Path
) -> None:
    path, watch = sentinel
    text = hostile(str(path))
    target = write_gguf(tmp_path / "hub" / "t.gguf", arch=text, name=text).read_bytes()
    draft = write_gguf(tmp_path / "hub" / "d.gguf", arch=text, name=text, n_layer=1).read_bytes()
    fake_hub.add(FakeRepo("acme/Tiny-GGUF", {f"{HOSTILE_NAME}-Q8_0.gguf": target}, downloads=9))
    fake_hub.add(FakeRepo("acme/TinyDraft-GGUF", {f"{HOSTILE_NAME}-Q4_0.gguf": draft}))
    local = tmp_path / HOSTILE_NAME
    local.mkdir()
    write_tiny_llama(local / "draft.gguf", seed=1)
    write_gguf(local / "stranger.gguf", tokens=spm_tokens(tweak={300: text}))
    (local / "broken.gguf").write_bytes(b"GGUF but not really")
    catalog = Catalog(
        (
            CatalogModel("tiny", "acme/Tiny-GGUF", "tiny", 1.0, "Q8_0", text),
            CatalogModel("d", "acme/TinyDraft-GGUF", "tiny", 0.1, "Q4_0", text, draft_only=True),
        ),
        (CatalogPair("tiny", "d"),),
    )
    gpu = Device("CUDA0", text, "GPU", 4 * GIB, 8 * GIB)
    wizard = PairWizard(
        Library(),
        catalog,
        hardware=Hardware("CUDA", (gpu,), 16 * GIB, 8 * GIB, 2),
        models_root=tmp_path / "models",
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        check_plain(qapp, watch, expect=(f"<b>{MARK}</b><img",))  # the GPU's name
        wizard.next()
        page = wizard.page_target
        page.tabs.setCurrentIndex(page.local_tab)
        page.add_local_file(str(local / "broken.gguf"))
        qtbot.waitUntil(lambda: "Not usable" in page.local_status.text(), timeout=10_000)
        page.add_local_file(str(local / "draft.gguf"))
        qtbot.waitUntil(lambda: page.local_list.count() >= 1, timeout=10_000)
        check_plain(qapp, watch, expect=(HOSTILE_NAME,))
        page.tabs.setCurrentIndex(0)
        page.catalog_list.setCurrentRow(0)
        wizard.next()

        page = wizard.page_quant
        qtbot.waitUntil(lambda: page.isComplete() or page.retry.isVisible(), timeout=10_000)
        assert page.isComplete(), page.status.text()
        assert MARK in page.status.text()  # the architecture from the GGUF header
        check_plain(qapp, watch, expect=(text, HOSTILE_NAME))
        wizard.next()

        page = wizard.page_draft
        qtbot.waitUntil(lambda: not page.busy, timeout=20_000)
        page.add_local_file(str(local / "stranger.gguf"))
        qtbot.waitUntil(lambda: page.table.rowCount() >= 2, timeout=10_000)
        check_plain(qapp, watch, expect=(HOSTILE_NAME, text))
    finally:
        wizard.reject()


# --- start-up with a poisoned conversation ------------------------------------------------------


def _start_window(
    isolated: Path, conversations: dict[str, dict], limit_bytes: int = 1 << 30
) -> tuple[str, float, int]:
    """Start the app's window in a child process on these stored conversations; its output,
    seconds to exit and peak memory. Killed past ``limit_bytes`` or 60 s."""
    folder = isolated / "data" / "conversations"
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in conversations.items():
        (folder / f"{name}.json").write_text(json.dumps(data))
    child = (
        "import time\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.ui.main_window import MainWindow\n"
        "began = time.monotonic()\n"
        "window = MainWindow(autoload=False)\n"
        "window.show()\n"
        "for _ in range(20):\n"
        "    app.processEvents(); window.grab(); time.sleep(0.02)\n"
        "banner = window.chat.notes_banner\n"
        "notes = '' if banner.isHidden() else banner.label.text()\n"
        "print('opened', window.conversation.id, round(time.monotonic() - began, 2), flush=True)\n"
        "print('notes', notes, flush=True)\n"
        "window.close()\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "QT_QPA_PLATFORM": "offscreen"}
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watched = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            break
        if peak > limit_bytes or time.monotonic() - began > 60:
            for spawned in watched.children(recursive=True):  # the engine process too
                spawned.kill()
            process.kill()
            break
        time.sleep(0.05)
    out, err = process.communicate()
    output = out.decode("utf-8", "replace") + err.decode("utf-8", "replace")[-3000:]
    return output, time.monotonic() - began, peak


def _stored(conversation_id: str, title: str, answer: str, **stats: object) -> dict:
    messages = (ChatMessage("user", "hello"), ChatMessage("assistant", answer, stats=stats))
    return Conversation(conversation_id, title, 1.0, 2.0, messages).to_json()


@linux_only
def test_a_stored_verdict_reading_dev_zero_does_not_stop_the_start(isolated: Path) -> None:
    poisoned = _stored("poisoned", "Poisoned", "an answer", verdict='<img src="/dev/zero">')
    output, seconds, peak = _start_window(isolated, {"poisoned": poisoned})
    assert "opened poisoned" in output, f"after {seconds:.1f} s, peak {peak >> 20} MiB: {output}"
    assert peak < 1 << 30 and seconds < 60


def test_a_conversation_that_cannot_be_shown_is_skipped_and_named(isolated: Path) -> None:
    broken = _stored("broken", "Broken surrogate", "text \ud800 with a lone surrogate")
    broken["updated"] = 3.0  # the newest: the one a start opens
    fine = _stored("fine", "Fine", "a fine answer")
    output, seconds, peak = _start_window(isolated, {"broken": broken, "fine": fine})
    assert "opened " in output, output
    opened = output.split("opened ", 1)[1].split()[0]
    notes = output.split("notes ", 1)[1]
    if opened == "broken":  # views that take a lone surrogate show it: nothing to skip
        assert "skipped" not in notes, output
        return
    assert opened == "fine", output
    assert "Broken surrogate" in notes and "broken.json" in notes and "skipped" in notes


def test_a_conversation_the_last_start_died_showing_is_not_reopened(
    isolated: Path, make_window
) -> None:
    from app.ui.open_guard import OPENING

    ConversationStore().save(
        Conversation.new("Killer").with_message(ChatMessage("user", "the newest"))
    )
    killer = ConversationStore().list()[0]
    older = Conversation("older", "Older", 1.0, 1.5, (ChatMessage("user", "older"),))
    ConversationStore().save(older)
    # What a start that died while showing "Killer" leaves behind.
    WindowLayout(isolated / "config").set_value(OPENING, killer.id)
    window = make_window(autoload=False)
    assert window.conversation.id == "older"
    assert killer.id in window.conversations.ids()  # still listed, still on disk
    notes = window.chat.notes_banner.label.text()
    assert "Killer" in notes and "stopped while showing it" in notes
    window.open_conversation(killer.id)  # opened by hand, and the window lives on
    assert window.conversation.id == killer.id
    window.close()
    again = make_window(autoload=False)
    assert again.conversation.id == killer.id  # safe again: the newest opens at start
    assert again.chat.notes_banner.isHidden()


def test_opening_a_conversation_that_cannot_be_shown_says_so(isolated: Path, make_window) -> None:
    store = ConversationStore()
    store.save(Conversation("fine", "Fine", 1.0, 3.0, (ChatMessage("user", "fine"),)))
    broken = ChatMessage("assistant", "text \ud800 with a lone surrogate")
    store.save(Conversation("broken", "Broken", 1.0, 2.0, (ChatMessage("user", "q"), broken)))
    window = make_window(autoload=False)
    assert window.conversation.id == "fine"
    window.open_conversation("broken")
    if window.conversation.id == "broken":  # views that take a lone surrogate show it
        return
    assert window.conversation.messages == ()  # a new chat, not half of the broken one
    assert "Could not show the conversation" in window.chat.error_banner.label.text()
    assert "broken" in window.conversations.ids()
