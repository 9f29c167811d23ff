"""llama.cpp's own ``llama-server`` for the reference tools: started on a free port on
127.0.0.1, waited for until ``/health`` answers, asked by JSON, and stopped again."""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def post_json(url: str, body: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:
        reply: dict[str, Any] = json.loads(answer.read(8 << 20))
    return reply


@contextmanager
def running_server(
    binary: Path,
    args: Sequence[str],
    *,
    start_timeout_s: float = 120,
    stop_timeout_s: float = 10,
    log_tail: int = 2000,
) -> Iterator[str]:
    """``binary args --host 127.0.0.1 --port N`` running and healthy; yields its URL. A server
    that exits before it is healthy raises with the end of its log."""
    port = free_port()
    command = [str(binary), *args, "--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"llama-server exited: {log.read()[-log_tail:]!r}")
                try:
                    with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama-server did not start within {start_timeout_s:g} s")
                time.sleep(0.25)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass(frozen=True)
class ServerSetup:
    """How the server runs: its context, threads and layers on the GPU, how long it may take
    to start and to answer (each), to stop, and how much of its log a failure quotes."""

    n_ctx: int
    threads: int
    gpu_layers: str = "0"
    timeout_s: float = 120
    stop_timeout_s: float = 10
    log_tail: int = 2000


def greedy_args(model: Path, spec_args: Sequence[str], setup: ServerSetup) -> list[str]:
    """llama-server's arguments for one slot serving ``model`` with ``spec_args``."""
    args = ["-m", str(model), *spec_args, "-ngl", setup.gpu_layers, "-c", str(setup.n_ctx)]
    return args + ["-t", str(setup.threads), "--no-webui", "--parallel", "1"]


def greedy_answer(url: str, prompt: list[int], n_tokens: int, timeout_s: float) -> dict[str, Any]:
    """The running server's greedy answer to a token-id prompt (no prompt cache): its tokens,
    tokens/sec and draft counts."""
    body = {
        "prompt": prompt,
        "n_predict": n_tokens,
        "temperature": 0,
        "return_tokens": True,
        "cache_prompt": False,
    }
    reply = post_json(f"{url}/completion", body, timeout_s)
    timings = reply["timings"]
    return {
        "tokens": [int(t) for t in reply["tokens"]],
        "tok_s": round(float(timings["predicted_per_second"]), 2),
        "drafted": int(timings.get("draft_n", 0)),
        "accepted": int(timings.get("draft_n_accepted", 0)),
        # a step writes its accepted drafts and one token of its own
        "ms_per_step": round(
            float(timings["predicted_ms"])
            / max(int(timings["predicted_n"]) - int(timings.get("draft_n_accepted", 0)), 1),
            4,
        ),
    }


def greedy_run(
    binary: Path,
    model: Path,
    spec_args: Sequence[str],
    prompt: list[int],
    n_tokens: int,
    setup: ServerSetup,
    *,
    rounds: int,
    warm_up: bool = False,
) -> dict[str, Any]:
    """llama-server's greedy answer to a token-id prompt: its tokens, and the best
    tokens/sec and draft counts of ``rounds`` (after one uncounted answer when ``warm_up``)."""
    uncounted = 1 if warm_up else 0
    with running_server(
        binary,
        greedy_args(model, spec_args, setup),
        start_timeout_s=setup.timeout_s,
        stop_timeout_s=setup.stop_timeout_s,
        log_tail=setup.log_tail,
    ) as url:
        answers = [
            greedy_answer(url, prompt, n_tokens, setup.timeout_s) for _ in range(rounds + uncounted)
        ]
    answers = answers[uncounted:]
    best = max(answers, key=lambda a: float(a["tok_s"]))
    return best | {"tokens": answers[0]["tokens"]}
