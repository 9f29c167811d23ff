"""The chat's remote client against real ``llama-server`` processes on 127.0.0.1: one with a
draft model, one without (the baseline a user names by its URL)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from app.engine.events import TextTail
from app.remote.chat import RemoteAnswer, speedup, stream_chat
from tests.lab.llama_server import llama_server

pytestmark = pytest.mark.slow
MESSAGES = ({"role": "user", "content": "hello the model"},)


@pytest.fixture(scope="module")
def servers(looping_models, tmp_path_factory) -> Iterator[tuple[str, str]]:  # noqa: ANN001
    logs = tmp_path_factory.mktemp("llama-servers")
    target = looping_models["target"]
    with (
        llama_server(target, looping_models["agrees"], logs / "spec.log") as spec,
        llama_server(target, None, logs / "base.log") as base,
    ):
        yield spec, base


def _chat(url: str) -> tuple[list[str], RemoteAnswer]:
    pieces: list[str] = []
    final = None
    for event in stream_chat(url, MESSAGES, max_tokens=32, temperature=0.0, seed=1):
        if isinstance(event, TextTail):
            pieces.append(event.text)
        else:
            final = event
    assert final is not None
    return pieces, final


def _raw_last_chunk(url: str) -> dict:
    """The same request read without SpecDeck: the server's own last chunk with timings."""
    body = {"messages": list(MESSAGES), "max_tokens": 32, "temperature": 0.0, "seed": 1}
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        json.dumps({**body, "stream": True}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        lines = answer.read().decode().splitlines()
    chunks = [json.loads(x[5:]) for x in lines if x.startswith("data:") and "[DONE]" not in x]
    return next(c for c in reversed(chunks) if "timings" in c)


def test_the_chat_streams_and_shows_the_servers_own_figures(servers: tuple[str, str]) -> None:
    spec_url, _ = servers
    pieces, final = _chat(spec_url)
    assert len(pieces) > 1 and "".join(pieces) == final.text and final.text.strip()
    raw = _raw_last_chunk(spec_url)["timings"]
    assert final.timings is not None
    assert final.drafted == raw["draft_n"] > 0
    assert final.accepted == raw["draft_n_accepted"]
    assert final.timings.predicted_n == raw["predicted_n"]
    assert final.finish_reason in ("length", "stop")
    figures = final.figures()
    assert f"drafted {raw['draft_n']}, accepted {raw['draft_n_accepted']}" in figures
    assert "llama-server's timings" in figures


def test_the_baseline_server_drafts_nothing_and_only_then_is_a_speedup_given(
    servers: tuple[str, str],
) -> None:
    spec_url, base_url = servers
    _, spec = _chat(spec_url)
    base_pieces, base = _chat(base_url)
    assert base.timings is not None and base.drafted == 0 and base.accepted == 0
    assert base.figures().startswith("no drafting reported")
    assert "".join(base_pieces) == spec.text  # greedy: speculation changes no token
    ratio = speedup(spec, base)
    assert ratio is not None and ratio > 0
    assert ratio == pytest.approx(spec.timings.tok_s / base.timings.tok_s)  # type: ignore[union-attr]
