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
from dataclasses import asdict
from typing import Any

from app.lab.plan import LabPlan
from app.lab.results import ResultLog
from app.lab.stats import ALL, Analysis, CellSummary, Interval, Row, analyse

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
CSV_FIELDS = tuple(Row.__dataclass_fields__)


def analysis_of(log: ResultLog) -> tuple[LabPlan, Analysis]:
    plan = LabPlan.from_json(log.header.get("plan") or {})
    names = [c.name for c in plan.configs]
    return plan, analyse(log.records, plan.claim, names, seed=plan.seed)


def _interval(value: Interval | None) -> dict[str, Any] | None:
    if value is None or value.n == 0:
        return None
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(value).items()}


def to_json(log: ResultLog) -> str:
    plan, result = analysis_of(log)
    data = {
        "lineage": log.header.get("lineage"),
        "suite_hash": log.header.get("suite_hash"),
        "split": log.header.get("split"),
        "plan": log.header.get("plan"),
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
                "medians": {k: _interval(v) for k, v in c.medians.items()},
            }
            for c in result.cells
        ],
        "failures": [asdict(f) for f in result.failures],
        "rows": [asdict(r) for r in result.rows],
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
    """A plain-text table: one line per category and configuration."""
    head = (
        f"{'category':<12} {'config':<14} {'n':>3} {'speedup (95% CI)':>22} {'accept':>7} "
        f"{'tok/pass':>8} {'TTFT ms':>8} {'ITL p50/p95/p99 ms':>20} {'host ms/t':>9} "
        f"{'slow':>4} {'div':>3} {'guard':>5}"
    )
    lines = [head]
    for cell in sorted(
        result.cells,
        key=lambda c: (c.phase != phase, c.phase, c.category != ALL, c.category, c.config),
    ):
        m = cell.medians
        s = m["speedup"]
        lines.append(
            f"{cell.category[:12]:<12} {cell.config[:14]:<14} {s.n:>3} "
            f"{s.median:>6.2f}× ({s.low:.2f}–{s.high:.2f})".ljust(45)
            + f" {m['acceptance'].median:>7.2f} {m['tokens_per_pass'].median:>8.2f} "
            f"{m['ttft_ms'].median:>8.1f} "
            f"{m['itl_p50_ms'].median:>6.2f}/{m['itl_p95_ms'].median:.2f}/"
            f"{m['itl_p99_ms'].median:.2f}".ljust(21)
            + f" {m['host_ms_per_token'].median:>9.3f} {cell.slowdowns:>4} "
            f"{cell.divergences:>3} {cell.guard_pauses:>5}"
            + ("" if cell.phase == phase else f"  [{cell.phase}]")
        )
    return lines


# --- HTML ---------------------------------------------------------------------------------


def _e(value: object) -> str:
    """Every value from a result file goes into the page through here: text, never markup."""
    return html.escape(str(value))


