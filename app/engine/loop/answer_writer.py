"""The accepted tokens into the answer: committed, turned into text, each an event, and the
reason the answer ends when one of them ends it."""

from __future__ import annotations

from collections.abc import Callable, Generator

from app.engine.events import StopReason, TokenEvent
from app.engine.llama.backend import LlamaModel
from app.engine.loop.acceptance import Outcome
from app.engine.loop.run_clock import RunClock
from app.engine.loop.textstream import TextStream


class AnswerWriter:
    """Appends a verification's tokens to ``committed`` until the answer ends: a token that
    ends it (never appended), a stop string, or the token limit."""

    def __init__(
        self,
        target: LlamaModel,
        committed: list[int],
        stream: TextStream,
        clock: RunClock,
        *,
        ends_answer: Callable[[int], bool] | None,
        max_tokens: int,
    ) -> None:
        self.target = target
        self.committed = committed
        self.stream = stream
        self.clock = clock
        self.ends_answer = ends_answer
        self.limit = len(committed) + max_tokens  # the committed length that ends the answer

    def write(self, outcome: Outcome, step: int) -> Generator[TokenEvent, None, StopReason | None]:
        """Yield a token event per token taken; return why the answer ended (None: it goes on)."""
        committed, stream, target = self.committed, self.stream, self.target
        for produced in outcome.tokens:
            if self.ends_answer is not None and self.ends_answer(produced.token_id):
                return StopReason.EOG
            committed.append(produced.token_id)
            piece = stream.push(target.piece(produced.token_id))
            rejected = produced.rejected_token
            rejected_piece = target.detokenize([rejected]) if rejected is not None else None
            yield self.clock.token_event(produced, piece, step, rejected_piece)
            if stream.stopped:
                return StopReason.STOP_STRING
            if len(committed) >= self.limit:
                return StopReason.MAX_TOKENS
        return None
