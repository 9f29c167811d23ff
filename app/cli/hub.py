"""Hub and library subcommands: ``pull``, ``check-pair`` and ``fit``.

Models are named as local paths or ``owner/repo:file.gguf``; remote ones are inspected by
reading their GGUF headers over HTTP range requests, so nothing large is downloaded.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import PurePosixPath
from typing import Any

from app.cli.options import check_numbers
from app.engine.llama.hardware import detect_hardware
from app.errors import ModelLoadError, SpecDeckError
from app.gguf.check import not_a_target, pair_mismatch, validate_gguf_file
from app.gguf.facts import model_facts, self_drafting, vocab_info
from app.gguf.reader import GGUFFormatError
from app.models.downloads import DownloadCancelled, Downloader, DownloadProgress
from app.models.fit import KV_BYTES_PER_ELEMENT, assess, estimate_pair, gib
from app.models.hub import (
    GGUFFile,
    HubError,
    ModelRef,
    group_for_file,
    list_repo_files,
)
from app.models.library import Library, LibraryError, models_dir, split_parts


def register(subparsers: Any) -> None:
    pull = subparsers.add_parser("pull", help="download a GGUF from the Hub into the library")
    pull.add_argument("repo", help="Hub repository, owner/name")
    pull.add_argument(
        "file", help="GGUF file in the repository (part 1 of a split model fetches all parts)"
    )
    pull.add_argument("--revision", default="main")
    pull.add_argument("--offline", action="store_true", help="only use files already downloaded")
    pull.set_defaults(func=cmd_pull)

    check = subparsers.add_parser(
        "check-pair",
        help="how does TARGET draft, and can DRAFT speculate for it? (reads headers, and a "
        "block drafter's small d2t map)",
    )
    check.add_argument("target", help="local .gguf or owner/repo:file.gguf")
    check.add_argument(
        "draft",
        nargs="?",
        help="local .gguf or owner/repo:file.gguf (leave out for a target that drafts for "
        "itself with next-token layers)",
    )
    check.set_defaults(func=cmd_check_pair)

    fit = subparsers.add_parser("fit", help="memory estimate of a pair on this machine")
    fit.add_argument("target", help="local .gguf or owner/repo:file.gguf")
    fit.add_argument("draft", nargs="?", help="local .gguf or owner/repo:file.gguf")
    fit.add_argument("--ctx", type=int, default=4096, help="context size (tokens)")
    fit.add_argument("--kv-type", default="f16", choices=list(KV_BYTES_PER_ELEMENT))
    fit.add_argument(
        "--mtp",
        action="store_true",
        help="the target drafts for itself with its next-token (MTP) layers",
    )
    fit.set_defaults(func=cmd_fit)


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _print_progress(progress: DownloadProgress) -> None:
    eta = f"{progress.eta_s:.0f} s left" if progress.eta_s is not None else ""
    part = f" part {progress.part}/{progress.parts}" if progress.parts > 1 else ""
    print(
        f"\r{progress.fraction:6.1%}  {gib(progress.done)} / "
        f"{gib(progress.total)}  {gib(progress.speed_bps)}/s  {eta}{part}   ",
        end="",
        file=sys.stderr,
        flush=True,
    )


def cmd_pull(args: argparse.Namespace) -> int:
    downloader = Downloader(models_dir(), offline=args.offline)
    try:
        library = Library()
        if args.offline:
            # Only files SpecDeck downloaded itself: the name is checked like a Hub listing's.
            first = downloader.local_path(args.repo, args.file)
            parts = split_parts(first)
            folder = PurePosixPath(args.file).parent
            files = [GGUFFile((folder / p.name).as_posix(), -1, None) for p in parts]
            paths = downloader.download_files(args.repo, files)
        else:
            group = group_for_file(
                args.repo, list_repo_files(args.repo, revision=args.revision), args.file
            )
            if group.is_split:
                print(
                    f"{args.file} is part of a split model: fetching all {len(group.files)} parts",
                    file=sys.stderr,
                )
            for changed in downloader.changed_on_hub(args.repo, group.files):
                print(
                    f"{changed.path} changed on the Hub since it was downloaded: fetching the "
                    "new version (the old file stays until the new one is verified)",
                    file=sys.stderr,
                )
            cancel = threading.Event()
            try:
                paths = downloader.download_files(
                    args.repo,
                    list(group.files),
                    revision=args.revision,
                    cancel=cancel,
                    on_progress=_print_progress,
                )
            except KeyboardInterrupt:
                cancel.set()
                raise DownloadCancelled("interrupted; run the same command to resume") from None
            finally:
                print(file=sys.stderr)
        model = library.add_downloaded(args.repo, paths, models_root=models_dir())
    except (HubError, LibraryError) as exc:
        return _fail(str(exc))
    print(model.path)
    return 0


def cmd_check_pair(args: argparse.Namespace) -> int:
    """Each model's drafting method ("MTP, 1 head", "assistant draft for gemma4", "EAGLE-3
    head", "plain model"), then whether the draft's vocabulary fits the target's. 0: the pair
    (or a target drafting for itself) can speculate; 1: it cannot; 2: a file is unreadable."""
    try:
        refs = {"target": ModelRef.parse(args.target)}
        if args.draft:
            refs["draft"] = ModelRef.parse(args.draft)
        # a local file gets the engine's own check (its tensor data is all there, a block
        # drafter is whole); a Hub file its header alone
        headers = {
            role: ref.read_header() if ref.path is None else validate_gguf_file(ref.path)
            for role, ref in refs.items()
        }
        methods = {role: self_drafting(header) for role, header in headers.items()}
        vocabs = {role: vocab_info(header) for role, header in headers.items()}
    except (HubError, ModelLoadError, GGUFFormatError, ValueError, OSError) as exc:
        return _fail(str(exc))
    for role, method in methods.items():
        print(f"{role}: {method.name}")
    target = methods["target"]
    problem = not_a_target(target)
    if problem is not None:
        print(f"{problem}; check it as the draft of its target")
        return 1
    if "draft" not in vocabs:
        if target.method == "mtp":
            print("drafts for itself: no draft model needed")
        else:
            print("no draft given: n-gram drafting (prompt lookup) needs none")
        return 0
    try:
        mismatch = pair_mismatch(headers["target"], headers["draft"])
    except (GGUFFormatError, ValueError) as exc:
        return _fail(str(exc))
    if mismatch is None:
        print("compatible")
        return 0
    print(f"incompatible: {mismatch}")
    return 1


def cmd_fit(args: argparse.Namespace) -> int:
    if args.mtp and args.draft:
        return _fail("--mtp drafts with the target's own layers: leave the draft out")
    try:
        check_numbers(args)  # the chat's ranges, as every command: a context of -5 "fitted"
    except SpecDeckError as refused:
        return _fail(str(refused))
    try:
        refs = [ModelRef.parse(args.target)] + ([ModelRef.parse(args.draft)] if args.draft else [])
        facts = [model_facts(ref.read_header()) for ref in refs]
        sizes = [ref.size() for ref in refs]
        if args.mtp and facts[0].drafting.method != "mtp":
            return _fail(f"{refs[0]} has no next-token (MTP) layers ({facts[0].drafting.name})")
        draft, draft_size = (facts[1], sizes[1]) if args.draft else (None, 0)
        estimate = estimate_pair(
            facts[0], sizes[0], draft, draft_size, args.ctx, args.kv_type, mtp=args.mtp
        )
    except (HubError, GGUFFormatError, ValueError, OSError) as exc:
        return _fail(str(exc))
    hardware = detect_hardware()
    result = assess(estimate, hardware)
    devices = ", ".join(f"{g.label} {gib(g.free_bytes)} free" for g in hardware.gpus) or "none"
    print(f"backend: {hardware.backend}; GPUs: {devices}; RAM {gib(hardware.ram_free)} free")
    for role, ref, mem, f in zip(
        ("target", "draft"), refs, (estimate.target, estimate.draft), facts, strict=False
    ):
        assert mem is not None
        recurrent = f", recurrent state {gib(mem.recurrent)}" if mem.recurrent else ""
        print(
            f"{role}: {ref} ({f.architecture}, {f.quantization}, {f.n_layer} layers, "
            f"{f.drafting.name}) weights {gib(mem.weights)}, KV {gib(mem.kv)}{recurrent}, "
            f"compute {gib(mem.compute)}"
        )
    if estimate.mtp:
        t = estimate.target
        print(
            f"MTP context: KV {gib(t.mtp_kv)}, compute {gib(t.mtp_compute)} (the next-token "
            f"layers' weights, {gib(t.mtp_weights)}, are in the target's file)"
        )
    print(f"context {args.ctx} tokens, KV cache {args.kv_type}: {result.message}")
    print(result.label.value)
    return 1 if result.label.value == "does not fit" else 0
