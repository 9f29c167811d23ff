"""The threads a test's llama.cpp passes run on: two, or one where the test process may use
only one core. The suite runs its tests side by side with a core for each worker
(``tests/conftest.py``); llama.cpp's threads spin at a barrier after every step of a pass,
so a second thread on a worker's one core makes every pass wait for the kernel to switch."""

from __future__ import annotations

from app.engine.config import usable_cores

THREADS = min(2, len(usable_cores()))
