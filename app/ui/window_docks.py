"""The window's frame around the chat: the pair toolbar, the settings and charts docks, and
how they share the window's width.

Below ``NARROW_WINDOW`` the two docks share one column as tabs instead of squeezing the
chat; above it they stand side by side. The arrangement follows the width whenever it
crosses that line, not only at the first start; a floating dock stays where it was put.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QScrollArea, QTabWidget, QToolBar, QWidget

NARROW_WINDOW = 1280  # px: below this the settings and charts docks share one column as tabs
PREFERRED_SIZE = QSize(1560, 960)  # the first window, where the screen has room for it
FRAME_ROOM = QSize(16, 48)  # px a window manager's title bar and borders may take around it


class WindowDocks:
    def __init__(
        self, window: QMainWindow, pair_bar: QWidget, side: QTabWidget, charts: QWidget
    ) -> None:
        self.window = window
        self.side = side
        self.narrow: bool | None = None  # the docks' arrangement: tabbed (narrow) or side by side
        self.pair_toolbar = self._pair_toolbar(pair_bar)
        self.settings_dock = self._dock("settingsDock", "Settings", side)
        self.charts_dock = self._dock("chartsDock", "Charts", charts)
        window.splitDockWidget(self.settings_dock, self.charts_dock, Qt.Orientation.Horizontal)
        for action in (self.settings_dock.toggleViewAction(), self.charts_dock.toggleViewAction()):
            self.pair_toolbar.addAction(action)

    def _pair_toolbar(self, pair_bar: QWidget) -> QToolBar:
        bar = QToolBar("Model pair", self.window)
        bar.setObjectName("pairToolbar")
        bar.setMovable(False)
        bar.setFloatable(False)
        bar.addWidget(pair_bar)
        self.window.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        return bar

    def _dock(self, name: str, title: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        dock.toggleViewAction().setToolTip(f"Show or hide the {title.lower()} panel")
        self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        return dock

    def show_side(self, page: QWidget) -> None:
        """A page of the side dock (settings, conversations, the Lab), shown and raised."""
        self.settings_dock.show()
        self.settings_dock.raise_()
        for index in range(self.side.count()):
            widget = self.side.widget(index)
            if widget is page or (isinstance(widget, QScrollArea) and widget.widget() is page):
                self.side.setCurrentIndex(index)

    def fit_to_screen(self) -> None:
        """The first window: its preferred size where the screen has room, else the screen's
        available area (less room for the window frame), centred on it. A saved geometry,
        restored after this, replaces it."""
        window = self.window
        screen = window.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            window.resize(PREFERRED_SIZE)
            return
        room = screen.availableGeometry()
        size = PREFERRED_SIZE.boundedTo(room.size() - FRAME_ROOM)
        window.resize(size)
        placed = QRect(room.topLeft(), size)
        placed.moveCenter(room.center())
        window.move(placed.topLeft())

    def first_shown(self, restored: bool) -> None:
        """The window is shown for the first time; ``restored``: the docks were restored as
        the person left them, kept unless they no longer fit."""
        if restored:
            self.narrow = self.settings_dock in self.window.tabifiedDockWidgets(self.charts_dock)
        QTimer.singleShot(0, self.window, self.follow_width)  # once the layout has its size

    def follow_width(self) -> None:
        """Tabbed docks below ``NARROW_WINDOW``, side by side above: whenever the width
        crosses the line, not only at the first start."""
        if self.narrow is None or (self.window.width() < NARROW_WINDOW) != self.narrow:
            self.share_width()

    def share_width(self) -> None:
        """The docks' layout for the window's width: the chat keeps half the width, settings
        and charts share the rest. On a narrow window the two docks share one column as tabs
        instead of squeezing the chat. A floating dock is left where the person put it."""
        window, settings, charts = self.window, self.settings_dock, self.charts_dock
        width = window.width()
        self.narrow = width < NARROW_WINDOW
        docks = [settings, charts]
        if any(dock.isFloating() for dock in docks):
            return
        if self.narrow:
            window.tabifyDockWidget(settings, charts)
            settings.raise_()
            window.resizeDocks([settings], [int(width * 0.42)], Qt.Orientation.Horizontal)
            return
        if settings in window.tabifiedDockWidgets(charts):
            # a tab behind another is open but not visible: it comes back open, unless closed
            opened = charts.toggleViewAction().isChecked()
            window.removeDockWidget(charts)
            window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, charts)
            window.splitDockWidget(settings, charts, Qt.Orientation.Horizontal)
            charts.setVisible(opened)
        window.resizeDocks(docks, [int(width * 0.22), int(width * 0.28)], Qt.Orientation.Horizontal)
