"""One served call on an engine process: its prompt, its speculation, its outcome.

Both serving queues answer through ``answer_call``: the command line's ``CliServing`` on the
engine process it owns, the window's ``WindowServing`` on the window's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from app.engine.chat_template import ChatTemplateError
from app.engine.config import AcceptRule, GenerationRequest, SpecConfig
from app.engine.events import (
    PrefillEvent,
    RunSummary,
    StepEvent,
    StopReason,
    TextTail,
    TokenEvent,
)
from app.engine.process.host import ChatTemplateHung, EngineCrashed, EngineHost
from app.errors import ContextOverflowError, GenerationCancelled, SpecDeckError
from app.serve.params import ApiError, Call
from app.serve.tickets import Cancelled, Deliver, Delta, Failed, Finished, Started

log = logging.getLogger("specdeck.serve")


def answer_call(
    host: EngineHost,
    call: Call,
    spec: SpecConfig,
    send: Deliver,
    *,
    ignore_eos: bool = False,
    on_acceptance: Callable[[float], None] | None = None,
    reuse_prefix: bool = False,
) -> Finished | Failed | Cancelled:
    """One call on ``host``: ``Started`` and ``Delta``s go out through ``send`` as they come;
    the final outcome is returned, not sent. ``EngineCrashed`` is left to the caller.

    ``reuse_prefix``: keep what the caches hold of the last prompt. Only for the caller
    that sent that prompt: another would read, from the reused count in the usage or from
    the prefill's time, how much of its prompt someone else's shared."""
    try:
        prompt = call_prompt(host, call)
        request = GenerationRequest(
            prompt,
            max_tokens=call.sampling.max_tokens,
            sampler=call.sampling.sampler(),
            spec=spec_for(spec, call),
            stop=call.sampling.stop,
            ignore_eos=ignore_eos,
            token_probs=False,  # p(x)/q(x) per token feed the window's hover details only
            reuse_prefix=reuse_prefix,
        )
        prefill: PrefillEvent | None = None
        summary: RunSummary | None = None
        for events in host.generate(request):
            text: list[str] = []
            for event in events:
                if isinstance(event, TokenEvent):
                    text.append(event.piece)
                elif isinstance(event, TextTail):
                    text.append(event.text)
                elif isinstance(event, StepEvent):
                    if on_acceptance is not None:
                        on_acceptance(event.rolling_acceptance)
                elif isinstance(event, PrefillEvent):
                    prefill = event
                    send(Started(event.prompt_tokens))
                elif isinstance(event, RunSummary):
                    summary = event
            if text and any(text):
                send(Delta("".join(text)))
    except GenerationCancelled:
        summary = None
    except ContextOverflowError as error:
        return Failed(ApiError(400, str(error), code="context_length_exceeded"))
    if summary is None or summary.stop_reason is StopReason.CANCELLED or prefill is None:
        return Cancelled()
    return Finished(summary, prefill)


def crashed(error: EngineCrashed) -> ApiError:
    return ApiError(500, str(error), kind="server_error", code="engine_crashed")


def spec_for(spec: SpecConfig, call: Call) -> SpecConfig:
    """A seeded sampled call is verified by sample-and-match: with position-keyed random
    numbers its text is then the seeded target-only text, whatever was drafted, so the
    same seed gives the same answer. Rejection sampling keeps the distribution but its
    draws depend on the drafts, which the adaptive controller varies from call to call."""
    sampling = call.sampling
    if sampling.seed is not None and sampling.temperature > 0.0:
        return replace(spec, rule=AcceptRule.MATCH)
    return spec


def call_prompt(host: EngineHost, call: Call) -> tuple[int, ...]:
    """The call's tokens; a broken chat template falls back to the plain format, as the
    window's chat does."""
    if call.prompt is not None:
        return host.tokenize(call.prompt)
    messages = [{"role": r, "content": c} for r, c in call.messages]
    try:
        return host.tokenize_chat(messages)
    except ChatTemplateError as error:
        log.warning("%s; using the plain chat format", error)
        host.use_plain_chat()
    except ChatTemplateHung as error:
        log.warning("%s; restarting the engine with the plain chat format", error)
        host.reload_plain()
    return host.tokenize_chat(messages)


def server_error(error: Exception) -> ApiError:
    message = str(error) if isinstance(error, SpecDeckError) else "internal error while answering"
    return ApiError(500, message[:1000], kind="server_error")
