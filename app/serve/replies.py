"""OpenAI response bodies, with llama-server's ``timings`` object for the speculative figures.

Every figure comes from the engine's own ``RunSummary`` (and the prefill it reports), so a
client reads the same acceptance, tokens per pass and tok/s that the window and the Lab show:
``draft_n`` and ``draft_n_accepted`` are llama-server's names for the summary's drafted and
accepted draft tokens, ``predicted_per_second`` is its tok/s, and ``acceptance`` and
``tokens_per_pass`` are the summary's own properties.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from app.engine.events import PrefillEvent, RunSummary, StopReason

_FINISH = {
    StopReason.EOG: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_FULL: "length",
}


def finish_reason(summary: RunSummary) -> str:
    return _FINISH.get(summary.stop_reason, "stop")


def timings(summary: RunSummary, prefill: PrefillEvent) -> dict[str, Any]:
    """llama-server's per-response ``timings``, plus SpecDeck's acceptance and tokens per pass."""
    prompt_n = prefill.prompt_tokens - prefill.reused_tokens
    prompt_ms = prefill.ms
    predicted_ms = summary.tokens / summary.tok_s * 1000.0 if summary.tok_s > 0 else 0.0
    return {
        "cache_n": prefill.reused_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": prompt_n * 1000.0 / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": summary.tokens,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / summary.tokens if summary.tokens else 0.0,
        "predicted_per_second": summary.tok_s,
        "draft_n": summary.drafted,
        "draft_n_accepted": summary.accepted,
        "acceptance": summary.acceptance_rate,
        "tokens_per_pass": summary.tokens_per_pass,
    }


def usage(summary: RunSummary, prefill: PrefillEvent) -> dict[str, Any]:
    return {
        "prompt_tokens": prefill.prompt_tokens,
        "completion_tokens": summary.tokens,
        "total_tokens": prefill.prompt_tokens + summary.tokens,
        "prompt_tokens_details": {"cached_tokens": prefill.reused_tokens},
    }


class Reply:
    """The bodies of one answer: whole, or as server-sent-event chunks."""

    def __init__(self, model: str, *, chat: bool) -> None:
        self.model = model
        self.chat = chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        self.created = int(time.time())

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def whole(self, text: str, summary: RunSummary, prefill: PrefillEvent) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        choice["finish_reason"] = finish_reason(summary)
        body = self._head("chat.completion" if self.chat else "text_completion")
        body["choices"] = [choice]
        body["usage"] = usage(summary, prefill)
        body["timings"] = timings(summary, prefill)
        return body

    def chunk(self, delta: dict[str, Any] | str, finish: str | None = None) -> dict[str, Any]:
        """One streamed chunk: a chat delta ({'content': ...}) or completion text."""
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if self.chat:
            choice["delta"] = delta if isinstance(delta, dict) else {}
        else:
            choice["text"] = delta if isinstance(delta, str) else ""
        body = self._head("chat.completion.chunk" if self.chat else "text_completion")
        body["choices"] = [choice]
        return body

    def first(self) -> bytes:
        """The chat stream's opening chunk names the role, as OpenAI's does."""
        return event(self.chunk({"role": "assistant", "content": ""})) if self.chat else b""

    def text(self, text: str) -> bytes:
        return event(self.chunk({"content": text} if self.chat else text))

    def last(self, summary: RunSummary, prefill: PrefillEvent, include_usage: bool) -> bytes:
        """The closing chunk with the finish reason and the timings, then usage if asked."""
        body = self.chunk({} if self.chat else "", finish_reason(summary))
        body["timings"] = timings(summary, prefill)
        out = event(body)
        if include_usage:
            tail = self._head("chat.completion.chunk" if self.chat else "text_completion")
            tail["choices"] = []
            tail["usage"] = usage(summary, prefill)
            out += event(tail)
        return out + DONE


DONE = b"data: [DONE]\n\n"


def event(body: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"\n\n"
    )
