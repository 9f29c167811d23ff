"""The cores a test runs on. ``THREADS``: the threads a test's llama.cpp passes run on, two,
or one where the test process may use only one core. The suite runs its tests side by side
with a core for each worker (``tests/conftest.py``); llama.cpp's threads spin at a barrier
after every step of a pass, so a second thread on a worker's one core makes every pass wait
for the kernel to switch."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from app.engine.config import usable_cores

THREADS = min(2, len(usable_cores()))

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's"
)


@contextmanager
def held_to_one_core() -> Iterator[set[int]]:
    """This process on the lowest of its cores inside the block (as ``taskset`` or a cpuset
    would hold it), on all of them again after; yields all of them."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        yield allowed
    finally:
        os.sched_setaffinity(0, allowed)
