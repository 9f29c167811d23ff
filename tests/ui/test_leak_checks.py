"""The after-test checks themselves: what a test leaves running is still found."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QThread, QTimer

from tests.ui.conftest import live_threads_and_timers

pytestmark = pytest.mark.fast


def test_a_timer_without_a_parent_left_running_is_found(qapp) -> None:  # noqa: ANN001
    timer = QTimer()
    timer.start(1000)
    try:
        assert any("QTimer (interval 1000 ms" in p for p in live_threads_and_timers())
    finally:
        timer.stop()
    assert live_threads_and_timers() == []


def test_a_thread_without_a_parent_left_running_is_found(qapp) -> None:  # noqa: ANN001
    thread = QThread()
    thread.setObjectName("left-running")
    thread.start()
    try:
        assert "QThread 'left-running' is still running" in live_threads_and_timers()
    finally:
        thread.quit()
        thread.wait(5000)
    assert live_threads_and_timers() == []
