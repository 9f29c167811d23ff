"""``python -m app.devtools.gpu_check.check --work DIR --bin DIR --out DIR [--budget-s S]
[--small]``: SpecDeck's engine on the fast pair and the MTP model, against target-only and
against llama.cpp's own llama-server built from the same sources, all layers on the GPU.

``device.sh`` runs it with ``llama_cpp`` loading the libllama in ``--bin``. Phases run in
order of importance and each is skipped, and said so, when the budget cannot hold it;
``gpu_check.json`` in ``--out`` is rewritten after every phase, so a run stopped at its time
limit still leaves what it measured, and a copy in ``--work`` lets the next run on the same
machine, build and models measure only the phases this one did not reach:

- ``fast_bench``: ``python -m app bench`` on the fast pair, SpecDeck's own policy (adaptive
  draft length, guard, n-gram first), T = 0: host ms/token, speedup over target-only,
  whether every output is identical, the pair's measured pass costs.
- ``fast_target_passes``: the fast pair's target alone in a fresh process, one pass over 1
  to 17 tokens: each size's first uses, its price repeated and between single passes, and
  with the bench's sampler chain (``pass_shapes``).
- ``fast_vs_server``: the fast pair with one fixed policy on both sides (K tokens a step, no
  p-min, no guard): SpecDeck's tokens/sec as a share of ``llama-server -md DRAFT
  --spec-type draft-simple``'s, and of its target-only, on one token-id prompt.
- ``mtp_vs_server``: the same for the MTP model against ``--spec-type draft-mtp``.
- ``dflash_vs_server``, ``dspark_vs_server``: the same for speed_pairs' synthetic DFlash and
  DSpark pairs (the "large" 768-wide target) against ``--spec-type draft-dflash`` /
  ``draft-dspark``; last, ``eagle3_vs_server``, ``assistant_vs_server`` and
  ``lookups_vs_server`` on theirs.
- ``fast_bench_t07``: the first phase at temperature 0.7.
- ``fast_bench_host_sampling``: the first phase with the sampler chain on the host
  (``--sampling host``): what sampling in ``llama_decode`` gains or costs on this GPU.
- ``dflash_vs_server_host_sampling``: last, ``dflash_vs_server`` with the chain on the host:
  the synthetic pairs' vocabulary is a few hundred tokens, where the chain's kernels per output
  row may cost more than reading the rows (DFlash reached 0.69 of llama-server, whose
  target-only token took what SpecDeck's pass alone did).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from app.devtools.gpu_check import pass_shapes
from app.devtools.gpu_check.models import (
    BLOCK_DRAFTERS,
    GPU_SHAPES,
    PAIR_METHODS,
    SMALL_SHAPES,
    Models,
    Shapes,
    write_models,
)
from app.devtools.llama_server import ServerSetup, greedy_run
from app.devtools.speed_reference import (
    METHODS,
    PROMPT,
    REFERENCE_CTX,
    load_request,
    server_args,
    specdeck_run,
)
from app.files.fileio import atomic_write_text, json_text

ALL_LAYERS = "999"
FAST_DRAFT_MAX = 8  # the fixed policy's draft length with a separate draft model
MTP_DRAFT_MAX = 3  # and with the model's own next-token block (mtp_reference's default)
PAIR_DRAFT_MAX = 3  # and on speed_pairs' pairs (speed_reference's default, the CPU table's)
BENCH_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number.",
    "Explain in three sentences what a hash table is.",
    "List five prime numbers and say why each is prime.",
)
# a phase starts only with this many seconds left (about twice what one should take on the
# GPU): one cut short by the call's limit loses only its own figures, $OUT still comes back
PHASE_SECONDS = 90


class Clock:
    def __init__(self, budget_s: float) -> None:
        self.deadline = time.monotonic() + budget_s

    def left(self) -> float:
        return self.deadline - time.monotonic()


def server_run(
    server: Path,
    model: Path,
    spec_args: list[str],
    prompt: list[int],
    n_tokens: int,
    rounds: int,
    threads: int,
    n_ctx: int,
) -> dict[str, Any]:
    """llama-server's greedy answer to a token-id prompt: best tokens/sec of ``rounds``."""
    setup = ServerSetup(n_ctx, threads, ALL_LAYERS, timeout_s=300, stop_timeout_s=20, log_tail=3000)
    # the first answer warms the server up (CUDA graphs, caches) and is not counted
    return greedy_run(
        server, model, spec_args, prompt, n_tokens, setup, rounds=rounds, warm_up=True
    )


