"""``python -m app bench``: target-only vs speculative decoding on a prompt set, one process.

``run_bench`` runs inside the engine process (``EngineHost.bench``); it announces each chat
template render through ``on_stage`` so that the parent can hold it to the same time bound
as the chat's. Both runs of a prompt use the same loaded target weights, the same sampler
and seed, and run one after the other, never at the same time, so each tokens/sec comes from
its own compute. Ratios are what to read: absolute figures on a shared machine move from run
to run. Each prompt runs in rounds, the two modes taking turns to go first, and its speedup is
the median of the rounds' own ratios; where the rounds' ratios disagree by more than a tenth,
the prompt runs more rounds (``max_rounds`` in all, more for a short answer); a row whose step
times spread or drift more than a quiet machine's do is flagged ``noisy``
(``app.engine.noise``).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from app.engine.chat_template import Message
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.drafters.lookup import copied_fraction
from app.engine.engine import Engine
from app.engine.events import RunSummary, drain, guard_record
from app.engine.exactness import compare
from app.engine.llama.hardware import devices, llama_cpp_version, system_info
from app.engine.llama.repacking import RepackVerdict, repacking_enabled
from app.engine.machine_load import LoadRunning, MachineLoad
from app.engine.noise import (
    at_equal_passes,
    gap_reasons,
    load_gap_reasons,
    noise_flag,
    pass_gap,
    steadiness,
)
from app.engine.policy.costs import CostModel
from app.engine.process.protocol import BENCHMARKING, RENDERING
from app.engine.thread_fit import OtherProgramsMeter, ThreadFit
from app.files.fileio import file_sha256


class ReferenceFigures(Protocol):
    """What the bench reads from a reference run."""

    @property
    def tok_s(self) -> float: ...

    @property
    def acceptance_rate(self) -> float: ...


@dataclass(frozen=True)
class ReferenceRequest:
    """One prompt for llama.cpp's own speculative program, as the bench ran it."""

    target: Path
    draft: Path
    prompt_text: str
    max_tokens: int
    draft_max: int
    p_min: float
    threads: int
    n_ctx: int
    seed: int
    ignore_eos: bool = False
    repack: bool | None = None  # None: as the app's repacking verdict says


class ReferenceRun(Protocol):
    """llama.cpp's own speculative program on one prompt, beside the bench's runs
    (``bench --reference``). It is a developer tool (``app.devtools.reference.run_reference``),
    which the engine never imports: the command line passes it in where the developer tools
    are present, and the installers leave them out."""

    def __call__(self, request: ReferenceRequest) -> ReferenceFigures: ...


@dataclass(frozen=True)
class BenchSettings:
    max_tokens: int = 128
    sampler: SamplerConfig = SamplerConfig()
    spec: SpecConfig = SpecConfig()
    # also run llama.cpp's llama-speculative-simple on each prompt (a module-level function, so
    # that the settings still cross into the engine process)
    reference: ReferenceRun | None = None
    ignore_eos: bool = False
    token_probs: bool = True  # p(x)/q(x) per token, as the window's hover details need
    rounds: int = 2  # target-only and speculative runs per prompt, taking turns to go first
    # where those rounds' speedups disagree by more than ROUNDS_AGREE, rounds run up to this
    max_rounds: int = 6
    # also every prompt again with the machine kept busy (after all of them quiet)
    busy: MachineLoad | None = None
    # one-token runs per mode with every cache emptied, after the rounds: the time to the first
    # token is their median (one sample per prompt had swung 0.7-1.35x between runs; on 16
    # prompts whose 21 paired runs gave 0.97-1.02x, medians of three 0.83-1.13x, of seven
    # 0.96-1.05x: devtools/first_token_spread); 0: the first round's, whose caches still hold
    # what the last prompt shares with this one
    first_token_rounds: int = 7


StageCallback = Callable[[str], None]


def _no_stage(_: str) -> None:
    pass


def warm_up(
    run: Callable[[GenerationRequest], RunSummary],
    prompt: tuple[int, ...],
    settings: BenchSettings,
) -> None:
    """Touch every weight page (mmap) and every compute buffer once before timing.

    ``run`` drains one request: ``Engine.generate`` here, ``EngineHost.run`` in the Lab.
    """
    short = GenerationRequest(prompt, max_tokens=8, sampler=settings.sampler, spec=settings.spec)
    run(replace(short, speculative=False))
    run(short)


