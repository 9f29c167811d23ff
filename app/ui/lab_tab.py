"""The Lab tab: pick suites and configurations, run them off the UI thread, read the evidence.

The run itself is ``app.lab``'s: a ``LabThread`` drives a ``LabRunner`` (its own engines, so
the chat's engine is untouched) and reports after every prompt; the tab re-reads the result
file, which the runner has fsynced by then, and redraws a strip plot with interquartile boxes,
the summary table, the verdict and the per-category recommendation. Cancel stops between
steps (the engine processes watch the same flag); the file keeps every finished prompt and
``Resume`` continues it. Closing the window cancels a run and, if it has not stopped within
a second, ends its engine processes: the window closes within ``SHUTDOWN_MS``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QCloseEvent, QFontMetrics, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)
from superqt.utils import signals_blocked

from app.engine.config import DraftSource
from app.errors import SpecDeckError
from app.files.fileio import atomic_write_text
from app.files.paths import data_dir
from app.lab.colours import verdict_colour
from app.lab.configs import (
    ConfigError,
    check_drafting,
    describe_changes,
    parse_config,
    settings_changes,
)
from app.lab.plan import Claim, LabPlan
from app.lab.report import CELL_COLUMNS, analysis_of, cell_columns, ordered_cells, to_html
from app.lab.results import ResultFileError, ResultLog
from app.lab.runner import Progress, target_spec
from app.lab.stats import ALL, MIN_HELD_OUT_RUNS, USE, Analysis, Row, repeats_for, rows_from
from app.lab.suites import (
    BUILTIN_CATEGORIES,
    Prompt,
    SuiteError,
    builtin,
    from_conversations,
    load_jsonl,
)
from app.store.conversations import ConversationStore
from app.store.settings import Settings
from app.ui.lab_layout import lay_out
from app.ui.lab_plot import draw_strips
from app.ui.lab_start import LabFinished, LabThread, default_configs, held_out, runs_note
from app.ui.plain_text import plain_label
from app.ui.wheel_focus import wheel_needs_focus

TABLE_COLUMNS = CELL_COLUMNS  # the command line's and the report's columns
REFRESH_S = 1.0  # live redraws of the plot; the full analysis (bootstraps) runs at the end
# The tab fits its dock's width (app/ui/lab_layout.py); the fields scroll their own text:
MIN_FIELD_CHARS = 16  # the target path and the configuration lines
MIN_TEXT_CHARS = 48  # the verdict and messages, so they wrap into lines, not a thin column
NARROWEST_TEXT_CHARS = 20  # in a dock narrower than that, the texts scroll with the tab
TABLE_KEY_COLUMNS = 5  # phase … speedup stay in view; the table scrolls the rest itself
UNBOUNDED = 16_777_215  # QWIDGETSIZE_MAX
CATEGORY_GAP_PX = 18  # between the plot's category labels
SHUTDOWN_MS = 2_000  # closing the window during a run waits at most this long
_detached: set[LabThread] = set()  # runs that outlived a shutdown, kept until they end


class LabTab(QWidget):
    apply_requested = Signal(dict)  # Settings field changes for the chat
    run_finished = Signal(object)  # LabFinished

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        results_dir: Path | None = None,
        chat_settings: Callable[[], Settings] | None = None,
    ) -> None:
        super().__init__()
        settings = settings or Settings()
        # the chat's settings now, for naming what Apply would change
        self.chat_settings = chat_settings or (lambda: settings)
        self.apply_box: QMessageBox | None = None
        self.results_dir = results_dir
        self.threads = settings.n_threads  # the Lab measures with the chat's thread count
        self.worker: LabThread | None = None
        self.log_path: Path | None = None
        self.analysis: Analysis | None = None
        self._plan: LabPlan | None = None
        self._extra_suites: list[Path] = []
        self._last_refresh = 0.0
        self._watched: QWidget | None = None

        self.target = QLineEdit(settings.target_path)
        # what the tab itself put in the fields: the loaded pair replaces it, never an edit
        self._auto_target = settings.target_path
        self._auto_configs = default_configs(settings)
        self._repeats_auto = True  # repeats follow the chosen suites until the person sets them
        self._area: QScrollArea | None = None  # the dock's scroll area, when in one
        self._room = UNBOUNDED  # px of the tab the dock shows (unbounded outside a dock)
        self.target.setPlaceholderText("target GGUF")
        self.browse_button = QPushButton("…")
        self.browse_button.clicked.connect(self._browse_target)
        self.suites = QListWidget()
        for category in BUILTIN_CATEGORIES:
            item = QListWidgetItem(category)
            item.setCheckState(Qt.CheckState.Checked)
            self.suites.addItem(item)
        self.suites.setMaximumHeight(110)
        self.suites.itemChanged.connect(lambda _item: self._update_runs_note())
        self.my_chats = QCheckBox("my recent chat prompts (anonymised)")
        self.add_suite_button = QPushButton("Add JSONL suite…")
        self.add_suite_button.clicked.connect(self._add_suite)
        self.configs = QPlainTextEdit(self._auto_configs)
        self.configs.setMaximumHeight(80)
        self.configs.setToolTip(
            "one per line: NAME:key=value,… with keys draft=FILE, ngram[=N], mtp (the "
            "target's own next-token layers), "
            "n=N (fixed), adaptive[=MAX], rule=rejection|match, temp=T, "
            "p_min=P, guard=on|off"
        )
        self.repeats = QSpinBox()
        self.repeats.setRange(1, 20)
        self.repeats.valueChanged.connect(self._repeats_set)
        # whether the runs can lead to a recommendation, and what to raise when they cannot
        self.runs_note = plain_label()
        self.runs_note.setObjectName("labRunsNote")
        self.runs_note.setWordWrap(True)
        self.runs_note.setStyleSheet("font-size: 11px;")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(8, 2048)
        self.max_tokens.setValue(64)
        self.claim_speedup = QDoubleSpinBox()
        self.claim_speedup.setRange(0.1, 10.0)
        self.claim_speedup.setSingleStep(0.1)
        self.claim_speedup.setValue(1.3)
        self.claim_speedup.setSuffix("×")
        self.claim_category = QComboBox()
        self.claim_category.addItems([ALL, *BUILTIN_CATEGORIES])
        wheel_needs_focus(self.repeats, self.max_tokens, self.claim_speedup, self.claim_category)

        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        self.open_button = QPushButton("Open results…")
        self.open_button.clicked.connect(self._open_results)
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self.resume)
        self.resume_button.setEnabled(False)
        self.export_button = QPushButton("Export HTML…")
        self.export_button.clicked.connect(self._export_html)
        self.export_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m prompts")
        self.progress.setTextVisible(False)  # shown once a run reports its size
        # Plain text: suites, result files and remote servers write what these say.
        self.eta = plain_label()
        self.message = plain_label()
        self.message.setWordWrap(True)

        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setLabel("left", "speedup vs target alone (×)")
        self.plot.showGrid(y=True, alpha=0.3)
        self.plot.setMinimumHeight(200)
        self.plot.addLegend(offset=(6, 6))
        self.verdict = plain_label("State a claim, then run.")
        self.verdict.setWordWrap(True)
        self.verdict.setObjectName("labVerdict")
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.recommendation = QComboBox()
        self.recommendation.currentIndexChanged.connect(self._recommendation_chosen)
        self.apply_button = QPushButton("Apply to chat")
        self.apply_button.setEnabled(False)
        self.apply_button.clicked.connect(self._apply)
        self.apply_note = plain_label("Apply is off: nothing has run yet.")
        self.apply_note.setObjectName("labApplyNote")
        self.apply_note.setWordWrap(True)
        self.apply_note.setStyleSheet("font-size: 11px;")

        recommended = f"Recommended (≥ {MIN_HELD_OUT_RUNS} held-out runs)"
        self.plot_frame = lay_out(self, self, recommended)  # rows that fit the dock's width
        self._keep_readable()
        self._update_runs_note()

    def _keep_readable(self) -> None:
        """Minimum widths that keep the fields and texts readable (the rows still fit the
        dock: lab_layout wraps and stacks them)."""
        chars = self.fontMetrics().averageCharWidth()
        self.target.setMinimumWidth(chars * MIN_FIELD_CHARS)
        # one configuration per line: a wrapped path would read as a second configuration
        self.configs.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.configs.setMinimumWidth(chars * MIN_FIELD_CHARS)
        for label in self._texts():
            label.setMinimumWidth(chars * MIN_TEXT_CHARS)

    def _texts(self) -> tuple[QLabel, ...]:
        return (self.message, self.verdict, self.runs_note, self.apply_note)

    def _fit_texts_to_view(self) -> None:
        """The texts wrap within the part of the tab the dock shows (a verdict as wide as the
        tab was cut at the dock's edge), and the table is no wider than it."""
        area = self._area
        if area is None:
            return
        layout = self.layout()
        if layout is None:
            return
        margins = layout.contentsMargins()
        width = area.viewport().width() - margins.left() - margins.right()
        chars = self.fontMetrics().averageCharWidth()
        width = max(width, chars * NARROWEST_TEXT_CHARS)
        for label in self._texts():  # they wrap: a wrapped label's own hint (288 px) is wider
            label.setMaximumWidth(width)  # than a 300 px dock shows
            label.setMinimumWidth(min(chars * MIN_TEXT_CHARS, width))
        self._room = width
        self._fit_table_to_key_columns()

    def _fit_plot_to_categories(self, labels: list[str]) -> None:
        """Wide enough for every category's full name side by side."""
        metrics = QFontMetrics(self.plot.font())
        widest = max((metrics.horizontalAdvance(label) for label in labels), default=0)
        left_axis = self.plot.getAxis("left").width()
        self.plot.setMinimumWidth(int(left_axis + len(labels) * (widest + CATEGORY_GAP_PX)))

    def _fit_table_to_key_columns(self) -> None:
        columns = sum(self.table.columnWidth(c) for c in range(TABLE_KEY_COLUMNS))
        frame = 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width()
        # phase … speedup in view where the dock has room; in a narrower one the table
        # scrolls its own columns (as wide as them, it held the tab wider than the dock)
        self.table.setMinimumWidth(min(columns + frame, self._room))

    # --- the starting configuration ----------------------------------------------------

    def follow_pair(self, target: str, draft: str | None) -> None:
        """The loaded pair becomes the starting configuration: the target, and ``draft=``
        configurations for its draft; a field the person edited is left as they wrote it."""
        if self.target.text().strip() == self._auto_target.strip():
            self.target.setText(target)
            self._auto_target = target
        configs = default_configs(Settings(target_path=target, draft_path=draft or ""))
        if self.configs.toPlainText().strip() == self._auto_configs.strip():
            self.configs.setPlainText(configs)
            self._auto_configs = configs
        self._update_runs_note()

    def _repeats_set(self, _value: int) -> None:
        self._repeats_auto = False  # the person chose: the tab says what it means, no more
        self._update_runs_note()

    def _chosen_prompts(self, *, chats: bool = True) -> list[Prompt]:
        prompts: list[Prompt] = []
        chosen = []
        for row in range(self.suites.count()):
            item = self.suites.item(row)
            if item.checkState() != Qt.CheckState.Checked:
                continue
            extra = item.data(Qt.ItemDataRole.UserRole)
            if extra:
                prompts += load_jsonl(Path(extra))
            else:
                chosen.append(item.text())
        if chosen:
            prompts += builtin(chosen)
        if chats and self.my_chats.isChecked():
            prompts += from_conversations(ConversationStore())
        return prompts

    def _update_runs_note(self) -> None:
        """Repeats that let every chosen category reach the held-out runs a recommendation
        needs (while the person has not set them), and in words what the runs allow."""
        try:
            held = held_out(self._chosen_prompts(chats=False))
        except (SpecDeckError, ValueError, OSError):
            held = Counter()
        needed = repeats_for(min(held.values())) if held else 1
        if self._repeats_auto and held and self.repeats.value() != needed:
            with signals_blocked(self.repeats):
                self.repeats.setValue(needed)
        self.runs_note.setText(runs_note(held, self.repeats.value()))

    # --- building a plan ------------------------------------------------------------------

    def _browse_target(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Target model", "", "GGUF (*.gguf)")
        if path:
            self.target.setText(path)

    def _add_suite(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Prompt suite", "", "JSON lines (*.jsonl)")
        if path:
            self.add_suite_file(Path(path))

    def add_suite_file(self, path: Path) -> None:
        prompts = load_jsonl(path)  # check now, so a bad file is refused before a run
        self._extra_suites.append(path)
        item = QListWidgetItem(f"{path.name} ({len(prompts)} prompts)")
        item.setCheckState(Qt.CheckState.Checked)
        item.setData(Qt.ItemDataRole.UserRole, str(path))
        self.suites.addItem(item)
        self._update_runs_note()

    def plan(self) -> LabPlan:
        target = self.target.text().strip()
        if not target or not Path(target).is_file():
            raise SuiteError(f"choose a target model file (not found: {target or 'none'})")
        prompts = self._chosen_prompts()
        configs = tuple(
            parse_config(line) for line in self.configs.toPlainText().splitlines() if line.strip()
        )
        for config in configs:
            if (
                not config.remote
                and config.source is DraftSource.MODEL
                and not Path(config.draft or "").is_file()
            ):
                raise ConfigError(f"configuration {config.name}: draft {config.draft} not found")
        check_drafting(configs, target)
        category = self.claim_category.currentText()
        categories = {p.category for p in prompts}
        return LabPlan(
            target=target_spec(target, n_ctx=2048, threads=self.threads),
            configs=configs,
            prompts=tuple(prompts),
            repeats=self.repeats.value(),
            max_tokens=self.max_tokens.value(),
            claim=Claim(
                self.claim_speedup.value(),
                category if category != ALL and category in categories else None,
            ),
        )

    def _new_results_path(self) -> Path:
        folder = self.results_dir or data_dir() / "lab"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / time.strftime("lab-%Y%m%d-%H%M%S.jsonl")

    # --- running ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.worker is not None

    def start(self) -> bool:
        if self.running:
            return False
        try:
            plan = self.plan()
        except (SpecDeckError, ValueError, OSError) as exc:
            self.message.setText(f"Cannot run: {exc}")
            return False
        self._plan = plan
        parts = plan.split
        self.message.setText(
            f"Claim: {plan.claim.describe()}. {len(parts.tuning)} tuning prompts, "
            f"{len(parts.confirmation)} held out for confirmation."
        )
        self._launch(self._new_results_path(), plan)
        return True

    def resume(self) -> bool:
        if self.running or self.log_path is None:
            return False
        self._launch(self.log_path, None)
        return True

    def _launch(self, path: Path, plan: LabPlan | None) -> None:
        self._clear_results()
        self.log_path = path
        self.progress.setRange(0, 0)
        self.eta.setText("loading…")
        thread = LabThread(path, plan)
        thread.progressed.connect(self._on_progress)
        thread.ended.connect(self._on_ended)
        self.worker = thread
        self._set_running(True)
        thread.start()

    def _clear_results(self) -> None:
        """A run starts: the last run's verdict and recommendations go, so they are never
        read as this run's."""
        self.analysis = None
        self.verdict.setStyleSheet("")
        self.verdict.setText(
            "Running: the previous run's verdict is cleared; this run's comes when it ends."
        )
        with signals_blocked(self.recommendation):
            self.recommendation.clear()
        self.table.setRowCount(0)
        self._recommendation_chosen()

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel.set()
            self.eta.setText("stopping after this step…")

    def shutdown(self, timeout_ms: int = SHUTDOWN_MS) -> None:
        """Cancel a run and wait for its thread (the window is closing); an engine that has
        not stopped within half the time is killed, and a thread still running at the end
        is left to finish on its own rather than holding the window."""
        thread = self.worker
        if thread is None:
            return
        thread.cancel.set()
        if not thread.wait(timeout_ms // 2):
            thread.kill()
            thread.wait(timeout_ms - timeout_ms // 2)
        if thread.isRunning():
            self.worker = None
            thread.progressed.disconnect(self._on_progress)
            thread.ended.disconnect(self._on_ended)
            _detached.add(thread)
            thread.finished.connect(lambda: _detached.discard(thread))
            self._set_running(False)
            return
        self._finish_thread()

    def _set_running(self, running: bool) -> None:
        for button in (self.run_button, self.open_button, self.resume_button):
            button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self._recommendation_chosen()  # Apply's note says a run is under way, or not

    def _on_progress(self, progress: Progress) -> None:
        self.progress.setTextVisible(True)
        self.progress.setRange(0, progress.total)
        self.progress.setValue(progress.done)
        eta = "" if progress.eta_s is None else f"ETA {progress.eta_s:.0f} s"
        self.eta.setText(f"{progress.phase} {progress.prompt} {eta}")
        if time.monotonic() - self._last_refresh >= REFRESH_S:
            self._draw_live()

    def _on_ended(self, outcome: LabFinished) -> None:
        self._finish_thread()
        self.progress.setRange(0, max(self.progress.maximum(), 1))
        if outcome.error:
            self.message.setText(f"The run stopped: {outcome.error}")
            self.eta.setText("")
        else:
            self.eta.setText(
                "finished"
                if outcome.finished
                else "cancelled: finished prompts are kept; Resume continues"
            )
        if self.log_path is not None and self.log_path.exists():
            self.show_results(self.log_path)
        self.run_finished.emit(outcome)

    def _finish_thread(self) -> None:
        thread, self.worker = self.worker, None
        if thread is not None:
            thread.wait()
            thread.deleteLater()
        self._set_running(False)

    # --- results ---------------------------------------------------------------------------

    def _open_results(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Lab results", "", "Lab results (*.jsonl)")
        if path:
            self.show_results(Path(path))

    def _draw_live(self) -> None:
        """Only the points: cheap enough to run while the worker holds the CPU."""
        self._last_refresh = time.monotonic()
        if self.log_path is None:
            return
        try:
            log = ResultLog.open(self.log_path)
            plan = LabPlan.from_json(log.header.get("plan") or {})
        except (ResultFileError, ValueError, OSError):
            return
        self._draw(plan, rows_from(log.records), [c.name for c in plan.configs])

    def show_results(self, path: Path | None) -> None:
        if path is None:
            return
        self._last_refresh = time.monotonic()
        try:
            log = ResultLog.open(path)
            plan, analysis = analysis_of(log)
        except (ResultFileError, ValueError, OSError) as exc:
            self.message.setText(f"Cannot read the results: {exc}")
            return
        self.log_path = path
        self._plan = plan
        self.analysis = analysis
        self.resume_button.setEnabled(not self.running and not log.finished)
        self.export_button.setEnabled(bool(analysis.rows))
        self._draw(plan, analysis.rows, analysis.configs)
        self._fill_table(analysis)
        self._show_verdict(analysis)
        self._fill_recommendations(analysis)

    def _draw(self, plan: LabPlan, rows: list[Row], configs: list[str]) -> None:
        draw_strips(self.plot, plan, rows, configs)
        self._fit_plot_to_categories(list(plan.categories))

    def _fill_table(self, analysis: Analysis) -> None:
        cells = ordered_cells(analysis)
        self.table.setRowCount(len(cells))
        for row, cell in enumerate(cells):
            for column, text in enumerate(cell_columns(cell)):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self._fit_table_to_key_columns()

    def _show_verdict(self, analysis: Analysis) -> None:
        verdict = analysis.verdict
        colour = verdict_colour(verdict)
        self.verdict.setStyleSheet(f"color: {colour}; font-size: 14px; font-weight: bold;")
        self.verdict.setText(verdict.describe())

    def _fill_recommendations(self, analysis: Analysis) -> None:
        with signals_blocked(self.recommendation):
            self.recommendation.clear()
            for rec in analysis.recommendations:
                # only a recommendation to use a configuration can be applied
                data = rec.config if rec.status == USE else None
                self.recommendation.addItem(rec.describe(), data)
        self._recommendation_chosen()

    def _recommendation_chosen(self) -> None:
        """Apply is on for a recommendation to use a configuration; else the note says why."""
        usable = bool(self.recommendation.currentData())
        self.apply_button.setEnabled(usable)
        analysis, index = self.analysis, self.recommendation.currentIndex()
        if usable:
            why = ""
        elif self.running:
            why = "a run is under way."
        elif analysis is None:
            why = "nothing has run yet."
        elif 0 <= index < len(analysis.recommendations):
            why = analysis.recommendations[index].describe()
        else:
            why = "this run recommends nothing."
        self.apply_note.setText(f"Apply is off: {why}" if why else "")
        self.apply_note.setVisible(bool(why))

    def recommended_changes(self) -> dict | None:
        name = self.recommendation.currentData()
        if not name or self._plan is None:
            return None
        return settings_changes(self._plan.config(name))

    def _apply(self) -> None:
        """Asks first, naming each chat setting that would change; applies on Yes."""
        changes = self.recommended_changes()
        if changes is None:
            return
        name = self.recommendation.currentData()
        lines = describe_changes(changes, self.chat_settings())
        listed = "\n".join(f"  {line}" for line in lines) or "  (the chat already uses them)"
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Apply to chat")
        box.setTextFormat(Qt.TextFormat.PlainText)
        reloads = any(line.startswith(("drafting:", "draft model:")) for line in lines)
        after = (
            "The pair reloads with the new drafting." if reloads else "The next answer uses them."
        )
        # one plain-text label: names from a result file never become markup
        box.setText(
            f"Make the chat draft with {name}?\n\nThese chat settings change:\n{listed}\n\n{after}"
        )
        box.setStandardButtons(QMessageBox.StandardButton.Apply | QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.finished.connect(lambda _result: self._apply_answered(box, changes))
        self.apply_box = box
        box.open()

    def _apply_answered(self, box: QMessageBox, changes: dict) -> None:
        self.apply_box = None
        box.deleteLater()
        if box.clickedButton() is box.button(QMessageBox.StandardButton.Apply):
            self.apply_requested.emit(changes)

    def _export_html(self) -> None:
        if self.log_path is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "HTML report", str(self.log_path.with_suffix(".html")), "HTML (*.html)"
        )
        if path:
            atomic_write_text(Path(path), to_html(ResultLog.open(self.log_path)))

    # --- closing with the window -------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        viewport = self.parentWidget()
        area = viewport.parentWidget() if viewport is not None else None
        if isinstance(area, QScrollArea) and area is not self._area:
            self._area = area
            area.viewport().installEventFilter(self)
            self._fit_texts_to_view()
        window = self.window()
        if window is not self and window is not self._watched:
            window.installEventFilter(self)
            self._watched = window
        super().showEvent(event)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        area = self._area
        if area is not None and watched is area.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_texts_to_view()
        if watched is self._watched and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)
