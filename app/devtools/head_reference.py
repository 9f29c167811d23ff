"""What the head references share: a drafting head (EAGLE-3, DFlash, DSpark) run by
llama-server beside the same head run by its probe, on token-id prompts, greedy.

``eagle3_reference`` and ``dflash_reference`` each say only how llama-server is told to draft
with their head and which probe drives it; the answers, the probe's run in a child process,
the rows that compare them and the command line are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.devtools.arguments import parse_arguments
from app.devtools.llama_server import post_json, running_server
from app.devtools.reference import llama_cpp_tool
from app.engine.config import usable_cores

PROMPTS = ((1, 300, 310, 320, 330, 301), (1, 290, 291))
ROOT = Path(__file__).resolve().parents[2]
# two threads, or one where this process may run on one core only: a thread without a core of
# its own makes every pass wait at llama.cpp's barrier (the test suite gives each worker one)
THREADS = str(min(2, len(usable_cores())))
SERVER_ARGS = ["-c", "1024", "-t", THREADS, "-ngl", "0", "-ngld", "0"]
SERVER_ARGS += ["--no-webui", "--parallel", "1"]


def server_runs(
    drafting_args: list[str], prompts: Sequence[list[int]], n_tokens: int
) -> list[dict[str, Any]]:
    """llama-server's greedy answers to ``prompts`` (``ignore_eos``, no prompt cache) with
    ``drafting_args`` (the models and the speculative type): tokens, drafted, accepted."""
    body = {"n_predict": n_tokens, "temperature": 0, "return_tokens": True}
    body |= {"cache_prompt": False, "ignore_eos": True}
    with running_server(llama_cpp_tool("llama-server"), drafting_args + SERVER_ARGS) as url:
        replies = [post_json(f"{url}/completion", body | {"prompt": p}) for p in prompts]
    return [
        {
            "tokens": [int(t) for t in reply["tokens"]],
            "drafted": int(reply["timings"].get("draft_n", 0)),
            "accepted": int(reply["timings"].get("draft_n_accepted", 0)),
        }
        for reply in replies
    ]


def probe_run(
    module: str, target: Path, head: Path, prompt: list[int], n_tokens: int, draft_max: int
) -> dict[str, Any]:
    """The probe ``module`` on one prompt in a child process: its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", module, str(target), str(head)]
        + ["--greedy", str(n_tokens), "--prompt", ",".join(map(str, prompt))]
        + ["--n-max", str(draft_max), "--ignore-eos"],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        name = module.rsplit(".", 1)[-1]
        raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def compared_rows(
    module: str,
    target: Path,
    head: Path,
    prompts: Sequence[list[int]],
    servers: Sequence[dict[str, Any]],
    n_tokens: int,
    draft_max: int,
    per_position: str,
) -> list[dict[str, Any]]:
    """Per prompt: whether the server's tokens equal the probe's target-only and
    speculative ones, and both sides' counts (``per_position``: the probe's own field)."""
    rows = []
    for prompt, server in zip(prompts, servers, strict=True):
        probe = probe_run(module, target, head, prompt, n_tokens, draft_max)
        rows.append(
            {
                "prompt": prompt,
                "server_tokens": server["tokens"],
                "server_equals_target_only": server["tokens"] == probe["target_only"],
                "server_equals_probe": server["tokens"] == probe["tokens"],
                "probe_identical": probe["identical"],
                "server_drafted": server["drafted"],
                "server_accepted": server["accepted"],
                "probe_drafted": probe["drafted"],
                "probe_accepted": probe["accepted"],
                f"probe_{per_position}": probe[per_position],
            }
        )
    return rows


def main_for(
    argv: list[str],
    doc: str | None,
    compare: Callable[[Path, Path, list[list[int]], int, int], dict[str, Any]],
    *,
    draft_max: int,
) -> int:
    """The command line of a head reference: ``TARGET HEAD [--tokens N] [--draft-max K]
    [--prompts "1,300,310;1,290,291"]``; prints ``compare``'s report as one JSON line."""
    args = parse_arguments(argv, 2, doc)
    if args is None:
        return 2
    target, head = args.paths
    chunks = [chunk for chunk in args.get("--prompts", "").split(";") if chunk]
    prompts = [[int(t) for t in chunk.split(",") if t] for chunk in chunks]
    report = compare(
        target,
        head,
        prompts or [list(p) for p in PROMPTS],
        int(args.get("--tokens", "200")),
        int(args.get("--draft-max", str(draft_max))),
    )
    print(json.dumps(report), flush=True)
    return 0
