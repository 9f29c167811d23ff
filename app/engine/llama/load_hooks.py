"""How a model load reports its progress and learns that it was cancelled.

``LlamaModel`` is built deep inside ``Engine``; rather than thread a callback through every
constructor, the engine process installs an observer for the duration of a load and
``LlamaModel.__init__`` hands it to llama.cpp's ``progress_callback``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

# Called with (model file, fraction loaded 0..1); returning False cancels the load.
LoadObserver = Callable[[Path, float], bool]

_observer: ContextVar[LoadObserver | None] = ContextVar("specdeck_load_observer", default=None)


@contextmanager
def observing_loads(observer: LoadObserver) -> Iterator[None]:
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


def current_load_observer() -> LoadObserver | None:
    return _observer.get()