def versus_server(
    server: Path,
    model: Path,
    draft: Path | None,
    draft_max: int,
    n_tokens: int,
    rounds: int,
    threads: int,
    method_name: str = "",
    sampling: str = "auto",
) -> dict[str, Any]:
    """SpecDeck and llama-server with the same fixed drafting policy, and both target-only;
    ``method_name`` is one of speed_reference's (default: a draft model, or MTP without one);
    ``sampling``: where SpecDeck's sampler chain runs (``ModelSpec.sampling``)."""
    prompt = list(PROMPT)
    method = METHODS[method_name or ("mtp" if draft is None else "draft-model")]
    spec_args = server_args(method, draft, draft_max, ALL_LAYERS)
    args = (prompt, n_tokens, rounds, threads, REFERENCE_CTX)
    served = server_run(server, model, spec_args, *args)
    plain = server_run(server, model, [], *args)
    # one more round on our side too: specdeck_run keeps the best of its rounds
    load = load_request(method, model, draft, threads, sampling)
    ours = specdeck_run(load, prompt, n_tokens, draft_max, rounds + 1)
    spec, base = ours["specdeck"], ours["target_only"]
    # the server's answer ends with the end-of-generation token when one stopped it
    same = served["tokens"][: len(spec["tokens"])] == spec["tokens"]
    return {
        "model": model.name,
        "draft": draft.name if draft else None,  # the target drafts for itself ("method")
        "draft_max": draft_max,
        "tokens": len(spec["tokens"]),
        "identical_to_server": same and len(served["tokens"]) - len(spec["tokens"]) in (0, 1),
        "identical_to_target_only": spec["tokens"] == base["tokens"],
        # where not: the first differing token and the target's top-two margin there
        "exactness": ours["exactness"],
        "specdeck_tok_s": spec["tok_s"],
        "specdeck_target_only_tok_s": base["tok_s"],
        "server_tok_s": served["tok_s"],
        "server_target_only_tok_s": plain["tok_s"],
        "specdeck_vs_server": round(spec["tok_s"] / served["tok_s"], 3),
        "specdeck_speedup": round(spec["tok_s"] / base["tok_s"], 3),
        "server_speedup": round(served["tok_s"] / plain["tok_s"], 3),
        "method": method.spec_type,
        "specdeck_drafted": spec["drafted"],
        "server_drafted": served["drafted"],
        "specdeck_acceptance": round(spec["accepted"] / max(spec["drafted"], 1), 4),
        "server_acceptance": round(served["accepted"] / max(served["drafted"], 1), 4),
        "specdeck_host_ms_per_token": spec["host_ms_per_token"],
        "specdeck_target_only_host_ms_per_token": base["host_ms_per_token"],
        # the same without the prompt's processing, and the passes' own time per token
        "specdeck_step_host_ms_per_token": spec["step_host_ms_per_token"],
        "specdeck_target_only_step_host_ms_per_token": base["step_host_ms_per_token"],
        "specdeck_decode_ms_per_token": spec["decode_ms_per_token"],
        "specdeck_target_only_decode_ms_per_token": base["decode_ms_per_token"],
        # one step's time, split: which part costs more than the server's whole step
        "specdeck_steps": spec["steps"],
        "specdeck_verify_ms_per_step": spec["verify_ms_per_step"],
        "specdeck_draft_ms_per_step": spec["draft_ms_per_step"],
        "specdeck_host_ms_per_step": spec["host_ms_per_step"],
        "specdeck_target_only_ms_per_step": round(
            base["verify_ms_per_step"] + base["host_ms_per_step"], 4
        ),
        "server_ms_per_step": served["ms_per_step"],
        "server_target_only_ms_per_step": plain["ms_per_step"],
    }


