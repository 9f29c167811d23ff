"""The message typed but not sent when the window closed, offered again at the next start.

Kept as plain UTF-8 beside the settings; read under the same bounds as every stored file (a
FIFO, a device or a huge file put in its place is moved aside, never read to the end).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from app.files.fileio import (
    StoredFileError,
    atomic_write_text,
    error_text,
    move_aside,
    read_text_bounded,
    utf8_form,
)

UNSENT_FILE = "unsent-message.txt"
UNSENT_LIMIT = 4 << 20  # bytes: a pasted file or two; a longer one was never typed here


class UnsentMessage:
    def __init__(self, directory: Path) -> None:
        self.path = directory / UNSENT_FILE

    def read(self) -> tuple[str, list[str]]:
        """The kept message ("" when there is none) and a note for each problem. The file
        stays until ``keep`` replaces it: a crash after the start loses nothing."""
        try:
            return read_text_bounded(self.path, UNSENT_LIMIT, what="unsent message"), []
        except FileNotFoundError:
            return "", []
        except StoredFileError as exc:
            moved = move_aside(self.path, "damaged") if exc.damaged else None
            where = f"; it was moved to {moved.name}" if moved else ""
            return "", [f"{exc}{where}"]
        except OSError as exc:
            return "", [f"cannot read the unsent message {self.path}: {error_text(exc)}"]

    def keep(self, text: str) -> str:
        """Keep ``text`` for the next start (nothing when it is blank); "" on success, else
        why it could not be kept. A lone surrogate (a paste of broken UTF-16) is kept as
        U+FFFD: it has no UTF-8 form."""
        text = utf8_form(text)
        try:
            if text.strip():
                if len(text.encode("utf-8")) > UNSENT_LIMIT:
                    return f"the unsent message is longer than {UNSENT_LIMIT:,} bytes"
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(self.path, text)
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        except OSError as exc:
            return f"cannot keep the unsent message in {self.path}: {error_text(exc)}"
        return ""
