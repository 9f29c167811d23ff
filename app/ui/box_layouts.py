"""Rows of buttons and columns of widgets, the two layouts most pages and dialogs build."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLayout, QVBoxLayout, QWidget


def button_row(*buttons: QWidget) -> QHBoxLayout:
    """``buttons`` side by side from the left."""
    row = QHBoxLayout()
    for button in buttons:
        row.addWidget(button)
    row.addStretch(1)
    return row


def column(owner: QWidget, *items: QWidget | QLayout, stretch: bool = True) -> QVBoxLayout:
    """``items`` from the top of ``owner`` down; with ``stretch`` the height left over stays
    empty below them."""
    layout = QVBoxLayout(owner)
    for item in items:
        if isinstance(item, QLayout):
            layout.addLayout(item)
        else:
            layout.addWidget(item)
    if stretch:
        layout.addStretch(1)
    return layout
