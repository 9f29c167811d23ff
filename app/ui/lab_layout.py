"""The Lab tab's rows, laid out to fit its dock's width.

A row of five buttons, "repeats … max tokens" and "best configuration ≥ … on …" side by side
made the tab wider than a side dock at 1024 and at 1920 px: the dock scrolled sideways and cut
the verdict. Here the form's fields go under their labels where they do not fit beside them,
pairs of fields stand in two rows, the buttons two to a row, and the plot scrolls sideways
inside its own frame (its category names stay whole and apart).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QListWidget,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

BUTTONS_PER_ROW = 2  # three of ~95 px each made the tab wider than a 300 px dock
PLOT_MIN_WIDTH = 160  # px the plot's frame asks; the plot scrolls inside it when narrower


@dataclass(frozen=True)
class LabRows:
    """The tab's controls, in the order the tab shows them."""

    target: QWidget
    browse: QPushButton
    suites: QListWidget
    my_chats: QCheckBox
    add_suite: QPushButton
    configs: QPlainTextEdit
    numbers: tuple[tuple[str, QWidget], ...]  # ("repeats", box), ("max tokens", box)
    claim: tuple[tuple[str, QWidget], ...]  # ("best configuration ≥", box), ("on", box)
    buttons: tuple[QPushButton, ...]
    runs_note: QLabel
    progress: QProgressBar
    eta: QLabel
    message: QLabel
    verdict: QLabel
    plot: QWidget
    recommended: str
    recommendation: QComboBox
    apply_button: QPushButton
    apply_note: QLabel
    table: QTableWidget


def plot_frame(plot: QWidget) -> QScrollArea:
    """The plot in a frame of its own that scrolls sideways when the dock is narrower than
    the plot's category names."""
    frame = QScrollArea()
    frame.setObjectName("labPlotScroll")
    frame.setFrameShape(QFrame.Shape.NoFrame)
    frame.setWidgetResizable(True)
    frame.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    frame.setWidget(plot)
    frame.setMinimumWidth(PLOT_MIN_WIDTH)
    bar = frame.horizontalScrollBar().sizeHint().height()
    frame.setMinimumHeight(plot.minimumHeight() + bar)
    return frame


def _pairs(pairs: tuple[tuple[str, QWidget], ...]) -> QGridLayout:
    """A label and its field per row: side by side they set a width no dock has."""
    grid = QGridLayout()
    for row, (words, widget) in enumerate(pairs):
        grid.addWidget(QLabel(words), row, 0)
        grid.addWidget(widget, row, 1)
    grid.setColumnStretch(1, 1)
    return grid


def _stacked(*items: QWidget | QLayout) -> QVBoxLayout:
    box = QVBoxLayout()
    for item in items:
        if isinstance(item, QLayout):
            box.addLayout(item)
        else:
            box.addWidget(item)
    return box


def lay_out(owner: QWidget, rows: LabRows) -> QScrollArea:
    """Lay ``rows`` out on ``owner``; returns the plot's frame."""
    form = QFormLayout()
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    target_row = QHBoxLayout()
    target_row.addWidget(rows.target, 1)
    target_row.addWidget(rows.browse)
    form.addRow("Target", target_row)
    extras = QHBoxLayout()
    extras.addWidget(rows.add_suite)
    extras.addStretch(1)
    form.addRow("Suites", _stacked(rows.suites, rows.my_chats, extras))
    form.addRow("Configurations", rows.configs)
    form.addRow("Runs", _pairs(rows.numbers))
    form.addRow("Claim", _pairs(rows.claim))
    buttons = QGridLayout()
    for index, button in enumerate(rows.buttons):
        buttons.addWidget(button, index // BUTTONS_PER_ROW, index % BUTTONS_PER_ROW)
    status = QHBoxLayout()
    status.addWidget(rows.progress, 1)
    status.addWidget(rows.eta)
    recommended = QLabel(rows.recommended)
    recommended.setWordWrap(True)
    rows.recommendation.setSizeAdjustPolicy(
        QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
    )
    rows.recommendation.setMinimumContentsLength(12)  # its list shows each one whole
    apply_row = QHBoxLayout()
    apply_row.addWidget(rows.recommendation, 1)
    apply_row.addWidget(rows.apply_button)
    frame = plot_frame(rows.plot)
    column = QVBoxLayout(owner)
    # the dock has its own frame; 6 px leave a wrapped text its 48-character hint in a 300 px dock
    column.setContentsMargins(6, 6, 6, 6)
    column.addLayout(form)
    column.addWidget(rows.runs_note)
    column.addLayout(buttons)
    column.addLayout(status)
    column.addWidget(rows.message)
    column.addWidget(rows.verdict)
    column.addWidget(frame, 2)
    column.addWidget(recommended)
    column.addLayout(apply_row)
    column.addWidget(rows.apply_note)
    column.addWidget(rows.table, 1)
    return frame