def _render(engine: Engine, text: str, on_stage: StageCallback) -> str:
    on_stage(RENDERING)  # the parent bounds this stage: a template may loop for ever
    try:
        return engine.render_chat([Message("user", text)])
    finally:
        on_stage(BENCHMARKING)


def bench_prompt(
    engine: Engine,
    item: dict[str, str],
    settings: BenchSettings,
    on_stage: StageCallback = _no_stage,
) -> dict:
    prompt_text = _render(engine, item["prompt"], on_stage)
    prompt = engine.tokenize_rendered(prompt_text)
    request = GenerationRequest(
        prompt,
        max_tokens=settings.max_tokens,
        sampler=settings.sampler,
        spec=settings.spec,
        token_probs=settings.token_probs,
        ignore_eos=settings.ignore_eos,
    )
    first_rounds = max(settings.rounds, 1)
    pairs = _rounds(engine, request, first_rounds)
    more_rounds = more_rounds_reasons(pairs)
    if more_rounds:
        wanted = rounds_wanted(pairs, settings.max_rounds, settings.max_tokens)
        pairs += _rounds(engine, request, wanted - len(pairs), first=len(pairs))
    baseline, speculative = pairs[0]  # counts and notes: the first round's
    base_ttft, spec_ttft = first_token_times(engine, request, settings.first_token_rounds)
    checks = [compare(prompt, s.token_ids, b.token_ids, engine) for b, s in pairs]
    check = next((c for c in checks if not c.identical), checks[0])
    ratios = _ratios(pairs)

    def median(figure: Callable[[RunSummary], float], of_speculative: bool = True) -> float:
        return statistics.median(figure(pair[1 if of_speculative else 0]) for pair in pairs)

    row = {
        "id": item["id"],
        "prompt_tokens": len(prompt),
        "tokens": speculative.tokens,
        "baseline_tok_s": round(median(lambda r: r.tok_s, False), 3),
        "speculative_tok_s": round(median(lambda r: r.tok_s), 3),
        "speedup": round(statistics.median(ratios), 4),
        # why the prompt ran rounds past --rounds (empty: the first rounds could be read)
        "more_rounds": more_rounds if len(pairs) > first_rounds else [],
        "acceptance_rate": round(speculative.acceptance_rate, 4),
        "mean_accepted_length": round(speculative.mean_accepted_length, 3),
        "target_passes_per_token": round(speculative.target_passes_per_token, 4),
        "identical": check.identical,
        "first_divergence": check.first_divergence,
        "divergence_margin": None if check.margin is None else round(check.margin, 5),
        "overhead_fraction": round(median(lambda r: r.overhead_fraction), 4),
        "baseline_overhead_fraction": round(median(lambda r: r.overhead_fraction, False), 4),
        "host_ms_per_token": round(median(lambda r: r.host_ms_per_token), 4),
        "baseline_host_ms_per_token": round(median(lambda r: r.host_ms_per_token, False), 4),
        "step_host_ms_per_token": round(median(lambda r: r.step_host_ms_per_token), 4),
        "baseline_step_host_ms_per_token": round(
            median(lambda r: r.step_host_ms_per_token, False), 4
        ),
        # the target's own answer: what it copies does not depend on who drafted
        "copied": round(copied_fraction(prompt, baseline.token_ids), 3),
        "sampling": speculative.sampling,
        "tokens_per_pass": round(speculative.tokens_per_pass, 3),
        "draft_passes": speculative.draft_passes,
        "guard_pauses": speculative.guard_pauses,
        "paused_at_end": speculative.paused_at_end,
        # the guard's first pause as measured (its words are built above the engine)
        "guard": guard_record(speculative.guard_events[0]) if speculative.guard_events else None,
        # the prompt's processing, which tok/s leaves out
        "ttft_ms": round(statistics.median(spec_ttft or [speculative.ttft_ms]), 1),
        "baseline_ttft_ms": round(statistics.median(base_ttft or [baseline.ttft_ms]), 1),
        "ttft_samples": len(spec_ttft) or 1,
        "stop_reason": speculative.stop_reason.value,
        **speculative.acceptance_figures(),
        **_steadiness_figures(pairs, ratios),
    }
    if settings.reference is not None and engine.draft_spec is not None:
        ref = settings.reference(
            ReferenceRequest(
                Path(engine.target_spec.path),
                Path(engine.draft_spec.path),
                prompt_text,
                max_tokens=settings.max_tokens,
                draft_max=settings.spec.draft_max,
                p_min=settings.spec.p_min,
                threads=engine.target_spec.threads(),
                n_ctx=engine.n_ctx,
                seed=settings.sampler.seed or 0,
                ignore_eos=settings.ignore_eos,
                # llama-speculative-simple's --repack holds for both models
                repack=all(v.enabled for v in _repacking(engine)),
            )
        )
        row["reference_tok_s"] = round(ref.tok_s, 3)
        row["reference_acceptance_rate"] = round(ref.acceptance_rate, 4)
        row["vs_reference"] = round(row["speculative_tok_s"] / ref.tok_s, 4) if ref.tok_s else 0.0
    return row


