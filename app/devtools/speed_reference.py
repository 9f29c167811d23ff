"""SpecDeck's engine against llama.cpp's own ``llama-server``, one drafting method at a time.

``python -m app.devtools.speed_reference METHOD (TARGET [DRAFT] | --synthetic tiny|large)
[--tokens N] [--draft-max K] [--rounds R] [--passes P] [--threads T]
[--prompt 1,300,310 | --text "..."]``

METHOD is one of ``draft-model``, ``lookups``, ``mtp``, ``assistant``, ``eagle3``, ``dflash``,
``dspark``, or ``all`` with ``--synthetic`` (each method's pair in turn, one JSON line each);
DRAFT is the second file the method needs (the draft model, the assistant, the head), none for
lookups and MTP. ``--synthetic`` writes the method's synthetic pair into a
temporary folder instead (``app.devtools.speed_pairs``: the tiny pair the tests use, or a
larger target whose pass costs milliseconds).

It starts llama-server (built from the llama.cpp vendored in the installed llama-cpp-python,
so the same llama.cpp) drafting with that method (``--spec-type``), asks it for N greedy
tokens after a token-id prompt (``--text`` is tokenized by the target first), then has
SpecDeck's engine process answer the same prompt with the same drafting policy (fixed K tokens
a step, no p-min, no guard, no lookups before the model: what the server does), and
target-only. It prints one JSON object: whether the three token sequences are identical, both
sides' acceptance (accepted / drafted), each one's tokens/sec (best of R rounds, prompt
processing excluded on both sides, nothing streamed), and SpecDeck's speed as a share of the
server's: best against best, and the median of each round's own ratio (the sides of a round
ran seconds apart, so share that moment's load). End-of-generation stops both (the server's
``ignore_eos`` bans the token instead of passing it, so the runs would differ there); the
server returns that last token, SpecDeck does not.

``--passes P`` runs the whole comparison P times, each with a fresh server and engine process
(a pass is what a second command would measure), and reports the best of all of them: the
same best ÷ best, over every round of every pass, beside each pass's own figure.

Lookups are the one method whose policies differ: the server's ``ngram-simple`` drafts what
followed the last earlier match of exactly the last 3 tokens, SpecDeck's lookups the longest
of the last 3, 2 or 1; the acceptance columns say how far that changes the drafts.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.devtools.arguments import Arguments, parse_arguments
from app.devtools.llama_server import ServerSetup, greedy_answer, greedy_args, running_server
from app.devtools.reference import llama_cpp_tool
from app.devtools.speed_pairs import WITHOUT_LARGE, synthetic_pair
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SpecConfig
from app.engine.events import RunSummary
from app.engine.process.host import EngineHost, LoadRequest

PROMPT = (1, 300, 310, 320, 330, 301)
REFERENCE_CTX = 2048
LOOKUP_N = SpecConfig().ngram_n  # the longest n-gram SpecDeck's lookups match


@dataclass(frozen=True)
class Method:
    """How llama-server is told to draft (``--spec-type``), whether it needs a second file
    (``-md``), and where SpecDeck's engine drafts from."""

    spec_type: str
    with_draft: bool
    source: DraftSource = DraftSource.MODEL


METHODS = {
    "draft-model": Method("draft-simple", True),
    "lookups": Method("ngram-simple", False, DraftSource.NGRAM),
    "mtp": Method("draft-mtp", False, DraftSource.MTP),
    "assistant": Method("draft-mtp", True),
    "eagle3": Method("draft-eagle3", True),
    "dflash": Method("draft-dflash", True),
    "dspark": Method("draft-dspark", True),
}


