"""Remote configurations over real HTTP on 127.0.0.1.

The server below answers OpenAI-style chat completions by running the project's real engine on
the looping pair: under ``/spec`` with speculation, under ``/base`` without. Its ``timings``
object has the fields and meaning of llama-server's (tools/server/server-common.cpp in the
vendored llama.cpp: predicted_n, predicted_ms, prompt_ms, draft_n, draft_n_accepted), and its
``/metrics`` carries vLLM's documented spec-decode counters. It is not llama-server or vLLM
itself: neither was built or run here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from app.engine.config import GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary
from app.lab.configs import ConfigError, parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.remote_run import run_remote
from app.lab.results import ResultLog
from app.lab.runner import LabRunner, target_spec
from app.lab.stats import rows_from
from app.lab.suites import builtin
from app.remote.client import (
    RemoteError,
    SpecCounters,
    check_url,
    parse_prometheus,
    parse_timings,
)
from tests.local_http import QUICK_STOP

VLLM_METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {draft_tokens}
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
{positions}
vllm:num_requests_running{{engine="0",model_name="m"}} 0.0
this line is not a sample
"""


class EngineServer:
    """Real engine behind a minimal OpenAI-compatible endpoint (one request at a time)."""

    def __init__(self, target: Path, draft: Path) -> None:
        spec = ModelSpec(str(target), n_ctx=1024, n_threads=1)
        self.engine = Engine(spec, ModelSpec(str(draft), n_ctx=1024, n_threads=1))
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.positions = [0] * 8
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.endswith("/metrics"):
                    self._send(200, server.metrics().encode(), "text/plain")
                else:
                    self._send(404, b"{}", "application/json")

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, **body})
                if self.path == "/huge/v1/chat/completions":
                    self._send(200, b" " * (9 * 1024 * 1024), "application/json")
                    return
                if not self.path.startswith(("/spec/", "/base/")):
                    self._send(404, b"{}", "application/json")
                    return
                speculative = self.path.startswith("/spec/")
                self._send(
                    200, json.dumps(server.complete(body, speculative)).encode(), "application/json"
                )

        self.http = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        serving = self.http.serve_forever
        self.thread = threading.Thread(target=serving, kwargs=QUICK_STOP, daemon=True)
        self.thread.start()

    def complete(self, body: dict, speculative: bool) -> dict:
        tokens = self.engine.tokenize_chat(body["messages"])
        request = GenerationRequest(
            tokens,
            max_tokens=int(body["max_tokens"]),
            sampler=SamplerConfig(temperature=float(body["temperature"]), seed=body["seed"]),
            spec=SpecConfig(draft_max=8, adaptive=False),
            speculative=speculative,
            ignore_eos=True,
            token_probs=False,
        )
        summary = [e for e in self.engine.generate(request) if isinstance(e, RunSummary)][0]
        generation_ms = summary.tokens / summary.tok_s * 1000.0 if summary.tok_s else 0.0
        timings = {
            "prompt_n": len(tokens),
            "prompt_ms": summary.ttft_ms,
            "predicted_n": summary.tokens,
            "predicted_ms": generation_ms,
            "predicted_per_second": summary.tok_s,
        }
        if summary.drafted:
            timings |= {"draft_n": summary.drafted, "draft_n_accepted": summary.accepted}
            self.counters["drafts"] += summary.steps
            self.counters["draft_tokens"] += summary.drafted
            self.counters["accepted"] += summary.accepted
            self.positions[0] += min(summary.accepted, summary.steps)
        return {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": summary.text}}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": summary.tokens},
            "timings": timings,
        }

    def metrics(self) -> str:
        positions = "\n".join(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",'
            f'position="{i}"}} {v}.0'
            for i, v in enumerate(self.positions)
        )
        return VLLM_METRICS.format(
            positions=positions, **{k: f"{v}.0" for k, v in self.counters.items()}
        )

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.engine.close()


@pytest.fixture(scope="module")
def server(looping_models) -> Iterator[EngineServer]:  # noqa: ANN001
    running = EngineServer(looping_models["target"], looping_models["agrees"])
    yield running
    running.close()