ROUNDS_AGREE = 1.1  # rounds whose speedups lie within a tenth of each other agree


def rounds_agree(ratios: list[float]) -> bool:
    """Whether the rounds' speedups agree closely enough for their median to be read."""
    if len(ratios) < 2:
        return True
    low, high = min(ratios), max(ratios)
    return low > 0 and high / low <= ROUNDS_AGREE


def more_rounds_reasons(pairs: list[tuple[RunSummary, RunSummary]]) -> list[str]:
    """Why the first rounds alone cannot be read, so that the prompt runs more rounds (still
    taking turns, the median of them all): a short run on a shared machine moves by a tenth
    from one round to the next, or other programs slowed one mode's run and not the other's,
    which the passes both modes pay show (the gap) and so does the load itself where the draft
    was accepted whole and left no lone pass. Empty when they can."""
    ratios = _ratios(pairs)
    spread = (
        []
        if rounds_agree(ratios)
        else [
            "the rounds' speedups " + ", ".join(f"{r:.2f}x" for r in ratios) + " differ by more "
            f"than {ROUNDS_AGREE - 1:.0%}"
        ]
    )
    return spread + gap_reasons(_gaps(pairs)) + load_gap_reasons(_loads(pairs))


SHORT_ROUNDS = 4  # a short answer's rounds in all: at most this many times ``max_rounds``


def rounds_wanted(
    pairs: list[tuple[RunSummary, RunSummary]], max_rounds: int, max_tokens: int
) -> int:
    """How many rounds in all a prompt runs whose first rounds (``pairs``) cannot be read:
    ``max_rounds``, or, for an answer shorter than ``max_tokens``, as many as time the tokens
    that ``max_rounds`` full-length answers would (at most ``SHORT_ROUNDS`` times as many), an
    even number so both modes go first as often. Bursts of other programs last 0.2-3 s, so
    each run of an 11-token answer lands in one or misses it whole, at random, and the
    median of six rounds' ratios moved from 0.76x to 1.24x by where they fell; a 96-token
    answer's runs share the bursts between the modes."""
    tokens = statistics.median(max(b.tokens, s.tokens) for b, s in pairs)
    ceiling = SHORT_ROUNDS * max_rounds
    fit = ceiling if tokens <= 0 else min(int(max_rounds * max_tokens / tokens), ceiling)
    return max(max_rounds, fit - fit % 2)


def _ratios(pairs: list[tuple[RunSummary, RunSummary]]) -> list[float]:
    return [s.tok_s / b.tok_s if b.tok_s else 0.0 for b, s in pairs]


def _rounds(
    engine: Engine, request: GenerationRequest, rounds: int, first: int = 0
) -> list[tuple[RunSummary, RunSummary]]:
    """(target-only, speculative) per round; the mode that goes first alternates, so a
    machine that slows down or speeds up over the rounds weighs on both alike. ``first``:
    the number of the first of these rounds (which mode goes first goes on alternating)."""
    pairs = []
    for number in range(first, first + rounds):
        runs = {}
        for speculative in (number % 2 == 1, number % 2 == 0):
            runs[speculative] = drain(engine.generate(replace(request, speculative=speculative)))
        pairs.append((runs[False], runs[True]))
    return pairs


def first_token_times(
    engine: Engine, request: GenerationRequest, rounds: int
) -> tuple[list[float], list[float]]:
    """(target-only, speculative) times to the first token of ``rounds`` one-token runs per
    mode, each with every cache emptied first, the mode that goes first alternating."""
    pairs = _rounds(engine, replace(request, max_tokens=1, reuse_prefix=False), rounds)
    return [b.ttft_ms for b, _ in pairs], [s.ttft_ms for _, s in pairs]


