"""The UI tests' own guard: an exception raised in a Qt slot is caught by the autouse
``no_exceptions_in_slots`` fixture, so it fails the test instead of passing unseen."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QObject, Signal

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


class _Emitter(QObject):
    fired = Signal()


@pytest.mark.qt_no_exception_capture
def test_an_exception_in_a_slot_is_caught_by_the_fixture(qapp, no_exceptions_in_slots) -> None:
    emitter = _Emitter()

    def broken() -> None:
        raise AttributeError("'str' object has no attribute 'value'")

    emitter.fired.connect(broken)
    emitter.fired.emit()
    qapp.processEvents()
    caught = list(no_exceptions_in_slots.errors)
    no_exceptions_in_slots.errors.clear()  # caught: this test is about the catching
    assert len(caught) == 1 and "no attribute 'value'" in caught[0]
