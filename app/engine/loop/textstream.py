"""UTF-8-safe incremental text from token bytes, with stop strings.

A multi-byte character can be split across tokens (byte-fallback vocabularies do this for
every emoji); the decoder holds incomplete bytes back until the character is whole. Text that
could be the start of a stop string is held back too, so a stop string never flashes on screen.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class TextStream:
    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._partial = b""  # the start of a character split across tokens
        self._stop = tuple(s for s in stop if s)
        self._held = ""  # decoded text not yet released because it may begin a stop string
        # what was released, piece by piece: ``text += piece`` on an attribute copies the whole
        # answer at every token (CPython extends a string in place only in a local variable)
        self._released: list[str] = []
        self.stopped = False

    @property
    def text(self) -> str:
        """Everything released so far."""
        if len(self._released) > 1:
            self._released[:] = ["".join(self._released)]
        return self._released[0] if self._released else ""

    def push(self, data: bytes) -> str:
        """Feed one token's bytes; return the text that may be shown now."""
        if self.stopped:
            return ""
        pending = self._held + self._decode(data, final=False)
        if not self._stop:
            self._held = ""
            self._released.append(pending)
            return pending
        hits = [pending.find(s) for s in self._stop if s in pending]
        if hits:
            released = pending[: min(hits)]
            self._held = ""
            self.stopped = True
            self._released.append(released)
            return released
        keep = self._longest_stop_prefix_suffix(pending)
        released = pending[: len(pending) - keep]
        self._held = pending[len(pending) - keep :]
        self._released.append(released)
        return released

    def flush(self) -> str:
        """End of generation: release held text and any dangling partial character."""
        if self.stopped:
            return ""
        tail = self._held + self._decode(b"", final=True)
        self._held = ""
        self._released.append(tail)
        return tail

    def _decode(self, data: bytes, *, final: bool) -> str:
        """What ``data`` completes of the text, an unfinished character kept for the next
        token (``codecs``' incremental decoder, without its Python frame per token)."""
        pending = self._partial + data if self._partial else data
        text, used = codecs.utf_8_decode(pending, "replace", final)
        self._partial = pending[used:]
        return text

    def _longest_stop_prefix_suffix(self, text: str) -> int:
        best = 0
        for stop in self._stop:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
