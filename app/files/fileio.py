"""Small file helpers shared by the stores and the model code.

Stored files are hostile input like any other: every read is bounded, must be a regular
file, valid UTF-8 and (for the JSON stores) a JSON object; a refusal is a ``StoredFileError``
whose message names the file and says what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

TEMP_SUFFIX = ".tmp"
# Levels of nesting a stored JSON file may have: SpecDeck writes a handful. The JSON reader
# takes hundreds, which the code that then copies or writes the document back recursively
# (an upgrade's deep copy, an indented ``json.dumps``) cannot.
MAX_JSON_DEPTH = 64
# A temporary file this old was left by a process killed during a save; a live save takes
# milliseconds, so a second SpecDeck writing right now is never touched.
STALE_TEMP_AGE_S = 60.0


class StoredFileError(ValueError):
    """A stored file that cannot be used; the message names it and the reason.

    ``damaged`` is True when the content is at fault (worth moving aside and starting
    afresh) and False when the file could not be opened (permissions, not a regular file).
    """

    def __init__(self, message: str, *, damaged: bool = True) -> None:
        super().__init__(message)
        self.damaged = damaged


def utf8_form(text: str) -> str:
    """``text`` with each lone surrogate read as U+FFFD, the replacement character. A JSON
    escape such as ``"\\ud800"`` (in a stored conversation, a prompt file, a request) or a
    paste of broken UTF-16 makes one; it has no UTF-8 form, so writing or tokenizing it
    raised."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _temp_prefix(path: Path) -> str:
    return f".{path.name}-"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that a crash leaves either the old or the new file, never a torn one:
    a temporary file in the same folder, fsynced, then ``os.replace``-d over ``path``. A lone
    surrogate is written as U+FFFD (``utf8_form``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(utf8_form(text))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def json_text(
    data: object, *, indent: int | None = 1, sort_keys: bool = False, allow_nan: bool = True
) -> str:
    """JSON for a stored file: readable UTF-8, or ASCII escapes when the data holds a lone
    surrogate (``json.loads`` makes them from "\\ud800"), which UTF-8 cannot encode. With
    ``allow_nan=False`` a NaN or an infinity raises ``ValueError`` instead of being written as
    ``NaN``/``Infinity``, which is not JSON."""
    options: dict[str, Any] = {"indent": indent, "sort_keys": sort_keys, "allow_nan": allow_nan}
    text = json.dumps(data, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, **options)
    return text


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a folder that cannot be opened is no error."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def clean_stale_temps(directory: Path, *, older_than_s: float = STALE_TEMP_AGE_S) -> list[Path]:
    """Remove the temporary files ``atomic_write_text`` leaves when killed mid-save.

    Only this module's own names (``.<file>-<random>.tmp``) are touched; returns those removed.
    A folder that cannot be listed or a file that cannot be removed is skipped.
    """
    removed: list[Path] = []
    now = time.time()
    try:
        candidates = list(directory.glob(f".*{TEMP_SUFFIX}"))
    except OSError:
        return removed
    for candidate in candidates:
        try:
            info = candidate.lstat()
            if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < older_than_s:
                continue
            candidate.unlink()
        except OSError:
            continue
        removed.append(candidate)
    return removed


def read_bytes_bounded(path: Path, limit: int, *, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Raises ``FileNotFoundError`` when it is missing and ``StoredFileError`` for anything else:
    not a regular file (a FIFO would block, a device never ends), too large or unreadable.
    Never reads more than ``limit + 1`` bytes.
    """
    with _open_regular(path, what) as handle:
        info = os.fstat(handle.fileno())
        if info.st_size > limit:
            raise StoredFileError(_too_large(what, path, info.st_size, limit))
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise StoredFileError(
                f"cannot read the {what} {path}: {exc.strerror or exc}", damaged=False
            ) from exc
    if len(data) > limit:  # grew while being read
        raise StoredFileError(_too_large(what, path, len(data), limit))
    return data


def _open_regular(path: Path, what: str) -> BinaryIO:
    """``path`` opened for reading in binary, refused (``StoredFileError``) unless it is a
    regular file; opening never blocks, even on a FIFO with no writer."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoredFileError(
            f"cannot read the {what} {path}: {exc.strerror or exc}", damaged=False
        ) from exc
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise StoredFileError(f"the {what} {path} is not a regular file", damaged=False)
    return handle


def read_text_bounded(path: Path, limit: int, *, what: str = "file") -> str:
    """The text of a regular UTF-8 file of at most ``limit`` bytes: ``read_bytes_bounded``,
    and ``StoredFileError`` when the bytes are not UTF-8."""
    data = read_bytes_bounded(path, limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoredFileError(
            f"the {what} {path} is not UTF-8 text (byte {exc.start} is invalid)"
        ) from None


def _too_large(what: str, path: Path, size: int, limit: int) -> str:
    return (
        f"the {what} {path} is {size:,} bytes, more than the {limit:,} bytes "
        f"such a file can reasonably hold; it was not read"
    )


def read_json_object(path: Path, limit: int, *, what: str = "file") -> dict[str, Any]:
    """A JSON object read from ``path`` under ``read_text_bounded``'s rules.

    Raises ``FileNotFoundError`` when missing, ``StoredFileError`` when the file is not a
    JSON object (syntax errors, nesting too deep for the parser, a list or a number).
    """
    text = read_text_bounded(path, limit, what=what)
    try:
        data = json.loads(text)
    except RecursionError:
        raise StoredFileError(f"the {what} {path} is nested too deeply to be read") from None
    except ValueError as exc:
        raise StoredFileError(f"the {what} {path} is not valid JSON ({exc})") from None
    if _deeper_than(data, MAX_JSON_DEPTH):
        raise StoredFileError(
            f"the {what} {path} is nested too deeply to be read (more than "
            f"{MAX_JSON_DEPTH} levels; SpecDeck writes a few)"
        )
    if not isinstance(data, dict):
        raise StoredFileError(
            f"the {what} {path} holds a JSON {type(data).__name__}, not an object"
        )
    return data


def _deeper_than(data: object, limit: int) -> bool:
    """Whether decoded JSON nests lists and objects more than ``limit`` levels deep; walked
    without recursion."""
    level: list[object] = [data]
    for _ in range(limit):
        level = [
            child
            for node in level
            if isinstance(node, dict | list)
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def move_aside(path: Path, label: str) -> Path | None:
    """Rename an unusable stored file to ``<name>.<label>-<time>`` so that it is kept rather
    than overwritten; returns the new path, or None when it could not be moved."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        extra = f"-{n}" if n else ""
        target = path.with_name(f"{path.name}.{label}-{stamp}{extra}")
        if target.exists():
            continue
        try:
            os.replace(path, target)
        except OSError:
            return None
        return target
    return None


def error_text(exc: BaseException) -> str:
    """An OSError in words a person can act on ("Permission denied", "No space left")."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def file_sha256(path: Path, *, what: str = "file") -> str:
    """The SHA-256 of a regular file, read up to the size it had when opened: a FIFO or a
    device (``/dev/zero`` never ends) is refused with ``StoredFileError``, not hashed."""
    digest = hashlib.sha256()
    with _open_regular(path, what) as handle:
        left = os.fstat(handle.fileno()).st_size
        while left > 0:
            block = handle.read(min(left, 1 << 22))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()
