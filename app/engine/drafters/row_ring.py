"""The target's rows a head reads, kept by position in a fixed ring (the MTP heads' hidden
rows, the EAGLE-3 encoder's feature rows): per-step work stays flat however deep the answer."""

from __future__ import annotations

import numpy as np

RING_ROWS = 2048  # rows kept by position; a longer prefill keeps its tail only


class RowRing:
    """``width``-wide float32 rows by position, the last ``RING_ROWS`` positions written."""

    def __init__(self, width: int) -> None:
        self._rows = np.zeros((RING_ROWS, width), dtype=np.float32)
        self._row_pos = np.full(RING_ROWS, -1, dtype=np.int64)
        self._at = self._rows.ctypes.data  # rows go to llama.cpp by address
        self._row_bytes = width * 4

    def put(self, first_pos: int, rows: np.ndarray) -> None:
        """Rows for positions ``first_pos``, ``first_pos + 1``, …"""
        n = len(rows)
        keep = min(n, RING_ROWS)
        if keep <= 8:  # a step's few rows: cheaper one by one than through index arrays
            for k in range(n - keep, n):
                slot = (first_pos + k) % RING_ROWS
                self._rows[slot] = rows[k]
                self._row_pos[slot] = first_pos + k
            return
        positions = np.arange(first_pos + n - keep, first_pos + n, dtype=np.int64)
        slots = positions % RING_ROWS
        self._rows[slots] = rows[n - keep :]
        self._row_pos[slots] = positions

    def _slot(self, position: int) -> int | None:
        if position < 0:
            return None
        slot = position % RING_ROWS
        return slot if self._row_pos[slot] == position else None

    def get(self, position: int) -> np.ndarray | None:
        """The row of ``position`` (a view into the ring); None where it holds none."""
        slot = self._slot(position)
        return None if slot is None else self._rows[slot]

    def address(self, position: int) -> int | None:
        """Where the ring holds the row of ``position``; None where it holds none."""
        slot = self._slot(position)
        return None if slot is None else self._at + slot * self._row_bytes
