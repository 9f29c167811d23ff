"""Run statistics of one answer as CSV (one row per verification step) or JSON."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from app.engine.events import RunSummary, StepEvent
from app.models.drafting import PairDrafting

DEFINITIONS = {
    "acceptance_rate": "drafted tokens accepted ÷ drafted tokens (the window's acceptance)",
    "tokens_per_pass": "tokens per target forward pass, the bonus/resampled token included",
    "recent_agreement": "the collapse guard's recent agreement: accepted ÷ judged draft tokens",
    "break_even": "the agreement below which drafting costs more than it saves",
}

STEP_COLUMNS = (
    "step",
    "drafted",
    "accepted",
    "draft_ms",
    "verify_ms",
    "other_ms",
    "next_draft_len",
    "recent_agreement",
    "break_even",
)
FIELD_OF = {"recent_agreement": "rolling_acceptance"}  # column name -> StepEvent field


def with_suffix(path: Path, suffix: str) -> Path:
    """``path`` with ``suffix`` added when the name was typed without one ("chart" ->
    "chart.png"); a name that has its own suffix is kept as typed."""
    return path if path.suffix else path.with_name(path.name + suffix)


def _column(step: StepEvent, name: str) -> Any:
    return _plain(getattr(step, FIELD_OF.get(name, name)))


@dataclass
class AnswerStats:
    steps: list[StepEvent] = field(default_factory=list)
    summaries: dict[str, RunSummary] = field(default_factory=dict)
    verdict: str = ""
    guard_messages: list[str] = field(default_factory=list)
    drafting: PairDrafting | None = None  # the pair's method: the guard's words depend on it

    def clear(self) -> None:
        self.steps.clear()
        self.summaries.clear()
        self.verdict = ""
        self.guard_messages.clear()


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return round(value, 6)
    return value


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    data = asdict(summary)
    data.pop("token_ids", None)
    data.pop("text", None)
    data.pop("verify_passes", None)  # one per step: the steps' own table has them
    data["tokens_per_pass"] = summary.tokens_per_pass
    return {k: _plain(v) for k, v in data.items()}


def to_csv(stats: AnswerStats) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(STEP_COLUMNS)
    for step in stats.steps:
        writer.writerow([_column(step, name) for name in STEP_COLUMNS])
    return out.getvalue()


def to_json(stats: AnswerStats) -> str:
    data = {
        "verdict": stats.verdict,
        "definitions": DEFINITIONS,
        "runs": {mode: summary_dict(s) for mode, s in stats.summaries.items()},
        "guard": list(stats.guard_messages),
        "steps": [{name: _column(s, name) for name in STEP_COLUMNS} for s in stats.steps],
    }
    return json.dumps(data, indent=2) + "\n"
