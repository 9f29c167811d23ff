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
from typing import Annotated, Any

from app.files.fileio import StoredFileError, error_text, read_bytes_bounded
from app.files.values import (
    BadValue,
    Count,
    Finite,
    Flag,
    GivenCount,
    GivenFinite,
    InputSchema,
    Mapping,
    label_of,
    loads,
    one_of,
    text_of,
    validated,
    whole_in,
)

FORMAT = "specdeck-lab/1"
MAX_LOG_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024
PHASES = ("tuning", "confirmation")
MAX_NAME_CHARS = 80  # prompt ids, categories, configuration names (suites and configs allow less)
MAX_REPEAT = 1000
MAX_CPUS = 1 << 16


class ResultFileError(ValueError):
    """A result file that cannot be read or resumed; the message says why."""


# --- the schema of the records: every value the readers use, by its type and range ---------
# A figure present as null is refused (None is only the default for one not written). The
# records are kept as read, keys the schema does not declare included.

Name = Annotated[str, label_of(MAX_NAME_CHARS)]
Digest = Annotated[str, text_of(64)]


class Run(InputSchema):
    """One configuration's figures on one prompt (``runner.measure`` and ``remote``)."""

    tok_s: GivenFinite = None
    ttft_ms: GivenFinite = None
    acceptance: GivenFinite = None
    tokens_per_pass: GivenFinite = None
    itl_p50_ms: GivenFinite = None
    itl_p95_ms: GivenFinite = None
    itl_p99_ms: GivenFinite = None
    host_ms_per_token: GivenFinite = None
    wall_s: GivenFinite = None
    temperature: GivenFinite = None
    baseline_tok_s: GivenFinite = None
    tokens: GivenCount = None
    drafted: GivenCount = None
    accepted: GivenCount = None
    guard_pauses: GivenCount = None
    peak_rss_mb: Finite | None = None
    margin: Finite | None = None
    first_divergence: Count | None = None
    identical: Flag | None = None


class Load(InputSchema):
    """A prompt's CPU times (``interference.between``): seconds, and counts."""

    wall_s: Finite = 0.0
    own_cpu_s: Finite = 0.0
    busy_cpu_s: Finite = 0.0
    cpus: Annotated[int, whole_in(0, MAX_CPUS)] = 1
    threads: Annotated[int, whole_in(0, MAX_CPUS)] = 1


class PromptRecord(InputSchema):
    phase: Annotated[str, one_of(PHASES)]
    prompt: Name
    category: Name
    repeat: Annotated[int, whole_in(0, MAX_REPEAT)]
    baselines: dict[Name, Run]
    runs: dict[Name, Run]
    load: Load | None = None


class LineageTarget(InputSchema):
    sha256: Digest | None = None


class Lineage(InputSchema):
    target: LineageTarget | None = None
    drafts: dict[str, Digest] | None = None  # path: sha256


class Header(InputSchema):
    plan: Mapping  # ``LabPlan.from_json`` reads it, with the plan's own schema
    lineage: Lineage | None = None


class Choice(InputSchema):
    per_category: dict[str, Annotated[str, text_of(40)] | None] | None = None
    claim_config: Annotated[str, text_of(MAX_NAME_CHARS)] | None = None


RECORDS: dict[str, type[InputSchema]] = {
    "header": Header,
    "prompt": PromptRecord,
    "choice": Choice,
}


def check_record(item: dict[str, Any]) -> None:
    """Raises ``BadValue`` unless every value the readers use has its type and range (the
    schema of its kind), so the analysis, the report and resuming never meet a missing key
    or a wrong type."""
    schema = RECORDS.get(item["kind"])
    if schema is not None:
        validated(schema, item, "the record")


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
        log = ResultLog(path, {"kind": "header", "format": FORMAT, **header})
        line = _line(log.header)  # refused before the file exists, never an empty file
        path.parent.mkdir(parents=True, exist_ok=True)
        log._write(line)
        return log

    @staticmethod
    def open(path: Path, *, repair: bool = False) -> ResultLog:
        """Read a result file; with ``repair`` a torn last line is cut off for appending.

        Every record is checked against its schema (``check_record``): a damaged or
        hand-edited file is refused with its line number, never half-read.
        """
        try:
            data = read_bytes_bounded(path, MAX_LOG_BYTES, what="result file")
        except StoredFileError as exc:
            raise ResultFileError(str(exc)) from None
        except OSError as exc:
            raise ResultFileError(f"cannot read {path}: {error_text(exc)}") from exc
        complete = data[: data.rfind(b"\n") + 1]
        records: list[dict[str, Any]] = []
        for number, raw in enumerate(complete.splitlines(), start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                raise ResultFileError(f"{path}:{number}: the line is too long to be a record")
            try:
                item = loads(raw.decode("utf-8"))
            except ValueError as exc:  # not UTF-8, not JSON, NaN/Infinity, nested too deeply
                raise ResultFileError(f"{path}:{number}: not a lab record ({exc})") from None
            if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
                raise ResultFileError(f"{path}:{number}: not a lab record")
            if not records and (item["kind"] != "header" or item.get("format") != FORMAT):
                raise ResultFileError(f"{path} is not a SpecDeck lab result file")
            try:
                check_record(item)
            except BadValue as exc:
                raise ResultFileError(
                    f"{path}:{number}: a damaged {item['kind'][:20]!r} record: {exc}"
                ) from None
            records.append(item)
        if not records:
            raise ResultFileError(f"{path} is not a SpecDeck lab result file")
        if repair and len(complete) != len(data):
            with path.open("r+b") as handle:
                handle.truncate(len(complete))
                os.fsync(handle.fileno())
        return ResultLog(path, records[0], records[1:])

    def _write(self, line: bytes) -> None:
        with self.path.open("ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def append(self, item: dict[str, Any]) -> None:
        self._write(_line(item))
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


def _line(item: dict[str, Any]) -> bytes:
    """One record as a UTF-8 line, or ``ResultFileError`` before anything is written."""
    try:
        return (json.dumps(item, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    except (ValueError, TypeError) as exc:  # NaN, a lone surrogate, a value JSON cannot hold
        raise ResultFileError(f"a {item.get('kind')} record cannot be written: {exc}") from exc
