"""The desktop app (PySide6). Importing it applies ``qt_guard.protect_none`` first."""

from app.ui.qt_guard import protect_none

protect_none()
