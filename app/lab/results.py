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

from app.files.fileio import StoredFileError, error_text, read_bytes_bounded
from app.lab import checks

FORMAT = "specdeck-lab/1"
MAX_LOG_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024
PHASES = ("tuning", "confirmation")
PROMPT_KEYS = ("phase", "prompt", "category", "repeat", "baselines", "runs")
MAX_NAME_CHARS = 80  # prompt ids, categories, configuration names (suites and configs allow less)
MAX_REPEAT = 1000
# What a run's figures are, for reading them back (``runner.measure`` and ``remote`` write them)
RUN_NUMBERS = (
    "tok_s",
    "ttft_ms",
    "acceptance",
    "tokens_per_pass",
    "itl_p50_ms",
    "itl_p95_ms",
    "itl_p99_ms",
    "host_ms_per_token",
    "wall_s",
    "temperature",
    "baseline_tok_s",
)
RUN_COUNTS = ("tokens", "drafted", "accepted", "guard_pauses")
RUN_OPTIONAL = {"peak_rss_mb": "number", "margin": "number", "first_divergence": "count"}
# A prompt's CPU times (``interference.between``): seconds, and counts of cores and threads
LOAD_SECONDS = ("wall_s", "own_cpu_s", "busy_cpu_s")
LOAD_COUNTS = ("cpus", "threads")
MAX_CPUS = 1 << 16


class ResultFileError(ValueError):
    """A result file that cannot be read or resumed; the message says why."""


def _check_run(value: object, what: str) -> None:
    run = checks.mapping(value, what)
    for key in RUN_NUMBERS:
        if key in run:
            checks.number(run[key], f"{what}.{key}")
    for key in RUN_COUNTS:
        if key in run:
            checks.whole(run[key], f"{what}.{key}", 0, checks.MAX_COUNT)
    for key, kind in RUN_OPTIONAL.items():
        if run.get(key) is None:
            continue
        if kind == "count":
            checks.whole(run[key], f"{what}.{key}", 0, checks.MAX_COUNT)
        else:
            checks.number(run[key], f"{what}.{key}")
    if run.get("identical") is not None:
        checks.flag(run["identical"], f"{what}.identical")


def _check_runs(value: object, what: str) -> None:
    for name, run in checks.mapping(value, what).items():
        checks.label(name, f"a name in {what}", MAX_NAME_CHARS)
        _check_run(run, f"{what}.{name[:MAX_NAME_CHARS]}")


def check_record(item: dict[str, Any]) -> None:
    """Raises ``checks.BadValue`` unless every value the readers use has its type and range,
    so the analysis, the report and resuming never meet a missing key or a wrong type."""
    kind = item["kind"]
    if kind == "header":
        checks.mapping(item.get("plan"), "the plan")
        lineage = item.get("lineage")
        if lineage is not None:
            checks.mapping(lineage, "the lineage")
            target = lineage.get("target")
            if target is not None:
                checks.mapping(target, "the lineage's target")
                checks.optional_text(target.get("sha256"), "the target's sha256", 64)
            for path, digest in checks.mapping(lineage.get("drafts") or {}, "drafts").items():
                checks.text(digest, f"the sha256 of {path[:200]}", 64)
    elif kind == "prompt":
        missing = [key for key in PROMPT_KEYS if key not in item]
        if missing:
            raise checks.BadValue(f"{', '.join(missing)} missing")
        phase = checks.text(item.get("phase"), "phase", MAX_NAME_CHARS)
        if phase not in PHASES:
            raise checks.BadValue(f"phase is {phase!r}, not one of {', '.join(PHASES)}")
        checks.label(item.get("prompt"), "prompt", MAX_NAME_CHARS)
        checks.label(item.get("category"), "category", MAX_NAME_CHARS)
        checks.whole(item.get("repeat"), "repeat", 0, MAX_REPEAT)
        _check_runs(item.get("runs"), "runs")
        _check_runs(item.get("baselines"), "baselines")
        if item.get("load") is not None:
            times = checks.mapping(item["load"], "load")
            for key in LOAD_SECONDS:
                checks.number(times.get(key, 0.0), f"load.{key}")
            for key in LOAD_COUNTS:
                checks.whole(times.get(key, 1), f"load.{key}", 0, MAX_CPUS)
    elif kind == "choice":
        per_category = checks.mapping(item.get("per_category") or {}, "per_category")
        for category, config in per_category.items():
            checks.optional_text(config, f"the choice for {category[:MAX_NAME_CHARS]}", 40)
        checks.optional_text(item.get("claim_config"), "claim_config", MAX_NAME_CHARS)


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

        Every record is type-checked (``check_record``): a damaged or hand-edited file is
        refused with its line number, never half-read.
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
                item = checks.loads(raw.decode("utf-8"))
            except ValueError as exc:  # not UTF-8, not JSON, NaN/Infinity, nested too deeply
                raise ResultFileError(f"{path}:{number}: not a lab record ({exc})") from None
            if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
                raise ResultFileError(f"{path}:{number}: not a lab record")
            if not records and (item["kind"] != "header" or item.get("format") != FORMAT):
                raise ResultFileError(f"{path} is not a SpecDeck lab result file")
            try:
                check_record(item)
            except checks.BadValue as exc:
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
