"""llama.cpp's process-wide set-up: the backend, initialised once, and its log.

llama.cpp logs every tensor at load time; errors reach the user through return codes, so the
log is kept quiet. A device that lacks an op a sampler stage needs is said only in a warning,
though: ``logged_by`` runs one call with the log read.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

import llama_cpp

T = TypeVar("T")

_backend_lock = threading.Lock()
_backend_ready = False
_log_capture: list[str] | None = None  # set while a call's warnings are wanted


@llama_cpp.llama_log_callback
def _quiet_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    capture = _log_capture
    if capture is not None and text:
        capture.append(text.decode("utf-8", errors="replace"))


def ensure_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _backend_ready = True


def logged_by(call: Callable[[], T]) -> tuple[T, list[str]]:
    """``call``'s result and the lines llama.cpp logged while it ran (one call at a time)."""
    global _log_capture
    with _backend_lock:
        _log_capture = []
        try:
            result = call()
            lines = _log_capture
        finally:
            _log_capture = None
    return result, lines
