"""Servers on 127.0.0.1 that report impossible figures: a speed no model reaches, a time so
small the speed is infinite, more tokens accepted than drafted. The chat and the Lab refuse
them with the same words (``check_figures``), so no such figure is shown or stored."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.engine.events import TextTail
from app.lab.remote_run import run_remote
from app.remote.chat import RemoteAnswer, describe, stream_chat
from app.remote.client import RemoteError
from app.workers.remote_runs import summary
from tests.local_http import QUICK_STOP

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def _event(value: object) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


# what each path answers with: llama-server's timings (None: none sent)
TIMINGS: dict[str, dict[str, float] | None] = {
    "/tiny-ms": {"predicted_n": 3, "predicted_ms": 1e-300},
    "/denormal-ms": {"predicted_n": 3, "predicted_ms": 5e-324},  # 3000 / 5e-324 is inf
    "/accepts-more": {"predicted_n": 3, "predicted_ms": 30, "draft_n": 1, "draft_n_accepted": 3},
    "/possible": {"predicted_n": 3, "predicted_ms": 30, "draft_n": 4, "draft_n_accepted": 2},
    "/no-time": {"predicted_n": 3, "predicted_ms": 0},  # 0 ms: no time reported
    "/vllm-lies": None,  # its /metrics: drafted 10, accepted 500
    "/vllm-went-down": None,  # its /metrics: the counters fall during the request
    "/flood": None,  # its usage: 10**12 tokens, in the milliseconds the request takes
}


class LyingServer:
    """Answers every chat request (streamed or not) with one piece of text and the figures of
    its path; ``/metrics`` counts up between a request's two reads as the path lies."""

    def __init__(self) -> None:
        reads: dict[str, int] = {}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.removesuffix("/metrics")
                read = reads[path] = reads.get(path, -1) + 1
                after = read % 2  # the lab and the chat read before and after each request
                if path == "/vllm-lies":
                    drafts, drafted, accepted = 5 * after, 10 * after, 500 * after
                else:
                    drafts, drafted, accepted = 50 - 5 * after, 100 - 10 * after, 40 - 4 * after
                body = (
                    f"vllm:spec_decode_num_drafts_total {drafts}\n"
                    f"vllm:spec_decode_num_draft_tokens_total {drafted}\n"
                    f"vllm:spec_decode_num_accepted_tokens_total {accepted}\n"
                )
                self._send(body.encode(), "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = self.path.removesuffix("/v1/chat/completions")
                timings = TIMINGS[path]
                extra = {"timings": timings} if timings is not None else {}
                if not asked["stream"]:
                    answer = {
                        "choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}],
                        "usage": {"completion_tokens": 10**12 if path == "/flood" else 3},
                    }
                    self._send(json.dumps(answer | extra).encode(), "application/json")
                    return
                piece = {"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]}
                end = {"choices": [{"delta": {}, "finish_reason": "stop"}]} | extra
                body = _event(piece) + _event(end) + b"data: [DONE]\n\n"
                self._send(body, "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs=QUICK_STOP, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def lying() -> Iterator[LyingServer]:
    server = LyingServer()
    yield server
    server.close()


def _chat(url: str, kind: str) -> list[object]:
    messages = ({"role": "user", "content": "hi"},)
    return list(
        stream_chat(url, messages, max_tokens=8, temperature=0.0, seed=1, server=kind, deadline_s=5)
    )


def _lab(url: str, kind: str) -> dict[str, object]:
    return run_remote(url, "hi", max_tokens=8, temperature=0.0, seed=1, kind=kind, timeout=5)


@pytest.mark.parametrize(
    ("path", "kind", "words"),
    [
        ("/tiny-ms", "llama-server", "give 3 tokens in 1e-300 ms, faster than any model runs"),
        ("/denormal-ms", "llama-server", "give 3 tokens in 4.94e-324 ms, faster than any model"),
        ("/accepts-more", "llama-server", "timings accept 3 drafted tokens of 1"),
        ("/vllm-lies", "vllm", "spec-decode counters accept 500 drafted tokens of 10"),
        ("/vllm-went-down", "vllm", "counters went down during the request"),
    ],
)
def test_impossible_figures_are_refused_alike_by_the_chat_and_the_lab(
    lying: LyingServer, path: str, kind: str, words: str
) -> None:
    with pytest.raises(RemoteError) as chat:
        _chat(lying.url + path, kind)
    with pytest.raises(RemoteError) as lab:
        _lab(lying.url + path, kind)
    for refused in (chat, lab):
        message = str(refused.value)
        assert words in message, message
        assert "inf" not in message.replace("infinite", "") and len(message) < 300


def test_possible_figures_are_shown_and_summed_as_the_server_gave_them(
    lying: LyingServer,
) -> None:
    events = _chat(lying.url + "/possible", "llama-server")
    assert [e.text for e in events if isinstance(e, TextTail)] == ["Hi"]
    answer = events[-1]
    assert isinstance(answer, RemoteAnswer)
    assert describe(answer).startswith(
        f"{lying.url}/possible: drafted 4, accepted 2 (50%), 3.00 tokens per pass "
        "(llama-server's timings), 3 tokens at 100.0 tok/s."
    )
    run = summary("speculative", answer)
    assert (run.tok_s, run.drafted, run.accepted) == (100.0, 4, 2)
    lab = _lab(lying.url + "/possible", "llama-server")
    assert (lab["tok_s"], lab["drafted"], lab["accepted"], lab["acceptance"]) == (100.0, 4, 2, 0.5)


def test_a_usage_claiming_more_tokens_than_the_time_allows_is_refused_by_the_lab(
    lying: LyingServer,
) -> None:
    """Without timings the Lab divides the tokens the usage claims by the time it measured."""
    with pytest.raises(RemoteError, match="usage give 1,000,000,000,000 tokens in .* ms, faster"):
        _lab(lying.url + "/flood", "llama-server")


def test_a_server_that_gives_no_time_gets_no_speed_of_zero(lying: LyingServer) -> None:
    """``predicted_ms`` 0 is "not reported": the chat says so and claims no speed (the replay
    of issue 31 found "3 tokens at 0.00 tok/s" shown and ``spec_tok_s: 0.0`` stored); the
    Lab uses the speed it measured, as without timings."""
    events = _chat(lying.url + "/no-time", "llama-server")
    answer = events[-1]
    assert isinstance(answer, RemoteAnswer)
    assert answer.tok_s is None
    assert "3 tokens (no time reported)" in describe(answer)
    assert "0.00 tok/s" not in describe(answer)
    run = summary("speculative", answer)
    assert run.tok_s > 0  # the wall-clock speed of what the server wrote
    lab = _lab(lying.url + "/no-time", "llama-server")
    assert isinstance(lab["tok_s"], float) and lab["tok_s"] > 0