def server_args(method: Method, draft: Path | None, draft_max: int, gpu_layers: str) -> list[str]:
    """llama-server's drafting arguments: the method, fixed K tokens a step, no p-min."""
    args = ["-md", str(draft), "-ngld", gpu_layers] if method.with_draft else []
    args += ["--spec-type", method.spec_type, "--spec-draft-n-max", str(draft_max)]
    args += ["--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]
    if method.source is DraftSource.NGRAM:
        args += ["--spec-ngram-simple-size-n", str(LOOKUP_N)]
        args += ["--spec-ngram-simple-size-m", str(draft_max)]
    return args


def load_request(
    method: Method, target: Path, draft: Path | None, threads: int, sampling: str = "auto"
) -> LoadRequest:
    """What SpecDeck's engine process loads for ``method`` (``sampling``: where the sampler
    chain runs, ``ModelSpec.sampling``)."""
    target_spec = ModelSpec(str(target), n_ctx=REFERENCE_CTX, n_threads=threads, sampling=sampling)
    if not method.with_draft:
        return LoadRequest(target_spec, None, method.source)
    if draft is None:
        raise ValueError(f"{method.spec_type} needs a second file (the draft model or head)")
    draft_spec = ModelSpec(str(draft), n_ctx=REFERENCE_CTX, n_threads=threads, sampling=sampling)
    return LoadRequest(target_spec, draft_spec)


def _fixed_policy(
    prompt: list[int], n_tokens: int, draft_max: int, speculative: bool
) -> GenerationRequest:
    """The server's policy in SpecDeck's terms: fixed K tokens a step, no p-min, no guard, no
    lookups before the model; greedy, no hover probabilities."""
    spec = SpecConfig(draft_max=draft_max, adaptive=False, collapse_guard=False, ngram_first=False)
    return GenerationRequest(
        tuple(prompt), n_tokens, spec=spec, speculative=speculative, token_probs=False
    )


def _figures(runs: list[RunSummary]) -> dict[str, Any]:
    """The best of ``runs`` (tokens/sec): its tokens, speed, counts and time per token."""
    best = max(runs, key=lambda r: r.tok_s)
    return {
        "tokens": list(best.token_ids),
        "tok_s": round(best.tok_s, 2),
        "drafted": best.drafted,
        "accepted": best.accepted,
        "host_ms_per_token": round(best.host_ms_per_token, 4),
        "step_host_ms_per_token": round(best.step_host_ms_per_token, 4),
        "decode_ms_per_token": round(best.decode_s * 1000 / max(best.tokens, 1), 4),
        **per_step(best),
    }


def per_step(run: RunSummary) -> dict[str, Any]:
    """Where one decoding step's time went, averaged over the run's steps: the target's
    verification, the drafting (the draft's passes and its own host work), and the host's
    time outside llama_decode (the drafting's host work too, so the three overlap). Beside the
    server's milliseconds a step, this says which part of a step costs more than the
    server's (the GPU check's DFlash pair ran at 0.69× the server's speed with the same
    blocks, and tokens/sec alone could not say where)."""
    steps = max(run.passes, 1)
    return {
        "steps": run.passes,
        "verify_ms_per_step": round(sum(ms for _, ms in run.verify_passes) / steps, 4),
        "draft_ms_per_step": round(sum(d.draft_ms for d in run.per_drafter) / steps, 4),
        "host_ms_per_step": round(run.step_host_s * 1000 / steps, 4),
    }


def specdeck_run(
    load: LoadRequest, prompt: list[int], n_tokens: int, draft_max: int, rounds: int
) -> dict[str, Any]:
    """``load``'s answers in SpecDeck's engine process, target-only and speculative with the
    server's policy: the best of ``rounds`` of each."""
    host = EngineHost()
    try:
        host.load(load)
        runs = {
            "specdeck" if speculative else "target_only": _figures(
                [
                    host.run(_fixed_policy(prompt, n_tokens, draft_max, speculative))
                    for _ in range(rounds)
                ]
            )
            for speculative in (False, True)
        }
        check = host.compare(prompt, runs["specdeck"]["tokens"], runs["target_only"]["tokens"])
        return runs | {"exactness": check.describe()}
    finally:
        host.close()


def compare(
    method_name: str,
    target: Path,
    draft: Path | None,
    *,
    n_tokens: int,
    draft_max: int,
    rounds: int,
    threads: int = 1,
    prompt: list[int] | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """SpecDeck's engine and llama-server drafting with ``method_name`` on one pair: identity,
    acceptance and tokens/sec of both (``text``, when given, is tokenized by the target).

    Both run at once, each waiting while the other answers, and take turns round by round
    (server, SpecDeck target-only, SpecDeck speculative): on a shared machine a busy spell
    then slows one round of each side, not all of one side's."""
    method = METHODS[method_name]
    setup = ServerSetup(REFERENCE_CTX, threads)
    spec_args = server_args(method, draft, draft_max, setup.gpu_layers)
    binary = llama_cpp_tool("llama-server")
    host = EngineHost()
    try:
        host.load(load_request(method, target, draft, threads))
        tokens = list(host.tokenize(text)) if text else list(prompt or PROMPT)
        answers: list[dict[str, Any]] = []
        runs: dict[bool, list[RunSummary]] = {False: [], True: []}
        with running_server(
            binary, greedy_args(target, spec_args, setup), start_timeout_s=setup.timeout_s
        ) as url:
            for _ in range(rounds):
                answers.append(greedy_answer(url, tokens, n_tokens, setup.timeout_s))
                for speculative, done in runs.items():
                    done.append(host.run(_fixed_policy(tokens, n_tokens, draft_max, speculative)))
    finally:
        host.close()
    server = max(answers, key=lambda a: float(a["tok_s"]))
    # each round's sides ran seconds apart, so their ratio shares that moment's load, where
    # the best of each side may come from different moments
    round_ratios = sorted(
        spec.tok_s / float(answer["tok_s"])
        for spec, answer in zip(runs[True], answers, strict=True)
        if float(answer["tok_s"]) > 0
    )
    specdeck, target_only = _figures(runs[True]), _figures(runs[False])
    # the server's answer ends with the end-of-generation token when one stopped it
    served = answers[0]["tokens"]
    same = served[: len(specdeck["tokens"])] == specdeck["tokens"]
    return {
        "method": method_name,
        "spec_type": method.spec_type,
        "target": target.name,
        "draft": draft.name if draft else None,
        "prompt_tokens": len(tokens),
        "tokens": len(specdeck["tokens"]),
        "server_tokens": len(served),
        "draft_max": draft_max,
        "rounds": rounds,
        "threads": threads,
        "identical_to_server": same and len(served) - len(specdeck["tokens"]) in (0, 1),
        "identical_to_target_only": specdeck["tokens"] == target_only["tokens"],
        "server_tok_s": server["tok_s"],
        "specdeck_tok_s": specdeck["tok_s"],
        "target_only_tok_s": target_only["tok_s"],
        "specdeck_vs_server": round(specdeck["tok_s"] / server["tok_s"], 3),
        "specdeck_vs_server_round_median": round(statistics.median(round_ratios), 3)
        if round_ratios
        else None,
        "specdeck_vs_server_round_range": [round(round_ratios[0], 3), round(round_ratios[-1], 3)]
        if round_ratios
        else None,
        "server_drafted": server["drafted"],
        "server_accepted": server["accepted"],
        "specdeck_drafted": specdeck["drafted"],
        "specdeck_accepted": specdeck["accepted"],
        "server_acceptance": round(server["accepted"] / max(server["drafted"], 1), 4),
        "specdeck_acceptance": round(specdeck["accepted"] / max(specdeck["drafted"], 1), 4),
        "specdeck_step_host_ms_per_token": specdeck["step_host_ms_per_token"],
        "specdeck_decode_ms_per_token": specdeck["decode_ms_per_token"],
        "specdeck_steps": specdeck["steps"],
        "specdeck_verify_ms_per_step": specdeck["verify_ms_per_step"],
        "specdeck_draft_ms_per_step": specdeck["draft_ms_per_step"],
        "specdeck_host_ms_per_step": specdeck["host_ms_per_step"],
        "server_ms_per_step": server["ms_per_step"],
    }


def best_of_passes(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """One report for several passes of ``compare`` on one pair: the best tokens/sec of each
    side over all of them and their ratio (best ÷ best, as within a pass), identical only
    where every pass was, each pass's own ratio, round median and range beside them, and the
    rest (time per token, counts) from the pass of SpecDeck's best."""
    if len(passes) == 1:
        return passes[0]
    best = {
        side: max(float(p[side]) for p in passes)
        for side in ("server_tok_s", "specdeck_tok_s", "target_only_tok_s")
    }
    counts = ("server_drafted", "server_accepted", "specdeck_drafted", "specdeck_accepted")
    combined = {
        "passes": len(passes),
        "identical_to_server": all(p["identical_to_server"] for p in passes),
        "identical_to_target_only": all(p["identical_to_target_only"] for p in passes),
        "counts_same_every_pass": len({tuple(p[c] for c in counts) for p in passes}) == 1,
        "specdeck_vs_server": round(best["specdeck_tok_s"] / best["server_tok_s"], 3),
        "specdeck_vs_server_each_pass": [p["specdeck_vs_server"] for p in passes],
    }
    for figure in ("specdeck_vs_server_round_median", "specdeck_vs_server_round_range"):
        combined[f"{figure}_each_pass"] = [p[figure] for p in passes]
    fastest = max(passes, key=lambda p: float(p["specdeck_tok_s"]))
    one_pass = {k: v for k, v in fastest.items() if not k.startswith("specdeck_vs_server_round")}
    return one_pass | best | combined


def _report(method_name: str, paths: tuple[Path, ...], args: Arguments) -> dict[str, Any]:
    passes = max(int(args.get("--passes", "1")), 1)
    return best_of_passes(
        [
            compare(
                method_name,
                paths[0],
                paths[1] if len(paths) > 1 else None,
                n_tokens=int(args.get("--tokens", "256")),
                draft_max=int(args.get("--draft-max", "3")),
                rounds=int(args.get("--rounds", "3")),
                threads=int(args.get("--threads", "1")),
                prompt=args.token_ids("--prompt", PROMPT),
                text=args.options.get("--text"),
            )
            for _ in range(passes)
        ]
    )


def main(argv: list[str]) -> int:
    method_name = argv[0] if argv else ""
    synthetic = "--synthetic" in argv
    if method_name not in METHODS and not (method_name == "all" and synthetic):
        print(__doc__, file=sys.stderr)
        return 2
    n_paths = 0 if synthetic else 1 + METHODS[method_name].with_draft
    args = parse_arguments(argv[1:], n_paths, __doc__)
    if args is None:
        return 2
    if not synthetic:
        print(json.dumps(_report(method_name, args.paths, args)), flush=True)
        return 0
    size = args.get("--synthetic", "tiny")
    for name in METHODS if method_name == "all" else [method_name]:
        if method_name == "all" and size == "large" and name in WITHOUT_LARGE:
            continue
        with tempfile.TemporaryDirectory(prefix="speed-reference-") as folder:
            target, draft = synthetic_pair(name, Path(folder), size)
            paths = (target,) if draft is None else (target, draft)
            report = _report(name, paths, args) | {"synthetic": size}
        print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
