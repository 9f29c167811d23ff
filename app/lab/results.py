"""The lab's result file: JSON lines, appended and fsynced after every prompt.

Line one is the header (plan, lineage, split); then one ``prompt`` record per prompt and
repeat, a ``choice`` record when tuning ends and a ``done`` record at the end. A process
killed mid-write leaves at most a torn last line, which reading drops and resuming cuts off,
so a killed run loses only the prompt it was on.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "specdeck-lab/1"
MAX_LOG_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024


class ResultFileError(ValueError):
    """A result file that cannot be read or resumed; the message says why."""


@dataclass
class ResultLog:
    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def create(path: Path, header: dict[str, Any]) -> ResultLog:
        if path.exists() and path.stat().st_size > 0:
            raise ResultFileError(
                f"{path} already holds results; use `lab resume {path}` or choose another file"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        log = ResultLog(path, {"kind": "header", "format": FORMAT, **header})
        log._append_line(log.header)
        return log

    @staticmethod
    def open(path: Path, *, repair: bool = False) -> ResultLog:
        """Read a result file; with ``repair`` a torn last line is cut off for appending."""
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise ResultFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
        if size > MAX_LOG_BYTES:
            raise ResultFileError(f"{path} is larger than {MAX_LOG_BYTES >> 20} MiB")
        data = path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if repair and len(complete) != len(data):
            with path.open("r+b") as handle:
                handle.truncate(len(complete))
                os.fsync(handle.fileno())
        records: list[dict[str, Any]] = []
        for number, raw in enumerate(complete.splitlines(), start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                raise ResultFileError(f"{path}:{number}: the line is too long to be a record")
            try:
                item = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ResultFileError(f"{path}:{number}: not a lab record ({exc})") from exc
            if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
                raise ResultFileError(f"{path}:{number}: not a lab record")
            records.append(item)
        if not records or records[0]["kind"] != "header" or records[0].get("format") != FORMAT:
            raise ResultFileError(f"{path} is not a SpecDeck lab result file")
        return ResultLog(path, records[0], records[1:])

    def _append_line(self, item: dict[str, Any]) -> None:
        line = json.dumps(item, ensure_ascii=False, allow_nan=False) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def append(self, item: dict[str, Any]) -> None:
        self._append_line(item)
        self.records.append(item)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def done_groups(self) -> set[tuple[str, str, int]]:
        return {(r["phase"], r["prompt"], int(r["repeat"])) for r in self.of_kind("prompt")}

    @property
    def choice(self) -> dict[str, Any] | None:
        found = self.of_kind("choice")
        return found[-1] if found else None

    @property
    def finished(self) -> bool:
        return bool(self.of_kind("done"))
