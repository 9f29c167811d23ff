"""The EAGLE-3 probe's drafting against llama.cpp's own (``llama-server --spec-type
draft-eagle3 -md HEAD``).

``python -m app.devtools.eagle3_reference TARGET HEAD [--tokens N] [--draft-max K]
[--prompts "1,300,310;1,290,291"]`` starts llama-server (built from the llama.cpp vendored in
the installed llama-cpp-python, so the same llama.cpp) with the head drafting for the target,
asks it for N greedy tokens (``ignore_eos``) after each token-id prompt, runs
``app.devtools.eagle3_probe`` on the same prompts in a child process, and prints one JSON
object: per prompt, whether the server's tokens equal the probe's target-only and speculative
tokens, and both sides' drafted and accepted counts (equal when the probe drives the head as
llama.cpp does: the same drafts, accepted at the same places).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.devtools.arguments import parse_arguments
from app.devtools.llama_server import post_json, running_server
from app.devtools.reference import llama_cpp_tool

PROMPTS = ((1, 300, 310, 320, 330, 301), (1, 290, 291))
ROOT = Path(__file__).resolve().parents[2]


def server_runs(
    target: Path, head: Path, prompts: list[list[int]], n_tokens: int, draft_max: int
) -> list[dict[str, Any]]:
    """llama-server's greedy answers to ``prompts``, EAGLE-3 drafting on."""
    args = ["-m", str(target), "-md", str(head)]
    args += ["--spec-type", "draft-eagle3", "--spec-draft-n-max", str(draft_max)]
    args += ["--spec-draft-n-min", "0"]
    args += ["-c", "1024", "-t", "2", "-ngl", "0", "-ngld", "0", "--no-webui"]
    args += ["--parallel", "1"]
    with running_server(llama_cpp_tool("llama-server"), args) as url:
        replies = [
            post_json(
                f"{url}/completion",
                {
                    "prompt": prompt,
                    "n_predict": n_tokens,
                    "temperature": 0,
                    "return_tokens": True,
                    "cache_prompt": False,
                    "ignore_eos": True,
                },
            )
            for prompt in prompts
        ]
    return [
        {
            "tokens": [int(t) for t in reply["tokens"]],
            "drafted": int(reply["timings"].get("draft_n", 0)),
            "accepted": int(reply["timings"].get("draft_n_accepted", 0)),
        }
        for reply in replies
    ]


def probe_run(
    target: Path, head: Path, prompt: list[int], n_tokens: int, draft_max: int
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.eagle3_probe", str(target), str(head)]
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
        raise RuntimeError(f"eagle3_probe exited {done.returncode}: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def compare(
    target: Path, head: Path, prompts: list[list[int]], n_tokens: int, draft_max: int
) -> dict[str, Any]:
    servers = server_runs(target, head, prompts, n_tokens, draft_max)
    rows = []
    for prompt, server in zip(prompts, servers, strict=True):
        probe = probe_run(target, head, prompt, n_tokens, draft_max)
        rows.append(
            {
                "prompt": prompt,
                "server_equals_target_only": server["tokens"] == probe["target_only"],
                "server_equals_probe": server["tokens"] == probe["tokens"],
                "probe_identical": probe["identical"],
                "server_drafted": server["drafted"],
                "server_accepted": server["accepted"],
                "probe_drafted": probe["drafted"],
                "probe_accepted": probe["accepted"],
                "probe_acceptance_per_position": probe["acceptance_per_position"],
            }
        )
    return {"tokens": n_tokens, "draft_max": draft_max, "prompts": rows}


def main(argv: list[str]) -> int:
    args = parse_arguments(argv, 2, __doc__)
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
        int(args.get("--draft-max", "3")),
    )
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
