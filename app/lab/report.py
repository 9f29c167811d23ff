"""Exports of a lab result file: JSON, CSV and one self-contained HTML page.

The HTML draws its strip plots as inline SVG and loads nothing from anywhere, so it opens
the same offline, attached to an e-mail or years later.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import statistics
from dataclasses import asdict
from pathlib import PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from app.lab.colours import DISTURBED, FALSIFIED, series_colour, verdict_colour
from app.lab.plan import LabPlan
from app.lab.results import ResultLog
from app.lab.stats import (
    ALL,
    MIN_HELD_OUT_RUNS,
    Analysis,
    CellSummary,
    Interval,
    Row,
    analyse,
)

CSV_FIELDS = tuple(Row.__dataclass_fields__)
# One row of the summary table, as the Lab tab, the command line and the report all show it
CELL_COLUMNS = (
    "phase",
    "category",
    "configuration",
    "n",
    "speedup (95% CI)",
    "acceptance",
    "tokens/pass",
    "TTFT ms",
    "ITL p50/p95/p99 ms",
    "host ms/token",
    "peak RSS MB",
    "slowdowns",
    "divergences",
    "guard pauses",
    "outside load",
)
# An absolute path in a command line: POSIX, home-relative or a Windows drive
_ABSOLUTE = re.compile(r"""(?<![\w.])(?:~?/|[A-Za-z]:[\\/])[^\s,;'"=]+""")


def analysis_of(log: ResultLog) -> tuple[LabPlan, Analysis]:
    plan = LabPlan.from_json(log.header.get("plan") or {})
    names = [c.name for c in plan.configs]
    return plan, analyse(log.records, plan.claim, names, seed=plan.seed)


def cell_columns(cell: CellSummary) -> tuple[str, ...]:
    """The ``CELL_COLUMNS`` of one category and configuration, as text (one definition of
    each figure: the medians over the runs the result file holds)."""
    m = cell.medians
    s = m["speedup"]
    spread = f"{s.low:.2f}–{s.high:.2f}" if s.shown else s.spread()
    speedup = f"{s.median:.2f}× ({spread})"
    return (
        cell.phase,
        cell.category,
        cell.config,
        str(s.n),
        speedup + (" under load" if cell.disturbed else ""),
        f"{m['acceptance'].median:.2f}",
        f"{m['tokens_per_pass'].median:.2f}",
        f"{m['ttft_ms'].median:.1f}",
        f"{m['itl_p50_ms'].median:.2f}/{m['itl_p95_ms'].median:.2f}/{m['itl_p99_ms'].median:.2f}",
        f"{m['host_ms_per_token'].median:.3f}",
        "" if cell.peak_rss_mb is None else f"{cell.peak_rss_mb:.0f}",
        str(cell.slowdowns),
        str(cell.divergences),
        str(cell.guard_pauses),
        f"{cell.disturbed} of {s.n} runs: rerun" if cell.disturbed else "",
    )


def ordered_cells(result: Analysis, phase: str = "tuning") -> list[CellSummary]:
    return sorted(
        result.cells,
        key=lambda c: (c.phase != phase, c.phase, c.category != ALL, c.category, c.config),
    )


def _file_name(path: str) -> str:
    """The last part of a path written on any system."""
    windows = PureWindowsPath(path)
    return (windows if windows.drive else PurePosixPath(path)).name or PurePath(path).name


def model_files(log: ResultLog) -> dict[str, str]:
    """Each model file the run used: its path → its file name (and sha256, in the lineage)."""
    lineage = log.header.get("lineage")
    found: list[str] = []
    if isinstance(lineage, dict):
        target = lineage.get("target")
        if isinstance(target, dict) and isinstance(target.get("path"), str):
            found.append(target["path"])
        drafts = lineage.get("drafts")
        if isinstance(drafts, dict):
            found += [p for p in drafts if isinstance(p, str)]
    plan = log.header.get("plan")
    if isinstance(plan, dict):
        target = plan.get("target")
        if isinstance(target, dict) and isinstance(target.get("path"), str):
            found.append(target["path"])
        for config in plan.get("configs") or []:
            if isinstance(config, dict) and isinstance(config.get("draft"), str):
                found.append(config["draft"])
    return {path: _file_name(path) for path in found if path}


def without_paths(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every model path in it (keys too) replaced by the file's name, so a
    shared report shows no folder, home or user name."""
    if isinstance(value, str):
        for path in sorted(names, key=len, reverse=True):
            value = value.replace(path, names[path])
        return value
    if isinstance(value, dict):
        return {without_paths(k, names): without_paths(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_paths(v, names) for v in value]
    return value


def _command(command: Any, names: dict[str, str]) -> Any:
    """The command line with model paths named and any other absolute path cut to its name
    (result files, suites, exports)."""
    if not isinstance(command, list):
        return without_paths(command, names)
    return [
        _ABSOLUTE.sub(lambda m: _file_name(m.group(0)), without_paths(arg, names))
        if isinstance(arg, str)
        else arg
        for arg in command
    ]


def public_header(log: ResultLog, *, paths: bool = False) -> dict[str, Any]:
    """The header's plan and lineage as a report shows them: files by name and sha256,
    their paths only with ``paths``."""
    header = {k: log.header.get(k) for k in ("plan", "lineage", "suite_hash", "split", "command")}
    if paths:
        return header
    names = model_files(log)
    command = header.pop("command")
    return {**without_paths(header, names), "command": _command(command, names)}


def _interval(value: Interval | None) -> dict[str, Any] | None:
    if value is None or value.n == 0:
        return None
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(value).items()}


def to_json(log: ResultLog, *, paths: bool = False) -> str:
    plan, result = analysis_of(log)
    header = public_header(log, paths=paths)
    data = {
        "lineage": header["lineage"],
        "suite_hash": header["suite_hash"],
        "split": header["split"],
        "plan": header["plan"],
        "finished": log.finished,
        "verdict": {
            **asdict(result.verdict),
            "tuning": _interval(result.verdict.tuning),
            "confirmation": _interval(result.verdict.confirmation),
        },
        "recommendations": [
            {**asdict(r), "confirmed_speedup": _interval(r.confirmed_speedup)}
            for r in result.recommendations
        ],
        "summary": [
            {
                "phase": c.phase,
                "category": c.category,
                "config": c.config,
                "slowdowns": c.slowdowns,
                "divergences": c.divergences,
                "guard_pauses": c.guard_pauses,
                "peak_rss_mb": c.peak_rss_mb,
                "disturbed": c.disturbed,
                "medians": {k: _interval(v) for k, v in c.medians.items()},
            }
            for c in result.cells
        ],
        "failures": [asdict(f) for f in result.failures],
        "rows": [asdict(r) for r in result.rows],
        "min_held_out_runs": MIN_HELD_OUT_RUNS,
    }
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def to_csv(log: ResultLog) -> str:
    _, result = analysis_of(log)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow(asdict(row))
    return out.getvalue()


def summary_lines(result: Analysis, phase: str = "tuning") -> list[str]:
    """A plain-text table of ``cell_columns``: one line per phase, category and
    configuration, ``phase`` first."""
    table = [CELL_COLUMNS, *(cell_columns(c) for c in ordered_cells(result, phase))]
    widths = [max(len(row[i]) for row in table) for i in range(len(CELL_COLUMNS))]
    return [
        "  ".join(text.ljust(w) for text, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


# --- HTML ---------------------------------------------------------------------------------


def _e(value: object) -> str:
    """Every value from a result file goes into the page through here: text, never markup."""
    return html.escape(str(value))


PLOT_WIDTH = 1000  # the drawing's own units; the page scales it to its full width
PLOT_HEIGHT = 380
PLOT_LEFT, PLOT_TOP, PLOT_BOTTOM = 56, 16, 60
PLOT_GUTTER = 130  # right of the points: the reference lines' labels, clear of every point
MIN_COLUMN = 110  # per category, so the names stay apart
LABEL_GAP = 13  # vertical room a line label needs


def _strip_svg(rows: list[Row], configs: list[str], categories: list[str], threshold: float) -> str:
    """Speedup per prompt, one column per category, one colour per configuration.

    The drawing fills the page's width (``viewBox`` scaling); the 1× and claim lines are
    labelled in a gutter right of the columns, where no point is drawn.
    """
    left, top, bottom, gutter = PLOT_LEFT, PLOT_TOP, PLOT_BOTTOM, PLOT_GUTTER
    width = max(PLOT_WIDTH, left + gutter + MIN_COLUMN * max(len(categories), 1))
    height = PLOT_HEIGHT
    right = width - gutter  # the points' area ends here
    values = [r.speedup for r in rows if r.speedup > 0] or [1.0]
    low = min(min(values), 1.0, threshold) * 0.8
    high = max(max(values), 1.0, threshold) * 1.15
    span = math.log(high) - math.log(low)

    def y(value: float) -> float:
        value = min(max(value, low), high)
        return top + (height - top - bottom) * (1 - (math.log(value) - math.log(low)) / span)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" role="img" '
        f'aria-label="speedup per prompt" style="display:block">',
        f'<rect x="{left}" y="{top}" width="{right - left}" '
        f'height="{height - top - bottom}" fill="#fafafa" stroke="#ccc"/>',
    ]
    lines = [(1.0, "1× (target alone)", ""), (threshold, f"claim {threshold:g}×", "4 3")]
    label_ys = [y(value) + 4 for value, _, _ in lines]
    if abs(label_ys[0] - label_ys[1]) < LABEL_GAP:  # close lines: labels above and below
        upper = 0 if label_ys[0] < label_ys[1] else 1
        middle = (label_ys[0] + label_ys[1]) / 2
        label_ys[upper] = middle - LABEL_GAP / 2
        label_ys[1 - upper] = middle + LABEL_GAP / 2
    for (value, label, dash), label_y in zip(lines, label_ys, strict=True):
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{y(value):.1f}" '
            f'y2="{y(value):.1f}" stroke="#555"{dashes}/>'
        )
        parts.append(
            f'<text class="line-label" x="{right + 6}" y="{label_y:.1f}" font-size="12" '
            f'fill="#333">{_e(label)}</text>'
        )
    for tick in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0):
        if low <= tick <= high:
            parts.append(
                f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="12" '
                f'text-anchor="end">{tick:g}×</text>'
            )
    column = (right - left) / max(len(categories), 1)
    slot = column / (len(configs) + 1)
    for ci, category in enumerate(categories):
        x0 = left + column * ci
        if ci:
            parts.append(
                f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{top}" y2="{height - bottom}" '
                f'stroke="#e4e4e4"/>'
            )
        parts.append(
            f'<text x="{x0 + column / 2:.1f}" y="{height - bottom + 18}" '
            f'font-size="13" text-anchor="middle">{_e(category)}</text>'
        )
        for ki, config in enumerate(configs):
            colour = series_colour(ki)
            xs = x0 + slot * (ki + 1)
            spread = min(slot * 0.35, 14.0)
            chosen = [r for r in rows if r.category == category and r.config == config]
            for j, r in enumerate(chosen):
                jitter = ((j * 7) % 11 - 5) / 5 * spread
                note = f" — {r.load}" if r.load else ""
                if r.phase != "confirmation":
                    parts.append(
                        f'<circle cx="{xs + jitter:.1f}" cy="{y(r.speedup):.1f}" r="4" '
                        f'fill="{colour}" fill-opacity="0.7"><title>'
                        f"{_e(r.prompt)} {r.speedup:.2f}×{_e(note)}</title></circle>"
                    )
                else:
                    parts.append(
                        f'<rect x="{xs + jitter - 4:.1f}" y="{y(r.speedup) - 4:.1f}" '
                        f'width="8" height="8" fill="none" stroke="{colour}" stroke-width="1.5">'
                        f"<title>{_e(r.prompt)} (held out) {r.speedup:.2f}×{_e(note)}"
                        f"</title></rect>"
                    )
            if chosen:
                median = statistics.median(r.speedup for r in chosen)
                parts.append(
                    f'<line x1="{xs - spread - 4:.1f}" x2="{xs + spread + 4:.1f}" '
                    f'y1="{y(median):.1f}" y2="{y(median):.1f}" stroke="{colour}" '
                    f'stroke-width="3"/>'
                )
    x = float(left)
    for ki, config in enumerate(configs):
        parts.append(
            f'<rect x="{x:.0f}" y="{height - 24}" width="12" height="12" '
            f'fill="{series_colour(ki)}"/><text x="{x + 17:.0f}" '
            f'y="{height - 13}" font-size="13">{_e(config)}</text>'
        )
        x += 17 + 8 * len(config) + 28
    parts.append("</svg>")
    return "".join(parts)


def _cell_table(cells: list[CellSummary]) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in CELL_COLUMNS)
    speedup = CELL_COLUMNS.index("speedup (95% CI)")
    body = []
    for cell in cells:
        texts = cell_columns(cell)
        slow = cell.medians["speedup"].median < 1.0
        tds = "".join(
            _td(text, bad=i == speedup and slow, load=i == speedup and bool(cell.disturbed))
            for i, text in enumerate(texts)
        )
        body.append(f"<tr>{tds}</tr>")
    # scrolls by itself when the page is narrower than its columns
    return f'<div class="wide"><table><tr>{head}</tr>{"".join(body)}</table></div>'


def _td(text: str, *, bad: bool = False, load: bool = False) -> str:
    classes = " ".join(c for c, on in (("bad", bad), ("load", load)) if on)
    return f'<td class="{classes}">{_e(text)}</td>' if classes else f"<td>{_e(text)}</td>"


def _sha(digest: object) -> str:
    return f"sha256 {digest}" if isinstance(digest, str) else "sha256 unknown"


def to_html(log: ResultLog, *, paths: bool = False) -> str:
    """The report; model files appear by name and sha256, their paths only with ``paths``."""
    plan, result = analysis_of(log)
    header = public_header(log, paths=paths)
    names = {} if paths else model_files(log)
    v = result.verdict
    colour = verdict_colour(v)
    categories = list(plan.categories)
    recs = "".join(
        f"<tr><td>{_e(r.category)}</td>"
        f"<td>{_e(r.use)}"
        f"</td><td>{'' if r.tuning_speedup is None else f'{r.tuning_speedup:.2f}×'}</td>"
        f"<td>{'' if r.confirmed_speedup is None else f'{r.confirmed_speedup.median:.2f}×'}"
        f"</td><td>{_e(r.reason)}</td></tr>"
        for r in result.recommendations
    )
    fails = "".join(
        f"<tr><td>{_e(f.phase)}</td><td>{_e(f.kind)}</td><td>{_e(f.category)}"
        f"</td><td>{_e(f.prompt)}</td><td>{_e(f.config)}</td>"
        f"<td>{_e(f.detail)}</td></tr>"
        for f in result.failures[:500]
    )
    configs = "".join(
        f"<li><b>{_e(c.name)}</b>: {_e(without_paths(c.describe(), names))}</li>"
        for c in plan.configs
    )
    lineage_data = header.get("lineage")
    target = lineage_data.get("target") if isinstance(lineage_data, dict) else None
    digest = target.get("sha256") if isinstance(target, dict) else None
    lineage = _e(
        json.dumps(
            {k: header.get(k) for k in ("lineage", "suite_hash", "split", "command")},
            indent=2,
            ensure_ascii=False,
            default=str,
        )
    )
    state = (
        ""
        if log.finished
        else "<p class='warn'>This run has not finished; "
        "`python -m app lab resume` continues it.</p>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>SpecDeck Lab report</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}}
table{{border-collapse:collapse;margin:1em 0;font-size:13px}}
td,th{{border:1px solid #ddd;padding:3px 7px;text-align:left}} th{{background:#f0f0f0}}
.bad{{color:{FALSIFIED};font-weight:bold}} .warn{{color:{FALSIFIED}}} .load{{color:{DISTURBED}}}
.wide{{overflow-x:auto}} .wide td{{white-space:nowrap}}
.verdict{{font-size:18px;padding:.6em 1em;border-left:6px solid {colour};background:#f7f7f7}}
pre{{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}}
</style></head><body>
<h1>SpecDeck Lab report</h1>{state}
<p class="verdict" style="color:{colour}"><b>{_e(v.describe())}</b></p>
<h2>Configurations</h2><ul>{configs}</ul>
<p>Target: {_e(without_paths(plan.target.path, names))} ({_e(_sha(digest))});
{len(plan.prompts)} prompts in
{len(categories)} categories, {plan.repeats} repeat(s), {plan.max_tokens} tokens each;
tuning {len(plan.split.tuning)} / held-out confirmation {len(plan.split.confirmation)} prompts.</p>
<h2>Speedup per prompt</h2>
<p>Circles: tuning part; squares: held-out confirmation part; bars: medians.
Log scale.</p>
{_strip_svg(result.rows, result.configs, categories, plan.claim.threshold)}
<h2>Recommendation per category</h2>
<p>A recommendation needs at least {MIN_HELD_OUT_RUNS} held-out runs of its configuration in
its category, a 95% interval above 1×, no outside load, and no falsified claim about it.</p>
<table><tr><th>category</th><th>use</th><th>tuning median</th><th>confirmed median</th>
<th>why</th></tr>{recs}</table>
<h2>Distributions (medians with 95% bootstrap CIs)</h2>{_cell_table(ordered_cells(result))}
<h2>Failures</h2>
<table><tr><th>phase</th><th>kind</th><th>category</th><th>prompt</th><th>configuration</th>
<th>detail</th></tr>{fails}</table>
<h2>Lineage</h2><pre>{lineage}</pre>
</body></html>
"""
