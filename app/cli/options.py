"""The options ``generate``, ``bench`` and ``serve`` share (models, drafting, sampling), and
reading them into the engine's specs."""

from __future__ import annotations

import argparse

from app.engine.config import (
    DEFAULT_SEED,
    KV_TYPES,
    AcceptRule,
    DraftSource,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.errors import SpecDeckError
from app.store.settings import MAX_SEED, Invalid, check_value

# Each number an option takes, held to the range of the chat setting it stands for (one
# place for each range): llama.cpp takes a negative context or 100,000 threads and crashes
# or runs nonsense, and a NaN temperature or a draft length of 0 runs as if meant.
CHECKED_OPTIONS = (
    ("ctx", "n_ctx"),
    ("threads", "n_threads"),
    ("gpu_layers", "target_gpu_layers"),
    ("draft_gpu_layers", "draft_gpu_layers"),
    ("temperature", "temperature"),
    ("top_k", "top_k"),
    ("top_p", "top_p"),
    ("min_p", "min_p"),
    ("max_tokens", "max_tokens"),
    ("draft_max", "draft_max"),
    ("adaptive_max", "draft_max"),
    ("p_min", "p_min"),
)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="target GGUF file")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--draft", help="draft GGUF file (same vocabulary as the target)")
    source.add_argument("--ngram", action="store_true", help="prompt-lookup drafting, no model")
    parser.add_argument(
        "--draft-source",
        choices=[s.value for s in DraftSource],
        help="where drafts come from: model (--draft), ngram (prompt lookup) or mtp (the "
        "target's own next-token layers, no second file); default: model with --draft, "
        "else ngram",
    )
    parser.add_argument("--ctx", type=int, default=4096, help="context size (tokens)")
    free = "CPU threads (0: the cores other programs leave free at load)"
    parser.add_argument("--threads", type=int, default=0, help=free)
    parser.add_argument("--gpu-layers", type=int, default=-1, help="target layers on GPU (-1 all)")
    parser.add_argument("--draft-gpu-layers", type=int, default=-1)
    parser.add_argument("--kv-type", default="f16", choices=list(KV_TYPES))
    parser.add_argument("--flash-attn", default="auto", choices=["auto", "on", "off"])
    parser.add_argument(
        "--repack",
        default="auto",
        choices=["auto", "on", "off"],
        help="CPU weight repacking (auto: on unless it crashes this CPU)",
    )
    parser.add_argument(
        "--sampling",
        default="auto",
        choices=["auto", "device", "host"],
        help="where the sampler chain runs (auto: in llama_decode where the output layer is on "
        "a GPU, on the host where it is on the CPU)",
    )


def add_sampling_options(parser: argparse.ArgumentParser, *, max_tokens: int) -> None:
    parser.add_argument("--temperature", type=float, default=SamplerConfig.temperature)
    parser.add_argument("--top-k", type=int, default=SamplerConfig.top_k)
    parser.add_argument("--top-p", type=float, default=SamplerConfig.top_p)
    parser.add_argument("--min-p", type=float, default=SamplerConfig.min_p)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--max-tokens", type=int, default=max_tokens)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--draft-max", type=int, default=None, help="fixed draft length N")
    length.add_argument("--adaptive", action="store_true", help="adaptive draft length (default)")
    parser.add_argument("--adaptive-max", type=int, default=16, help="ceiling when adaptive")
    parser.add_argument(
        "--p-min",
        type=float,
        default=0.0,
        help="draft confidence cut-off per token (like llama.cpp --draft-p-min)",
    )
    parser.add_argument("--rule", default="rejection", choices=[r.value for r in AcceptRule])
    parser.add_argument("--no-guard", action="store_true", help="disable the collapse guard")
    parser.add_argument(
        "--no-ngram-first",
        action="store_true",
        help="with --draft: never let prompt-lookup drafts go first",
    )
    parser.add_argument(
        "--ignore-eos", action="store_true", help="do not stop at end-of-generation tokens"
    )


def draft_source(args: argparse.Namespace) -> DraftSource:
    """The draft source the options ask for, refused with a reason when they disagree."""
    if args.draft_source is None:
        return DraftSource.MODEL if args.draft else DraftSource.NGRAM
    source = DraftSource(args.draft_source)
    if source is DraftSource.MODEL and not args.draft:
        raise SpecDeckError("--draft-source model needs --draft FILE")
    if source is not DraftSource.MODEL and args.draft:
        raise SpecDeckError(
            f"--draft-source {source.value} drafts without a draft model: leave --draft out"
        )
    if source is DraftSource.MTP and args.ngram:
        raise SpecDeckError("--ngram and --draft-source mtp name different draft sources")
    if source is DraftSource.MTP:
        from app.models.drafting import self_drafting_problem

        problem = self_drafting_problem(args.target)
        if problem is not None:
            raise SpecDeckError(problem)
    return source


def _shown(value: object) -> str:
    """A number as short as it reads, never rounded: ``:g`` alone wrote --top-p 1.0000001
    as "1", beside "must be in (0, 1]"."""
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def check_numbers(args: argparse.Namespace) -> None:
    """Refuse, in words, a number outside the range the chat allows for the same setting."""
    for option, setting in CHECKED_OPTIONS:
        value = getattr(args, option, None)
        if value is None:
            continue
        try:
            check_value(setting, value)
        except Invalid as refused:
            flag = "--" + option.replace("_", "-")
            raise SpecDeckError(f"{flag} {_shown(value)}: {refused}") from None
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed <= MAX_SEED:  # the setting's words are the window's
        raise SpecDeckError(f"--seed {seed}: must be between 0 and {MAX_SEED}")


def model_specs(args: argparse.Namespace) -> tuple[ModelSpec, ModelSpec | None, DraftSource]:
    """The models and the draft source the options ask for; every number is checked first."""
    check_numbers(args)
    source = draft_source(args)
    common = dict(
        n_ctx=args.ctx,
        n_threads=args.threads,
        kv_type=args.kv_type,
        flash_attn=args.flash_attn,
        repack=args.repack,
        sampling=args.sampling,
    )
    target = ModelSpec(args.target, n_gpu_layers=args.gpu_layers, **common)
    if source is DraftSource.MODEL:
        draft = ModelSpec(args.draft, n_gpu_layers=args.draft_gpu_layers, **common)
        return target, draft, source
    return target, None, source


def sampler_config(args: argparse.Namespace) -> SamplerConfig:
    return SamplerConfig(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        seed=args.seed,
    )


def spec_config(args: argparse.Namespace) -> SpecConfig:
    fixed = args.draft_max is not None
    return SpecConfig(
        draft_max=args.draft_max if fixed else args.adaptive_max,
        adaptive=not fixed,
        p_min=args.p_min,
        rule=AcceptRule(args.rule),
        collapse_guard=not args.no_guard,
        ngram_first=not args.no_ngram_first,
    )