def _loads(pairs: list[tuple[RunSummary, RunSummary]]) -> list[tuple[float | None, float | None]]:
    """Per round, the cores other programs kept busy target-only and speculative."""
    return [(b.outside_cores, s.outside_cores) for b, s in pairs]


def _gaps(pairs: list[tuple[RunSummary, RunSummary]]) -> list[float | None]:
    return [pass_gap(b.lone_passes, s.lone_passes) for b, s in pairs]


def _steadiness_figures(pairs: list[tuple[RunSummary, RunSummary]], ratios: list[float]) -> dict:
    """Each round's figures, and whether the step times say another program disturbed them."""
    judged = (
        steadiness("baseline", [b.verify_passes for b, _ in pairs]),
        steadiness("speculative", [s.verify_passes for _, s in pairs]),
    )
    gaps, loads = _gaps(pairs), _loads(pairs)
    equal = [
        at_equal_passes(ratio, gap, load)
        for ratio, gap, load in zip(ratios, gaps, loads, strict=True)
    ]
    measured = [x for x in equal if x is not None]

    def rounded(value: float | None, digits: int = 3) -> float | None:
        return None if value is None else round(value, digits)

    return {
        "rounds": [
            {
                "first": "speculative" if number % 2 else "baseline",
                "baseline_tok_s": round(b.tok_s, 3),
                "speculative_tok_s": round(s.tok_s, 3),
                "speedup": round(ratio, 4),
                "baseline_outside_cores": rounded(b.outside_cores, 2),
                "speculative_outside_cores": rounded(s.outside_cores, 2),
                "baseline_fewest_threads": b.fewest_threads,
                "speculative_fewest_threads": s.fewest_threads,
                "pass_gap": rounded(gap),
                "speedup_at_equal_passes": rounded(at_equal, 4),
            }
            for number, ((b, s), ratio, gap, at_equal) in enumerate(
                zip(pairs, ratios, gaps, equal, strict=True)
            )
        ],
        "step_time_spread": {j.mode: [rounded(x) for x in j.spreads] for j in judged},
        "round_drift": {j.mode: rounded(j.drift) for j in judged},
        "noisy": noise_flag(*judged, gaps=gaps, loads=loads),
        "speedup_at_equal_passes": (
            round(statistics.median(measured), 4) if len(measured) >= 2 else None
        ),
    }


def _median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 4) if values else None


COPYING = 0.5  # an answer at least half copied from its prompt: an edit, not a rewrite


def aggregate(rows: list[dict]) -> dict:
    keys = (
        "baseline_tok_s",
        "speculative_tok_s",
        "speedup",
        "acceptance_rate",
        "mean_accepted_length",
        "target_passes_per_token",
        "overhead_fraction",
        "host_ms_per_token",
        "baseline_host_ms_per_token",
        "step_host_ms_per_token",
        "baseline_step_host_ms_per_token",
        "tokens_per_pass",
        "ttft_ms",
        "baseline_ttft_ms",
        "reference_tok_s",
        "vs_reference",
    )
    summary: dict = {f"median_{k}": _median(rows, k) for k in keys}
    summary["prompts"] = len(rows)
    speedups = [r["speedup"] for r in rows]
    if speedups:
        summary["min_speedup"] = min(speedups)
        summary["prompts_below_0_95x"] = sum(1 for x in speedups if x < 0.95)
        copies = [r["speedup"] for r in rows if r.get("copied", 0.0) >= COPYING]
        rewrites = [r["speedup"] for r in rows if r.get("copied", 0.0) < COPYING]
        summary["copying_prompts"] = len(copies)
        summary["median_speedup_copying"] = statistics.median(copies) if copies else None
        summary["min_speedup_not_copying"] = min(rewrites) if rewrites else None
    at_equal = [
        r["speedup_at_equal_passes"] for r in rows if r.get("speedup_at_equal_passes") is not None
    ]
    if at_equal:
        summary["median_speedup_at_equal_passes"] = round(statistics.median(at_equal), 4)
        summary["min_speedup_at_equal_passes"] = min(at_equal)
        summary["prompts_at_equal_passes"] = len(at_equal)
        summary["prompts_below_0_95x_at_equal_passes"] = sum(1 for x in at_equal if x < 0.95)
    summary["identical"] = sum(1 for r in rows if r["identical"])
    summary["diverged"] = [
        {"id": r["id"], "at": r["first_divergence"], "margin": r["divergence_margin"]}
        for r in rows
        if not r["identical"]
    ]
    summary["paused_at_end"] = [
        {"id": r["id"], "tokens": r["paused_at_end"], "of": r["tokens"]}
        for r in rows
        if r.get("paused_at_end")
    ]
    noisy = [{"id": r["id"], "why": r["noisy"]} for r in rows if r.get("noisy")]
    summary["noisy_prompts"] = len(noisy)
    summary["noisy"] = noisy
    summary |= _acceptance_totals(rows)
    return {k: v for k, v in summary.items() if v is not None}


