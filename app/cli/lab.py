"""``python -m app lab run|resume|report``: the Lab on the command line.

``run`` states the claim, runs the tuning part, picks the best configuration, runs it on the
held-out confirmation part and prints the verdict; results go to a JSONL file after every
prompt. ``resume`` continues a killed run; ``report`` writes JSON, CSV or HTML from a file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.engine.config import DEFAULT_SEED
from app.errors import SpecDeckError

DEFAULT_OUT = "lab-results.jsonl"


def register(subparsers: Any) -> None:
    lab = subparsers.add_parser("lab", help="does a pair pay off on my prompts? (evidence)")
    actions = lab.add_subparsers(dest="lab_command", required=True)

    run = actions.add_parser("run", help="run configurations against the target alone")
    run.add_argument("--target", required=True, help="target GGUF file")
    run.add_argument(
        "--draft",
        help="draft GGUF: without --config, compares adaptive drafting with it and n-gram drafting",
    )
    run.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME:key=value,...",
        help="a configuration, e.g. fixed8:draft=d.gguf,n=8, ng:ngram,n=4 or heads:mtp "
        "(keys: draft, ngram[=N], mtp, n, adaptive[=MAX], rule, temp, p_min, guard; "
        "remote: server=URL, kind=llama-server|vllm, baseline=URL)",
    )
    run.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME|FILE.jsonl",
        help="built-in categories (comma-separated, or 'builtin' for all) or a "
        "JSONL file with id, prompt, category; default: all built-in",
    )
    run.add_argument(
        "--from-conversations",
        type=int,
        default=0,
        metavar="N",
        help="also use your N most recent chat prompts (anonymised ids)",
    )
    run.add_argument("--out", default=DEFAULT_OUT, help="result file (JSON lines)")
    run.add_argument("--repeats", type=int, default=1)
    run.add_argument("--max-tokens", type=int, default=64)
    run.add_argument("--seed", type=int, default=DEFAULT_SEED)
    run.add_argument("--ignore-eos", action="store_true")
    run.add_argument("--ctx", type=int, default=4096)
    run.add_argument("--threads", type=int, default=0)
    run.add_argument("--gpu-layers", type=int, default=-1)
    run.add_argument("--repack", default="auto", choices=["auto", "on", "off"])
    run.add_argument(
        "--claim-speedup",
        type=float,
        default=1.3,
        help="the claimed median speedup over the target alone (default 1.3)",
    )
    run.add_argument("--claim-category", help="the category the claim is about (default: all)")
    run.add_argument(
        "--claim-config",
        help="the configuration the claim is about (default: the best on the tuning part)",
    )
    run.add_argument("--confirm-fraction", type=float, default=1 / 3)
    run.add_argument("--split-salt", default="specdeck-lab")
    _add_exports(run)
    run.set_defaults(func=cmd_run)

    resume = actions.add_parser("resume", help="continue a run that was stopped or killed")
    resume.add_argument("results", help="the run's result file")
    _add_exports(resume)
    resume.set_defaults(func=cmd_resume)

    report = actions.add_parser("report", help="write exports of a result file")
    report.add_argument("results", help="a result file")
    _add_exports(report)
    report.set_defaults(func=cmd_report)


def _add_exports(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", help="write a self-contained HTML report here")
    parser.add_argument("--json", help="write the analysis as JSON here")
    parser.add_argument("--csv", help="write one row per run as CSV here")
    parser.add_argument(
        "--paths",
        action="store_true",
        help="show model files' full paths in the HTML and JSON (default: file name and "
        "sha256, so a shared report shows no folder or user name)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-prompt progress lines")


def _prompts(args: argparse.Namespace) -> list:
    from app.lab.suites import builtin, from_conversations, load_jsonl
    from app.store.conversations import ConversationStore

    prompts: list = []
    for item in args.suite or (["builtin"] if not args.from_conversations else []):
        if item == "builtin":
            prompts += builtin()
        elif item.endswith(".jsonl") or Path(item).exists():
            prompts += load_jsonl(Path(item))
        else:
            prompts += builtin([c.strip() for c in item.split(",") if c.strip()])
    if args.from_conversations:
        prompts += from_conversations(ConversationStore(), limit=args.from_conversations)
    return prompts


def _configs(args: argparse.Namespace) -> tuple:
    from app.lab.configs import LabConfig, parse_config

    if args.config:
        return tuple(parse_config(text) for text in args.config)
    if args.draft:
        return (parse_config(f"adaptive:draft={args.draft}"), LabConfig("ngram", source=_ngram()))
    return (LabConfig("ngram", source=_ngram()),)


def _ngram() -> Any:
    from app.engine.config import DraftSource

    return DraftSource.NGRAM


def cmd_run(args: argparse.Namespace) -> int:
    from app.lab.configs import check_drafting
    from app.lab.plan import Claim, LabPlan
    from app.lab.runner import LabRunner, target_spec

    for path in [args.target, *(c.draft for c in _configs(args) if c.draft)]:
        if not Path(path).is_file():
            raise SpecDeckError(f"model file not found: {path}")
    check_drafting(_configs(args), args.target)
    plan = LabPlan(
        target=target_spec(
            args.target,
            n_ctx=args.ctx,
            threads=args.threads,
            gpu_layers=args.gpu_layers,
            repack=args.repack,
        ),
        configs=_configs(args),
        prompts=tuple(_prompts(args)),
        repeats=args.repeats,
        max_tokens=args.max_tokens,
        seed=args.seed,
        ignore_eos=args.ignore_eos,
        salt=args.split_salt,
        confirm_fraction=args.confirm_fraction,
        claim=Claim(args.claim_speedup, args.claim_category, args.claim_config),
    )
    parts = plan.split
    print(f"claim: {plan.claim.describe()}", file=sys.stderr)
    print(
        f"{len(plan.prompts)} prompts in {len(plan.categories)} categories: "
        f"{len(parts.tuning)} tuning, {len(parts.confirmation)} held out for confirmation; "
        f"results in {args.out}",
        file=sys.stderr,
    )
    runner = LabRunner.start(plan, Path(args.out))
    return _drive(runner, args)


def cmd_resume(args: argparse.Namespace) -> int:
    from app.lab.runner import LabRunner

    runner = LabRunner.resume(Path(args.results))
    groups = len(runner.log.of_kind("prompt"))
    print(f"resuming {args.results}: {groups} prompt run(s) already recorded", file=sys.stderr)
    return _drive(runner, args)


def _drive(runner: Any, args: argparse.Namespace) -> int:
    from app.lab.runner import Progress

    def show(progress: Progress) -> None:
        if args.quiet or progress.record is None:
            return
        runs = progress.record["runs"]
        base = next(iter(progress.record["baselines"].values()))["tok_s"]
        speedups = " ".join(
            f"{name} ×{(run['tok_s'] / base) if base else 0:.2f}" for name, run in runs.items()
        )
        eta = "" if progress.eta_s is None else f" ETA {progress.eta_s:.0f}s"
        print(
            f"[{progress.done}/{progress.total}{eta}] {progress.phase} {progress.prompt}: "
            f"{speedups}",
            file=sys.stderr,
        )

    try:
        finished = runner.run(show)
    except KeyboardInterrupt:
        print(f"\nstopped; `python -m app lab resume {runner.log.path}` continues", file=sys.stderr)
        return 130
    _exports(runner.log, args)
    _print_summary(runner.log)
    return 0 if finished else 1


def cmd_report(args: argparse.Namespace) -> int:
    from app.lab.results import ResultLog

    log = ResultLog.open(Path(args.results))
    _exports(log, args)
    _print_summary(log)
    return 0


def _exports(log: Any, args: argparse.Namespace) -> None:
    from app.files.fileio import atomic_write_text
    from app.lab import report

    for target, render in (
        (args.html, lambda: report.to_html(log, paths=args.paths)),
        (args.json, lambda: report.to_json(log, paths=args.paths)),
        (args.csv, lambda: report.to_csv(log)),
    ):
        if target:
            atomic_write_text(Path(target), render())
            print(f"wrote {target}", file=sys.stderr)


def _print_summary(log: Any) -> None:
    from app.lab.report import analysis_of, summary_lines
    from app.lab.stats import MIN_HELD_OUT_RUNS

    _, result = analysis_of(log)
    if not result.rows:
        raise SpecDeckError(f"{log.path} holds no finished prompts yet")
    print("\n".join(summary_lines(result)))
    print()
    print(f"recommendations (each from at least {MIN_HELD_OUT_RUNS} held-out runs):")
    for rec in result.recommendations:
        print(f"  {rec.describe()}")
    print()
    print(result.verdict.describe())
