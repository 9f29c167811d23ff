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

from app.engine.hardware import detect_hardware
from app.gguf.compat import first_mismatch
from app.gguf.header import GGUFFormatError, model_facts, self_drafting, vocab_info
from app.models.downloads import DownloadCancelled, Downloader, DownloadProgress, human_bytes
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
        "check-pair", help="can DRAFT speculate for TARGET? (reads headers only)"
    )
    check.add_argument("target", help="local .gguf or owner/repo:file.gguf")
    check.add_argument("draft", help="local .gguf or owner/repo:file.gguf")
    check.set_defaults(func=cmd_check_pair)

    fit = subparsers.add_parser("fit", help="memory estimate of a pair on this machine")
    fit.add_argument("target", help="local .gguf or owner/repo:file.gguf")
    fit.add_argument("draft", help="local .gguf or owner/repo:file.gguf")
    fit.add_argument("--ctx", type=int, default=4096, help="context size (tokens)")
    fit.add_argument("--kv-type", default="f16", choices=list(KV_BYTES_PER_ELEMENT))
    fit.set_defaults(func=cmd_fit)


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _print_progress(progress: DownloadProgress) -> None:
    eta = f"{progress.eta_s:.0f} s left" if progress.eta_s is not None else ""
    part = f" part {progress.part}/{progress.parts}" if progress.parts > 1 else ""
    print(
        f"\r{progress.fraction:6.1%}  {human_bytes(progress.done)} / "
        f"{human_bytes(progress.total)}  {human_bytes(progress.speed_bps)}/s  {eta}{part}   ",
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
    try:
        target_ref, draft_ref = ModelRef.parse(args.target), ModelRef.parse(args.draft)
        headers = {"target": target_ref.read_header(), "draft": draft_ref.read_header()}
        target, draft = vocab_info(headers["target"]), vocab_info(headers["draft"])
        methods = {role: self_drafting(header).label for role, header in headers.items()}
    except (HubError, GGUFFormatError, ValueError, OSError) as exc:
        return _fail(str(exc))
    for role, label in methods.items():
        if label:  # a model with its own drafting method: MTP layers, an assistant, a head
            print(f"{role}: {label}")
    mismatch = first_mismatch(target, draft)
    if mismatch is None:
        print("compatible")
        return 0
    print(f"incompatible: {mismatch}")
    return 1


def cmd_fit(args: argparse.Namespace) -> int:
    try:
        refs = ModelRef.parse(args.target), ModelRef.parse(args.draft)
        facts = [model_facts(ref.read_header()) for ref in refs]
        sizes = [ref.size() for ref in refs]
        estimate = estimate_pair(facts[0], sizes[0], facts[1], sizes[1], args.ctx, args.kv_type)
    except (HubError, GGUFFormatError, ValueError, OSError) as exc:
        return _fail(str(exc))
    hardware = detect_hardware()
    result = assess(estimate, hardware)
    devices = ", ".join(f"{g.label} {gib(g.free_bytes)} free" for g in hardware.gpus) or "none"
    print(f"backend: {hardware.backend}; GPUs: {devices}; RAM {gib(hardware.ram_free)} free")
    for role, ref, mem, f in (
        ("target", refs[0], estimate.target, facts[0]),
        ("draft", refs[1], estimate.draft, facts[1]),
    ):
        assert mem is not None
        print(
            f"{role}: {ref} ({f.architecture}, {f.quantization}, {f.n_layer} layers) "
            f"weights {gib(mem.weights)}, KV {gib(mem.kv)}, compute {gib(mem.compute)}"
        )
    print(f"context {args.ctx} tokens, KV cache {args.kv_type}: {result.message}")
    print(result.label.value)
    return 1 if result.label.value == "does not fit" else 0