def _acceptance_totals(rows: list[dict]) -> dict:
    """Per-position and per-drafter acceptance over all prompts (sums, not medians)."""
    width = max((len(r.get("drafted_per_position", ())) for r in rows), default=0)
    drafted, accepted = [0] * width, [0] * width
    drafters: dict[str, dict[str, int]] = {}
    for r in rows:
        for i, (d, a) in enumerate(
            zip(r.get("drafted_per_position", ()), r.get("accepted_per_position", ()), strict=True)
        ):
            drafted[i] += d
            accepted[i] += a
        for name, figures in r.get("per_drafter", {}).items():
            total = drafters.setdefault(name, {"steps": 0, "drafted": 0, "accepted": 0})
            for key in total:
                total[key] += figures[key]
    return {
        "acceptance_per_position": [_share(a, d) for d, a in zip(drafted, accepted, strict=True)],
        "per_drafter": {
            name: total | {"acceptance": _share(total["accepted"], total["drafted"])}
            for name, total in drafters.items()
        },
    }


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def pair_economics(costs: CostModel, k_max: int, depth: int) -> dict:
    """What the measured pass costs allow this pair at most at context ``depth``, whatever
    the prompt.

    ``ceiling_speedup`` is the speedup if every drafted token were accepted, at the best
    draft length up to ``k_max``: a pair whose draft pass costs a third of a target pass on
    a device where verifying 17 tokens costs 2.5 single passes cannot reach 2x on any
    prompt, and the bench says so rather than leaving it to be guessed from the medians.
    Empty for prompt lookup (no draft passes to measure).
    """
    single, draft = costs.verify_ms(1, depth), costs.draft_ms(1, depth)
    if single is None or draft is None or single <= 0 or k_max < 1:
        return {}

    def all_accepted(k: int) -> float:  # k + 1 tokens for one drafting step
        return (k + 1) * single / (costs.step_ms(k, depth) or single)

    best = max(range(1, k_max + 1), key=all_accepted)
    verify = {
        str(n): round(ms, 2)
        for n in sorted({2, 5, 9, k_max + 1})
        if n <= k_max + 1 and (ms := costs.verify_ms(n, depth)) is not None
    }
    return {
        "target_pass_ms": round(single, 2),
        "draft_pass_ms": round(draft, 2),
        "draft_cost_fraction": round(draft / single, 4),
        "verify_ms_by_tokens": verify,
        "ceiling_speedup": round(all_accepted(best), 3),
        "ceiling_draft_len": best,
        "break_even_acceptance": {
            str(k): round(costs.break_even(k, depth), 4) for k in (1, 2, 4, 8, 16) if k <= k_max
        },
    }


def lineage(
    target: ModelSpec,
    draft: ModelSpec | None,
    source: DraftSource,
    settings: BenchSettings,
    fit: ThreadFit | None = None,
    repacking: list[RepackVerdict] | None = None,
) -> dict:
    """What a run ran on; ``fit``: the threads the load chose (else the target's own);
    ``repacking``: the loaded models' verdicts (else the machine's, for the target)."""
    verdicts = repacking or [repacking_enabled(target.repack)]
    gpus = [asdict(d) for d in devices() if d.kind != "CPU"]
    return {
        "target": {"path": target.path, "sha256": file_sha256(Path(target.path))},
        "draft": (
            {"path": draft.path, "sha256": file_sha256(Path(draft.path))}
            if draft
            else {"ngram": source is DraftSource.NGRAM, "mtp": source is DraftSource.MTP}
        ),
        "draft_source": source.value,
        "llama_cpp_python": llama_cpp_version(),
        "llama_cpp_system_info": system_info(),
        "cpu": platform.processor() or platform.machine(),
        "threads": fit.threads if fit is not None else target.threads(),
        **({"threads_reason": fit.reason} if fit is not None else {}),
        "weight_repacking": _repacking_words(verdicts),
        "gpus": gpus,
        "settings": {
            "max_tokens": settings.max_tokens,
            "ignore_eos": settings.ignore_eos,
            "sampler": asdict(settings.sampler),
            "spec": {
                k: (v.value if hasattr(v, "value") else v) for k, v in asdict(settings.spec).items()
            },
            "n_ctx": target.n_ctx,
            "token_probs": settings.token_probs,
            "rounds": settings.rounds,
            "max_rounds": settings.max_rounds,
            "busy": asdict(settings.busy) if settings.busy else None,
        },
    }


