"""Chat messages -> prompt text with the GGUF's own chat template.

A GGUF's template is a stranger's code. Jinja runs it sandboxed (no attribute tricks), and a
template that does not compile or raises while rendering becomes a ``ChatTemplateError`` so
the caller can fall back to the plain format. Time is bounded one level up: the engine
process renders, and its parent kills it when rendering outlives ``TEMPLATE_SECONDS``
(``app.engine.engine_host``): a Python loop in Jinja cannot be stopped from inside.

A conversation that ends with an assistant message asks to continue that message (llama.cpp's
"continue final message", or assistant prefill): the turns before it are rendered with the
generation prompt and its text follows unfinished, with no end-of-turn after it, exactly as
the model saw its own answer while writing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import SpecDeckError

PLAIN_FORMAT = "plain 'role: text' lines"


class ChatTemplateError(SpecDeckError):
    """The model's chat template does not compile or fails while rendering."""


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def render_plain(messages: Sequence[Message]) -> str:
    lines = [f"{m.role}: {m.content}" for m in messages]
    return "\n".join(lines) + "\nassistant:"


class ChatFormatter:
    """Renders a conversation with the model's template, or a plain fallback without one."""

    def __init__(self, template: str | None, *, bos_text: str, eos_text: str) -> None:
        self.template = template
        self.bos_text = bos_text
        self._jinja: Any = None  # llama_cpp's Jinja2ChatFormatter
        self._broken: str | None = None  # why the template does not compile
        if template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            try:
                self._jinja = Jinja2ChatFormatter(template, eos_token=eos_text, bos_token=bos_text)
            except Exception as error:  # noqa: BLE001 - any compile failure: report at render
                self._broken = f"{type(error).__name__}: {error}"

    @property
    def plain(self) -> bool:
        return self._jinja is None and self._broken is None

    def use_plain(self) -> None:
        """Ignore the model's template from now on."""
        self._jinja = None
        self._broken = None

    def render(self, messages: Sequence[Message]) -> str:
        if messages and messages[-1].role == "assistant":  # continue the unfinished answer
            return self._render(messages[:-1]) + messages[-1].content
        return self._render(messages)

    def _render(self, messages: Sequence[Message]) -> str:
        if self._broken is not None:
            raise ChatTemplateError(f"the chat template does not compile ({self._broken[:300]})")
        if self._jinja is None:
            return render_plain(messages)
        dicts = [m.as_dict() for m in messages]
        try:
            return str(self._jinja(messages=dicts).prompt)
        except Exception as error:  # noqa: BLE001 - the template is untrusted code
            raise ChatTemplateError(
                f"the chat template failed ({type(error).__name__}: {str(error)[:300]})"
            ) from error

    def starts_with_bos(self, prompt: str) -> bool:
        return bool(self.bos_text) and prompt.startswith(self.bos_text)