def _strip_svg(rows: list[Row], configs: list[str], categories: list[str], threshold: float) -> str:
    """Speedup per prompt, one column per category, one colour per configuration."""
    width, height, left, top, bottom = 90 * max(len(categories), 1) + 70, 300, 56, 16, 60
    values = [r.speedup for r in rows if r.speedup > 0] or [1.0]
    low = min(min(values), 1.0, threshold) * 0.8
    high = max(max(values), 1.0, threshold) * 1.15
    span = math.log(high) - math.log(low)

    def y(value: float) -> float:
        value = min(max(value, low), high)
        return top + (height - top - bottom) * (1 - (math.log(value) - math.log(low)) / span)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="speedup per prompt">',
        f'<rect x="{left}" y="{top}" width="{width - left - 10}" '
        f'height="{height - top - bottom}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for value, label, dash in (
        (1.0, "1× (target alone)", ""),
        (threshold, f"claim {threshold:g}×", ' stroke-dasharray="4 3"'),
    ):
        parts.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y(value):.1f}" '
            f'y2="{y(value):.1f}" stroke="#555"{dash}/>'
        )
        parts.append(
            f'<text x="{left + 4}" y="{y(value) - 3:.1f}" font-size="10" '
            f'fill="#555">{_e(label)}</text>'
        )
    for tick in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0):
        if low <= tick <= high:
            parts.append(
                f'<text x="{left - 6}" y="{y(tick) + 3:.1f}" font-size="10" '
                f'text-anchor="end">{tick:g}×</text>'
            )
    column = (width - left - 10) / max(len(categories), 1)
    for ci, category in enumerate(categories):
        x0 = left + column * ci
        parts.append(
            f'<text x="{x0 + column / 2:.1f}" y="{height - bottom + 16}" '
            f'font-size="11" text-anchor="middle">{_e(category)}</text>'
        )
        for ki, config in enumerate(configs):
            colour = PALETTE[ki % len(PALETTE)]
            xs = x0 + column * (ki + 1) / (len(configs) + 1)
            chosen = [r for r in rows if r.category == category and r.config == config]
            for j, r in enumerate(chosen):
                jitter = ((j * 7) % 11 - 5) * 1.2
                shape = "rect" if r.phase == "confirmation" else "circle"
                if shape == "circle":
                    parts.append(
                        f'<circle cx="{xs + jitter:.1f}" cy="{y(r.speedup):.1f}" r="3" '
                        f'fill="{colour}" fill-opacity="0.7"><title>'
                        f"{_e(r.prompt)} {r.speedup:.2f}×</title></circle>"
                    )
                else:
                    parts.append(
                        f'<rect x="{xs + jitter - 3:.1f}" y="{y(r.speedup) - 3:.1f}" '
                        f'width="6" height="6" fill="none" stroke="{colour}"><title>'
                        f"{_e(r.prompt)} (held out) {r.speedup:.2f}×"
                        f"</title></rect>"
                    )
            if chosen:
                ordered = sorted(r.speedup for r in chosen)
                median = (
                    ordered[len(ordered) // 2]
                    if len(ordered) % 2
                    else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
                )
                parts.append(
                    f'<line x1="{xs - 9:.1f}" x2="{xs + 9:.1f}" y1="{y(median):.1f}" '
                    f'y2="{y(median):.1f}" stroke="{colour}" stroke-width="3"/>'
                )
    for ki, config in enumerate(configs):
        parts.append(
            f'<rect x="{left + 110 * ki}" y="{height - 22}" width="10" height="10" '
            f'fill="{PALETTE[ki % len(PALETTE)]}"/><text x="{left + 110 * ki + 14}" '
            f'y="{height - 13}" font-size="11">{_e(config)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _cell_table(cells: list[CellSummary]) -> str:
    head = (
        "<tr><th>phase</th><th>category</th><th>configuration</th><th>n</th>"
        "<th>speedup median (95% CI)</th><th>acceptance</th><th>tokens/pass</th>"
        "<th>TTFT ms</th><th>ITL p50 / p95 / p99 ms</th><th>host ms/token</th>"
        "<th>peak RSS MB</th><th>slowdowns</th><th>divergences</th><th>guard pauses</th></tr>"
    )
    body = []
    for c in cells:
        m = c.medians
        s = m["speedup"]
        cls = ' class="bad"' if s.median < 1.0 else ""
        body.append(
            f"<tr><td>{_e(c.phase)}</td><td>{_e(c.category)}</td>"
            f"<td>{_e(c.config)}</td><td>{s.n}</td>"
            f"<td{cls}>{s.median:.2f}× ({s.low:.2f}–{s.high:.2f})</td>"
            f"<td>{m['acceptance'].median:.2f}</td><td>{m['tokens_per_pass'].median:.2f}</td>"
            f"<td>{m['ttft_ms'].median:.1f}</td><td>{m['itl_p50_ms'].median:.2f} / "
            f"{m['itl_p95_ms'].median:.2f} / {m['itl_p99_ms'].median:.2f}</td>"
            f"<td>{m['host_ms_per_token'].median:.3f}</td>"
            f"<td>{'' if c.peak_rss_mb is None else f'{c.peak_rss_mb:.0f}'}</td>"
            f"<td>{c.slowdowns}</td><td>{c.divergences}</td><td>{c.guard_pauses}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def to_html(log: ResultLog) -> str:
    plan, result = analysis_of(log)
    v = result.verdict
    colour = {"confirmed": "#1b7f3b", "falsified": "#b00020"}.get(v.status, "#555")
    categories = list(plan.categories)
    recs = "".join(
        f"<tr><td>{_e(r.category)}</td><td>{_e(r.config or 'target alone')}"
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
    configs = "".join(f"<li><b>{_e(c.name)}</b>: {_e(c.describe())}</li>" for c in plan.configs)
    lineage = _e(
        json.dumps(
            {k: log.header.get(k) for k in ("lineage", "suite_hash", "split", "command")},
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
.bad{{color:#b00020;font-weight:bold}} .warn{{color:#b00020}}
.verdict{{font-size:18px;padding:.6em 1em;border-left:6px solid {colour};background:#f7f7f7}}
pre{{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}}
</style></head><body>
<h1>SpecDeck Lab report</h1>{state}
<p class="verdict" style="color:{colour}"><b>{_e(v.describe())}</b></p>
<h2>Configurations</h2><ul>{configs}</ul>
<p>Target: {_e(plan.target.path)}; {len(plan.prompts)} prompts in
{len(categories)} categories, {plan.repeats} repeat(s), {plan.max_tokens} tokens each;
tuning {len(plan.split.tuning)} / held-out confirmation {len(plan.split.confirmation)} prompts.</p>
<h2>Speedup per prompt</h2>
<p>Circles: tuning part; squares: held-out confirmation part; bars: medians.
Log scale.</p>
{_strip_svg(result.rows, result.configs, categories, plan.claim.threshold)}
<h2>Recommendation per category</h2>
<table><tr><th>category</th><th>use</th><th>tuning median</th><th>confirmed median</th>
<th>why</th></tr>{recs}</table>
<h2>Distributions (medians with 95% bootstrap CIs)</h2>{_cell_table(result.cells)}
<h2>Failures</h2>
<table><tr><th>phase</th><th>kind</th><th>category</th><th>prompt</th><th>configuration</th>
<th>detail</th></tr>{fails}</table>
<h2>Lineage</h2><pre>{lineage}</pre>
</body></html>
"""