def run_bench(
    target: ModelSpec,
    draft: ModelSpec | None,
    prompts: Iterable[dict[str, str]],
    settings: BenchSettings,
    *,
    source: DraftSource = DraftSource.MODEL,
    on_row: Callable[[dict], None] | None = None,
    on_stage: StageCallback = _no_stage,
    threads: OtherProgramsMeter | None = None,
) -> dict:
    """``threads``: a window on the machine opened before this call (the engine process's
    start), else one opened here; the load fits its threads to the cores it finds free."""
    items = list(prompts)
    began = time.perf_counter()
    engine = Engine(target, draft, draft_source=source, threads=threads or OtherProgramsMeter())
    load_s = time.perf_counter() - began
    try:
        first = engine.tokenize_rendered(_render(engine, items[0]["prompt"], on_stage))
        warm_up(lambda request: drain(engine.generate(request)), first, settings)
        rows = []
        for item in items:
            row = bench_prompt(engine, item, settings, on_stage)
            rows.append(row)
            if on_row:
                on_row(row)
        # at the depth where the last answer ended, as the last step left the cost model
        ended = rows[-1]["prompt_tokens"] + rows[-1]["tokens"] if rows else 0
        economics = pair_economics(engine.costs, settings.spec.draft_max, ended)
        busy = _busy_phase(engine, items, rows, settings, on_row, on_stage)
    finally:
        engine.close()
    return {
        "prompts": rows,
        "aggregate": aggregate(rows) | ({"pair": economics} if economics else {}),
        "lineage": lineage(target, draft, source, settings, engine.thread_fit, _repacking(engine))
        | {"load_s": round(load_s, 3), "peak_rss_bytes": peak_rss_bytes()},
    } | ({"busy": busy} if busy else {})


def _busy_phase(
    engine: Engine,
    items: list[dict[str, str]],
    quiet: list[dict],
    settings: BenchSettings,
    on_row: Callable[[dict], None] | None,
    on_stage: StageCallback,
) -> dict | None:
    """Every prompt again under ``settings.busy``, started afresh for each prompt so each
    meets the same bursts; each row also carries its quiet speedup from this run."""
    load = settings.busy
    if load is None:
        return None
    rows = []
    for item, quiet_row in zip(items, quiet, strict=True):
        with LoadRunning(load):
            row = bench_prompt(engine, item, settings, on_stage)
        row["busy"] = True
        row["quiet_speedup"] = quiet_row["speedup"]
        rows.append(row)
        if on_row:
            on_row(row)
    figures = aggregate(rows)
    quiet_median = statistics.median(r["speedup"] for r in quiet)
    if quiet_median > 0 and figures.get("median_speedup") is not None:
        figures["median_speedup_vs_quiet"] = round(figures["median_speedup"] / quiet_median, 4)
    return {"load": load.describe(), "prompts": rows, "aggregate": figures}


def _repacking(engine: Engine) -> list[RepackVerdict]:
    """The weight-repacking verdict each loaded model was loaded with, target first: a
    model with no AMX weight types loads repacked whatever the machine's verdict."""
    return [m.repacking for m in (engine.target, engine.draft) if m is not None]


def _repacking_words(verdicts: list[RepackVerdict]) -> str:
    """One verdict's words, or each model's, target first, where they differ."""
    if len({v.describe() for v in verdicts}) == 1:
        return verdicts[0].describe()
    named = zip(("target", "draft"), verdicts, strict=True)
    return "; ".join(f"{name}: {v.describe()}" for name, v in named)


def peak_rss_bytes() -> int | None:
    """Peak resident memory of this process (None where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)