def bench(
    models: Models,
    shapes: Shapes,
    out: Path,
    name: str,
    temperature: float,
    threads: int,
    sampling: str = "auto",
) -> dict[str, Any]:
    """``python -m app bench`` on the fast pair, every layer of both models on the GPU."""
    prompts = models.target.parent / "bench_prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(BENCH_PROMPTS)
        )
    )
    result = out / f"{name}.json"
    command = [
        sys.executable,
        "-m",
        "app",
        "bench",
        "--target",
        str(models.target),
        "--draft",
        str(models.draft),
        "--prompts",
        str(prompts),
        "--json",
        str(result),
        "--gpu-layers",
        "-1",
        "--draft-gpu-layers",
        "-1",
        "--ctx",
        str(shapes.n_ctx),
        "--threads",
        str(threads),
        "--temperature",
        str(temperature),
        "--max-tokens",
        "128" if shapes is GPU_SHAPES else "48",
        "--sampling",
        sampling,
    ]
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise RuntimeError(f"bench exited {done.returncode}: {done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    aggregate = report["aggregate"]
    keep = (
        "median_host_ms_per_token",
        "median_baseline_host_ms_per_token",
        "median_speedup",
        "min_speedup",
        "median_speculative_tok_s",
        "median_baseline_tok_s",
        "median_acceptance_rate",
        "median_target_passes_per_token",
        "median_overhead_fraction",
        "prompts",
        "identical",
        "pair",
    )
    lineage = report["lineage"]
    return {k: aggregate[k] for k in keep if k in aggregate} | {
        "rows": [
            {
                k: r.get(k)
                for k in ("id", "speedup", "host_ms_per_token", "identical", "tokens", "sampling")
            }
            for r in report["prompts"]
        ],
        "gpus": lineage.get("gpus", []),
        "llama_cpp_system_info": lineage.get("llama_cpp_system_info"),
        "load_s": lineage.get("load_s"),
    }


def summary(phases: dict[str, Any]) -> dict[str, Any]:
    """The few figures the issue asks for, from the phases that ran."""
    out: dict[str, Any] = {}
    fast, fast_server = phases.get("fast_bench"), phases.get("fast_vs_server")
    if fast:
        out["fast_pair_host_ms_per_token"] = fast.get("median_host_ms_per_token")
        out["fast_pair_target_only_host_ms_per_token"] = fast.get(
            "median_baseline_host_ms_per_token"
        )
        out["fast_pair_speedup"] = fast.get("median_speedup")
        out["fast_pair_identical"] = f"{fast.get('identical')}/{fast.get('prompts')}"
        out["backend"] = (
            ", ".join(f"{g['name']} ({g['description']})" for g in fast.get("gpus", []))
            or "CPU only"
        )
    if fast_server:
        out["fast_pair_vs_llama_server"] = fast_server["specdeck_vs_server"]
        out["fast_pair_fixed_policy_speedup"] = fast_server["specdeck_speedup"]
        out["llama_server_fast_pair_speedup"] = fast_server["server_speedup"]
        out["fast_pair_fixed_policy_exactness"] = fast_server.get("exactness")
    mtp = phases.get("mtp_vs_server")
    if mtp:
        out["mtp_host_ms_per_token"] = mtp["specdeck_host_ms_per_token"]
        out["mtp_speedup"] = mtp["specdeck_speedup"]
        out["mtp_vs_llama_server"] = mtp["specdeck_vs_server"]
        out["llama_server_mtp_speedup"] = mtp["server_speedup"]
        out["mtp_exactness"] = mtp.get("exactness")
    for name in PAIR_METHODS:
        pair = phases.get(f"{name}_vs_server")
        if pair:
            out[f"{name}_host_ms_per_token"] = pair["specdeck_host_ms_per_token"]
            out[f"{name}_speedup"] = pair["specdeck_speedup"]
            out[f"{name}_vs_llama_server"] = pair["specdeck_vs_server"]
            out[f"llama_server_{name}_speedup"] = pair["server_speedup"]
            out[f"{name}_exactness"] = pair.get("exactness")
    passes = phases.get("fast_target_passes")
    if passes:
        out["fast_target_pass_ms"] = pass_shapes.summary(passes)
    on_host_dflash = phases.get("dflash_vs_server_host_sampling")
    if on_host_dflash:
        out["dflash_host_sampling_vs_llama_server"] = on_host_dflash["specdeck_vs_server"]
        out["dflash_host_sampling_decode_ms_per_token"] = on_host_dflash[
            "specdeck_decode_ms_per_token"
        ]
    fast_t07 = phases.get("fast_bench_t07")
    if fast_t07:
        out["fast_pair_t07_host_ms_per_token"] = fast_t07.get("median_host_ms_per_token")
        out["fast_pair_t07_speedup"] = fast_t07.get("median_speedup")
    on_host = phases.get("fast_bench_host_sampling")
    if on_host:
        out["fast_pair_host_sampling_host_ms_per_token"] = on_host.get("median_host_ms_per_token")
        out["fast_pair_host_sampling_speedup"] = on_host.get("median_speedup")
        out["fast_pair_host_sampling_tok_s"] = on_host.get("median_speculative_tok_s")
        if fast:
            out["fast_pair_device_sampling_tok_s"] = fast.get("median_speculative_tok_s")
    return out


def _earlier_phases(kept: Path, server: Path, shapes: Shapes) -> dict[str, Any]:
    """The phases an earlier call on this machine measured with this build and these models."""
    try:
        earlier: dict[str, Any] = json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if earlier.get("server") != str(server) or earlier.get("shapes") != shapes.label:
        return {}
    return dict(earlier.get("phases", {}))


def run_check(work: Path, server: Path, out: Path, shapes: Shapes, clock: Clock) -> dict[str, Any]:
    threads = min(8, os.cpu_count() or 1)
    n_tokens, rounds = (256, 2) if shapes is GPU_SHAPES else (48, 1)
    report: dict[str, Any] = {
        "what": "SpecDeck's engine against target-only and llama-server, every layer on the GPU",
        "shapes": shapes.label,
        "server": str(server),
        "threads": threads,
        "fixed_policy": {"tokens": n_tokens, "rounds": rounds, "prompt": list(PROMPT)},
        "summary": {},
        "phases": {},
        "seconds": {},
        "skipped": {},
        "errors": {},
    }
    # $OUT is emptied before every call; a copy here lets the next call on the still-warm
    # machine go on from the first phase this one did not reach
    kept = work / f"gpu_check.{shapes.label}.json"
    report["phases"] = _earlier_phases(kept, server, shapes)
    report["resumed"] = sorted(report["phases"])

    def save() -> None:
        report["summary"] = summary(report["phases"])
        text = json_text(report)
        atomic_write_text(out / "gpu_check.json", text)
        atomic_write_text(kept, text)

    began = time.monotonic()
    models = write_models(work, shapes)  # device.sh has written them during the build
    report["models"] = models.describe(shapes)
    report["seconds"]["models"] = round(time.monotonic() - began, 1)
    save()

    def pair_phases(
        methods: tuple[str, ...], sampling: str = "auto"
    ) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        named = "" if sampling == "auto" else f"_{sampling}_sampling"
        return [
            (
                f"{name}_vs_server{named}",
                partial(
                    versus_server,
                    server,
                    *models.pairs[name],
                    PAIR_DRAFT_MAX,
                    n_tokens,
                    rounds,
                    threads,
                    name,
                    sampling,
                ),
            )
            for name in methods
        ]

    phases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("fast_bench", lambda: bench(models, shapes, out, "bench_fast_t0", 0.0, threads)),
        (
            "fast_target_passes",
            lambda: pass_shapes.measure(models.target, shapes.n_ctx, threads),
        ),
        (
            "fast_vs_server",
            lambda: versus_server(
                server, models.target, models.draft, FAST_DRAFT_MAX, n_tokens, rounds, threads
            ),
        ),
        (
            "mtp_vs_server",
            lambda: versus_server(
                server, models.mtp, None, MTP_DRAFT_MAX, n_tokens, rounds, threads
            ),
        ),
        *pair_phases(BLOCK_DRAFTERS),
        ("fast_bench_t07", lambda: bench(models, shapes, out, "bench_fast_t07", 0.7, threads)),
        (
            "fast_bench_host_sampling",
            lambda: bench(models, shapes, out, "bench_fast_t0_host", 0.0, threads, "host"),
        ),
        *pair_phases(tuple(m for m in PAIR_METHODS if m not in BLOCK_DRAFTERS)),
        *pair_phases(("dflash",), "host"),
    ]
    for name, phase in phases:
        if name in report["phases"]:
            continue
        if clock.left() < PHASE_SECONDS:
            report["skipped"][name] = f"{clock.left():.0f} s left, under {PHASE_SECONDS} s"
            continue
        began = time.monotonic()
        try:
            report["phases"][name] = phase()
        except Exception as exc:  # one failed phase must not lose the others' figures
            report["errors"][name] = f"{type(exc).__name__}: {exc}"[-4000:]
        report["seconds"][name] = round(time.monotonic() - began, 1)
        save()
    return report


def main(argv: list[str]) -> int:
    options = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    shapes = SMALL_SHAPES if "--small" in argv else GPU_SHAPES
    out = Path(options["--out"])
    out.mkdir(parents=True, exist_ok=True)
    report = run_check(
        Path(options["--work"]),
        Path(options["--bin"]) / "llama-server",
        out,
        shapes,
        Clock(float(options.get("--budget-s", "540"))),
    )
    print(json.dumps(report["summary"], indent=1))
    if report["skipped"] or report["errors"]:
        print(json.dumps({"skipped": report["skipped"], "errors": report["errors"]}, indent=1))
    return 0 if report["phases"] and not report["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
