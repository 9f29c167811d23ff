"""Guard against PySide6 6.12's ``None`` reference leak on CPython < 3.12.

PySide6/shiboken6 6.12.0 return ``None`` from every void method (``label.setText``,
``painter.setPen``, …) without taking a new reference. From CPython 3.12 on ``None`` is
immortal, so nothing happens; on 3.11 each call lowers ``None``'s reference count by one
until the interpreter aborts with "Fatal Python error: none_dealloc" — after a few thousand
calls, i.e. within seconds of painting charts. Some paths leak ``True``/``False`` the same
way. 6.11.x does not have the bug.

The real fix is a dependency pin (``PySide6-Essentials!=6.12.0`` on Python < 3.12) or
Python >= 3.12. Until then ``protect_none`` gives ``None``, ``True`` and ``False`` reference
counts so large that the leak cannot reach zero, which is what 3.12's immortal objects do.
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 60
_applied = False


def affected() -> bool:
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False
    try:
        import shiboken6
    except ImportError:
        return False
    version = tuple(int(p) for p in shiboken6.__version__.split(".")[:2] if p.isdigit())
    return version >= (6, 12)


def protect_none() -> bool:
    """Apply the guard once when this PySide6/CPython combination needs it."""
    global _applied
    if _applied or not affected():
        return _applied
    for singleton in (None, True, False):
        refcount = ctypes.c_ssize_t.from_address(id(singleton))  # ob_refcnt comes first
        refcount.value += _HEADROOM
    _applied = True
    return True