def test_prometheus_parser_reads_the_documented_vllm_counters() -> None:
    text = VLLM_METRICS.format(
        drafts="10.0",
        draft_tokens="40.0",
        accepted="25.0",
        positions="vllm:spec_decode_num_accepted_tokens_per_pos_total"
        '{engine="0",model_name="m",position="1"} 7.0\n'
        "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        '{engine="0",model_name="m",position="0"} 9.0',
    )
    names = {name for name, _, _ in parse_prometheus(text)}
    assert "vllm:num_requests_running" in names and len(names) == 5
    counters = SpecCounters.from_metrics(text)
    assert (counters.drafts, counters.draft_tokens, counters.accepted) == (10.0, 40.0, 25.0)
    assert counters.per_position == (9.0, 7.0)
    assert counters.acceptance == 25 / 40 and counters.tokens_per_pass == 1 + 25 / 10
    assert SpecCounters.from_metrics(text, model="other").drafts == 0.0
    earlier = SpecCounters(4.0, 16.0, 5.0, (3.0,))
    delta = counters.minus(earlier)
    assert (delta.drafts, delta.accepted, delta.per_position) == (6.0, 20.0, (6.0, 7.0))


def test_llama_server_timings_are_type_checked() -> None:
    timings = parse_timings(
        {
            "timings": {
                "prompt_ms": 5,
                "predicted_n": 40,
                "predicted_ms": 200,
                "draft_n": 32,
                "draft_n_accepted": 24,
            }
        }
    )
    assert timings is not None
    assert timings.tok_s == 200.0 and timings.acceptance == 0.75
    assert timings.tokens_per_pass == 40 / 16
    assert parse_timings({"choices": []}) is None
    with pytest.raises(RemoteError, match="draft_n is not a whole number"):
        parse_timings({"timings": {"predicted_n": 1, "predicted_ms": 1, "draft_n": "many"}})
    for bad in ("file:///etc/passwd", "127.0.0.1:8080", "ftp://x"):
        with pytest.raises(RemoteError, match="not an http"):
            check_url(bad)
    with pytest.raises(ConfigError, match="not an http"):
        parse_config("r:server=localhost:8080")


def test_remote_requests_over_real_http(server: EngineServer) -> None:
    spec = run_remote(
        f"{server.url}/spec", "hello the model", max_tokens=24, temperature=0.0, seed=1
    )
    base = run_remote(
        f"{server.url}/base", "hello the model", max_tokens=24, temperature=0.0, seed=1
    )
    assert spec["tokens"] == base["tokens"] == 24
    assert spec["acceptance"] == 1.0 and spec["tokens_per_pass"] > 4
    assert base["drafted"] == 0 and base["tokens_per_pass"] == 1.0
    vllm = run_remote(
        f"{server.url}/spec", "hello the model", max_tokens=24, temperature=0.0, seed=1, kind="vllm"
    )
    assert vllm["drafted"] > 0 and vllm["acceptance"] == 1.0
    assert vllm["accepted_per_position"][0] > 0
    with pytest.raises(RemoteError, match="more than 8 MiB"):
        run_remote(f"{server.url}/huge", "x", max_tokens=4, temperature=0.0, seed=1)
    with pytest.raises(RemoteError, match="answered HTTP 404"):
        run_remote(f"{server.url}/nothing", "x", max_tokens=4, temperature=0.0, seed=1, kind="vllm")


def test_a_remote_configuration_runs_beside_local_ones(
    server: EngineServer,
    looping_models,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    plan = LabPlan(
        target=target_spec(str(looping_models["target"]), n_ctx=1024, threads=1),
        configs=(
            parse_config(f"local:draft={looping_models['agrees']},n=8"),
            parse_config(f"server:server={server.url}/spec,baseline={server.url}/base"),
        ),
        prompts=tuple(builtin(["math"])),
        max_tokens=24,
        ignore_eos=True,
        claim=Claim(1.2, config="server"),
    )
    before = len(server.requests)
    assert LabRunner.start(plan, tmp_path / "r.jsonl").run()
    log = ResultLog.open(tmp_path / "r.jsonl")
    rows = [r for r in rows_from(log.records) if r.config == "server"]
    assert {r.prompt for r in rows} == {p.id for p in plan.prompts}
    sent = server.requests[before:]
    assert {r["path"] for r in sent} == {"/spec/v1/chat/completions", "/base/v1/chat/completions"}
    texts = {r["messages"][0]["content"] for r in sent}
    assert texts == {p.text for p in plan.prompts}
    assert all(r.acceptance == 1.0 and r.identical is None for r in rows)
    assert all(r.baseline_tok_s > 0 for r in rows)
    assert log.of_kind("choice")[0]["claim_config"] == "server"
