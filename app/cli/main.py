"""Command line: ``--version``, ``generate``, ``bench``, ``serve``, hub and lab commands, or the
window."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.cli.options import (
    add_model_options,
    add_sampling_options,
    model_specs,
    sampler_config,
    spec_config,
)
from app.engine.config import (
    GenerationRequest,
)
from app.engine.figures import rate, speed_text
from app.engine.machine_load import MachineLoad
from app.errors import SpecDeckError
from app.files.fileio import atomic_write_text, error_text

if TYPE_CHECKING:
    from app.engine.bench import ReferenceRun
    from app.engine.events import RunSummary

COLOURS = {"accepted": "\033[32m", "resampled": "\033[31m", "bonus": "\033[34m", "target": ""}
RESET = "\033[0m"
# ``bench --reference``'s runner: a developer tool, looked up by name (see ``reference_run``)
REFERENCE_MODULE = "app.devtools.reference"


def cmd_generate(args: argparse.Namespace) -> int:
    """Stream one answer; the models run in an engine process, so a llama.cpp crash is an
    error message naming the file, not a dead terminal."""
    from app.engine.events import GuardEvent, RunSummary, TextTail, TokenEvent
    from app.engine.process.host import EngineHost, LoadRequest
    from app.models.drafting import pair_drafting
    from app.models.guard_words import message

    target, draft, source = model_specs(args)
    drafting = pair_drafting(target.path, draft.path if draft else None, source)
    host = EngineHost()
    try:
        info = host.load(LoadRequest(target, draft, source))
        if info.threads is not None:
            print(f"[threads] {info.threads.reason}", file=sys.stderr)
        prompt = host.tokenize_chat([{"role": "user", "content": args.prompt}])
        request = GenerationRequest(
            prompt,
            max_tokens=args.max_tokens,
            sampler=sampler_config(args),
            spec=spec_config(args),
            ignore_eos=args.ignore_eos,
        )
        colour = sys.stdout.isatty() and not args.no_colour
        summary = None
        for events in host.generate(request):
            for event in events:
                if isinstance(event, TokenEvent):
                    code = COLOURS[event.kind.value] if colour else ""
                    sys.stdout.write(f"{code}{event.piece}{RESET if code else ''}")
                elif isinstance(event, TextTail):
                    sys.stdout.write(event.text)
                elif isinstance(event, GuardEvent):
                    print(f"\n[guard] {message(event, drafting)}", file=sys.stderr)
                elif isinstance(event, RunSummary):
                    summary = event
            sys.stdout.flush()
        print()
        assert summary is not None
        _print_summary(summary)
        if args.compare:
            base = host.run(replace(request, speculative=False))
            _print_summary(base)
            check = host.compare(prompt, summary.token_ids, base.token_ids)
            print(f"speedup ×{summary.tok_s / base.tok_s:.2f} — {check.describe()}")
    finally:
        host.close()
    return 0


def _print_summary(s: RunSummary) -> None:
    print(
        f"[{s.mode}] {s.tokens} tokens, {speed_text(s.tok_s)}, TTFT {s.ttft_ms:.0f} ms, "
        f"acceptance {s.acceptance_rate:.1%}, mean accepted {s.mean_accepted_length:.2f}, "
        f"target passes/token {s.target_passes_per_token:.3f}, ITL p50 {s.p50_itl_ms:.1f} ms "
        f"p95 {s.p95_itl_ms:.1f} ms, outside llama_decode {s.overhead_fraction:.1%}, "
        f"stop: {s.stop_reason.value}",
        file=sys.stderr,
    )


def reference_run() -> ReferenceRun:
    """llama.cpp's own speculative program for ``bench --reference``, from the developer tools.

    The command line sits below the developer tools (``pyproject.toml``'s contracts) and the
    installers leave them out, so they are looked up by name when asked for, never imported;
    where they are absent, ``--reference`` is refused in words."""
    try:
        found = importlib.util.find_spec(REFERENCE_MODULE)
    except ModuleNotFoundError:
        found = None
    if found is None:
        raise SpecDeckError(
            "bench --reference is not in this build: the developer tools are left out of "
            "installers. Run SpecDeck from its source to compare with llama.cpp's own program."
        )
    runner: ReferenceRun = importlib.import_module(REFERENCE_MODULE).run_reference
    return runner


def cmd_bench(args: argparse.Namespace) -> int:
    from app.engine.bench import BenchSettings, run_bench

    if not args.draft and not args.ngram and args.draft_source is None:
        raise SpecDeckError("bench needs --draft FILE, --ngram or --draft-source mtp")
    reference = reference_run() if args.reference else None
    target, draft, source = model_specs(args)
    settings = BenchSettings(
        max_tokens=args.max_tokens,
        sampler=sampler_config(args),
        spec=spec_config(args),
        reference=reference,
        ignore_eos=args.ignore_eos,
        token_probs=not args.no_token_probs,
        rounds=args.rounds,
        max_rounds=max(args.max_rounds, args.rounds),
        busy=machine_load(args.busy),
    )

    def show(row: dict) -> None:
        ref = f" ref {rate(row['reference_tok_s'])}" if "reference_tok_s" in row else ""
        equal = row.get("speedup_at_equal_passes")
        at_equal = f" (×{equal:.2f} at equal passes)" if equal is not None else ""
        verdict = (
            "identical"
            if row["identical"]
            else (f"diverged@{row['first_divergence']} margin {row['divergence_margin']}")
        )
        name = f"[busy] {row['id']}" if row.get("busy") else row["id"]
        print(
            f"{name}: base {rate(row['baseline_tok_s'])} spec {rate(row['speculative_tok_s'])}"
            f"{ref} tok/s ×{row['speedup']:.2f}{at_equal} acc {row['acceptance_rate']:.2f} "
            f"host {row['host_ms_per_token']:.3f}/{row['baseline_host_ms_per_token']:.3f} "
            f"ms/tok copied {row['copied']:.0%} pauses {row['guard_pauses']} {verdict}"
            + (f" {row['noisy']}" if row.get("noisy") else ""),
            file=sys.stderr,
        )

    prompts = bench_prompts(Path(args.prompts))
    results = results_file(args.json)  # before the run: an hour's results are never lost
    if args.in_process:
        from app.engine.process.host import check_before_load

        check_before_load(target, draft, source)  # as every load through the engine host
        result = run_bench(target, draft, prompts, settings, source=source, on_row=show)
    else:  # a llama.cpp crash becomes an error naming the file; timings are taken in the child
        from app.engine.process.host import run_bench_in_child
        from app.engine.process.protocol import BenchRequest

        request = BenchRequest(target, draft, tuple(prompts), settings, source)
        result = run_bench_in_child(request, on_row=show)
    print(f"threads: {result['lineage']['threads_reason']}", file=sys.stderr)
    pair = result["aggregate"].get("pair")
    if pair:
        print(
            f"pair: a draft pass costs {pair['draft_cost_fraction']:.0%} of a target pass; "
            f"with every drafted token accepted it could reach at most "
            f"×{pair['ceiling_speedup']:.2f} (draft length {pair['ceiling_draft_len']})",
            file=sys.stderr,
        )
    print(json.dumps(result["aggregate"], indent=2))
    if "busy" in result:
        print(f"busy machine, {result['busy']['load']}:", file=sys.stderr)
        print(json.dumps(result["busy"]["aggregate"], indent=2))
    write_results(results, json.dumps(result, indent=2))  # after the figures: kept on screen
    return 0


def bench_prompts(path: Path) -> list[dict[str, str]]:
    """A bench's prompts, read as the Lab reads a suite file: bounded, a regular file, every
    line an object whose id and prompt are checked; a fault is named by file and line. A
    prompt may fill the file (``depth_prompts`` writes 16,384-token prompts, far past the
    Lab's prompt length)."""
    from app.lab.suites import MAX_FILE_BYTES, load_jsonl

    prompts = load_jsonl(path, max_prompt_chars=MAX_FILE_BYTES)
    return [{"id": prompt.id, "prompt": prompt.text} for prompt in prompts]


def results_file(text: str) -> Path:
    """Where ``bench --json`` writes, refused in words unless a file can be written there.
    A link is followed (the results replace the file it names, the link stays); anything
    else than a regular file is refused, as the write replaces the file whole (run as root,
    ``--json /dev/null`` had replaced the device with a regular file)."""
    path = Path(text).resolve()
    if path.is_dir():
        raise SpecDeckError(f"--json {text} is a folder: name the file to write the results to")
    if path.exists() and not path.is_file():
        raise SpecDeckError(
            f"--json {text} is not a regular file: name a file to write the results to"
        )
    folder = path.parent
    if not folder.is_dir():
        missing = "is not a folder" if folder.exists() else "does not exist"
        raise SpecDeckError(f"--json {text}: the folder {folder} {missing}")
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".specdeck-bench-", suffix=".tmp")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise SpecDeckError(f"--json {text}: cannot write in {folder}: {error_text(exc)}") from None
    return path


def write_results(path: Path, text: str) -> None:
    """The results, written whole; where that fails (the disk filled during the run) they are
    kept in the temporary folder and the error says where."""
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        why, kept = error_text(exc), None
        try:
            handle, kept = tempfile.mkstemp(prefix="specdeck-bench-", suffix=".json")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as second:
            if kept is not None:
                Path(kept).unlink(missing_ok=True)
            raise SpecDeckError(
                f"--json {path}: cannot write the results ({why}), nor keep them in the "
                f"temporary folder ({error_text(second)}); the figures above are all there is"
            ) from None
        raise SpecDeckError(
            f"--json {path}: cannot write the results ({why}); they were kept in {kept}"
        ) from None


def machine_load(text: str | None) -> MachineLoad | None:
    if text is None:
        return None
    try:
        return MachineLoad.parse(text)
    except ValueError as exc:
        raise SpecDeckError(f"--busy: {exc}") from None


def cmd_version(_: argparse.Namespace) -> int:
    from app.engine.llama.hardware import version_report

    print(version_report(__version__))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specdeck", description="SpecDeck")
    parser.add_argument("--version", action="store_true", help="versions, llama.cpp, devices")
    parser.add_argument("--screenshot", metavar="PATH", help="save a PNG of the window and exit")
    parser.add_argument("--demo", action="store_true", help="with --screenshot: run a demo answer")
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate", help="stream one answer with coloured tokens")
    add_model_options(gen)
    add_sampling_options(gen, max_tokens=256)
    gen.add_argument("--compare", action="store_true", help="also run target-only and compare")
    gen.add_argument("--no-colour", action="store_true")
    gen.add_argument("prompt")
    gen.set_defaults(func=cmd_generate)
    bench = sub.add_parser("bench", help="target-only vs speculative on a JSONL prompt set")
    add_model_options(bench)
    add_sampling_options(bench, max_tokens=128)
    bench.add_argument("--prompts", required=True, help="JSONL with id and prompt")
    bench.add_argument("--json", required=True, help="where to write the results")
    bench.add_argument(
        "--no-token-probs",
        action="store_true",
        help="skip p(x)/q(x) per token (the window's hover details)",
    )
    bench.add_argument(
        "--reference",
        action="store_true",
        help="also run llama.cpp's llama-speculative-simple (built on first use)",
    )
    bench.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="target-only and speculative runs per prompt, taking turns to go first",
    )
    bench.add_argument(
        "--max-rounds",
        type=int,
        default=6,
        help="rounds a prompt runs in all where its first rounds' speedups disagree by more "
        "than a tenth (default 6)",
    )
    bench.add_argument(
        "--busy",
        metavar="LOAD",
        help="also run every prompt with the machine kept busy, after all of them quiet: "
        "bursts[:SEED] (all cores spinning and streaming memory for 0.2-3 s, idle as long) "
        "or steady:SHARE (that share of the cores busy)",
    )
    bench.add_argument(
        "--in-process",
        action="store_true",
        help="run the models in this process (a llama.cpp crash ends it)",
    )
    bench.set_defaults(func=cmd_bench)
    try:
        from app.cli.hub import register
    except ImportError:  # the hub commands ship with the model library
        pass
    else:
        register(sub)
    from app.cli.lab import register as register_lab
    from app.cli.serve import register as register_serve

    register_lab(sub)
    register_serve(sub)
    return parser


def run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.version:
            return cmd_version(args)
        if getattr(args, "func", None) is not None:
            return int(args.func(args))
        from app.ui.main import run_gui

        return run_gui(argv, screenshot=args.screenshot, demo=args.demo)
    except SpecDeckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
