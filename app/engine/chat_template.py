"""Chat messages -> prompt text with the GGUF's own chat template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llama_cpp.llama_chat_format import Jinja2ChatFormatter


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


class ChatFormatter:
    """Renders a conversation with the model's template, or a plain fallback without one."""

    def __init__(self, template: str | None, *, bos_text: str, eos_text: str) -> None:
        self.template = template
        self.bos_text = bos_text
        self._jinja = (
            Jinja2ChatFormatter(template, eos_token=eos_text, bos_token=bos_text)
            if template
            else None
        )

    def render(self, messages: Sequence[Message]) -> str:
        if self._jinja is not None:
            dicts = [m.as_dict() for m in messages]
            return self._jinja(messages=dicts).prompt  # type: ignore[arg-type]
        lines = [f"{m.role}: {m.content}" for m in messages]
        return "\n".join(lines) + "\nassistant:"

    def starts_with_bos(self, prompt: str) -> bool:
        return bool(self.bos_text) and prompt.startswith(self.bos_text)
