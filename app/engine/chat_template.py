"""Chat messages -> prompt text with the GGUF's own chat template.

A GGUF's template is a stranger's code. Jinja runs it sandboxed (no attribute tricks), and a
template that does not compile or raises while rendering becomes a ``ChatTemplateError`` so
the caller can fall back to the plain format.

Nothing of the template runs before the first render: it is compiled then, so compiling
falls under the same bounds as rendering. Time is bounded one level up: the engine process
renders, and its parent kills it when rendering outlives ``TEMPLATE_SECONDS``
(``app.engine.process.host``): a Python loop in Jinja cannot be stopped from inside. Memory is
bounded here: the operators that build a value from a number (``'x' * 4000000000``,
``2 ** 10 ** 9``) are checked before they run, Jinja folds no expression at compile time, and
in the engine process (``limit_template_memory``) the address space a render may add is
capped where the system enforces that (Linux), so any other way to grow ends in a
``MemoryError``, reported like any template failure.

A conversation that ends with an assistant message asks to continue that message (llama.cpp's
"continue final message", or assistant prefill): the turns before it are rendered with the
generation prompt and its text follows unfinished, with no end-of-turn after it, exactly as
the model saw its own answer while writing it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.errors import SpecDeckError

PLAIN_FORMAT = "plain 'role: text' lines"
# The longest string or list one operator may build; a prompt fits a context window (at most
# a few MB of text), so a template asking for more is an attack, not a format.
TEMPLATE_ITEMS_LIMIT = 1 << 24
TEMPLATE_INT_BITS_LIMIT = 1 << 16  # the largest integer ``**`` may build, in bits
TEMPLATE_MEMORY_BYTES = 512 << 20  # what compiling and rendering may add in the engine process

_memory_limit: int | None = None  # set in the engine process only (``limit_template_memory``)


class ChatTemplateError(SpecDeckError):
    """The model's chat template does not compile or fails while rendering."""


class _TooLarge(Exception):
    pass


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def render_plain(messages: Sequence[Message]) -> str:
    lines = [f"{m.role}: {m.content}" for m in messages]
    return "\n".join(lines) + "\nassistant:"


def limit_template_memory(extra_bytes: int | None = TEMPLATE_MEMORY_BYTES) -> None:
    """In this process, compiling and rendering a template may add at most ``extra_bytes`` of
    address space (None: no cap). Only for a process that does nothing else meanwhile, such
    as the engine process: the cap holds for every thread while a template runs."""
    global _memory_limit
    _memory_limit = extra_bytes


@contextlib.contextmanager
def _bounded_memory() -> Iterator[None]:
    limit = _memory_limit
    if limit is None or not sys.platform.startswith("linux"):  # macOS ignores RLIMIT_AS
        yield
        return
    import resource

    import psutil

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = psutil.Process().memory_info().vms + limit
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft <= wanted:  # already as tight
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _sized(value: object, items: int) -> str:
    if isinstance(value, str):
        return f"a string of {items:,} characters"
    return f"a {type(value).__name__} of {items:,} items"


def _checked_binop(name: str, left: Any, right: Any) -> None:
    """Refuse ``*`` and ``+`` results over ``TEMPLATE_ITEMS_LIMIT`` items and ``**`` results
    over ``TEMPLATE_INT_BITS_LIMIT`` bits, before Python builds them."""
    sized = (str, bytes, list, tuple)
    if name == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, sized) and isinstance(count, int):
                items = len(seq) * max(0, count)
                if items > TEMPLATE_ITEMS_LIMIT:
                    raise _TooLarge(
                        f"it builds {_sized(seq, items)} with '*' "
                        f"(at most {TEMPLATE_ITEMS_LIMIT:,})"
                    )
    elif name == "+" and isinstance(left, sized) and isinstance(right, sized):
        items = len(left) + len(right)
        if items > TEMPLATE_ITEMS_LIMIT:
            raise _TooLarge(
                f"it builds {_sized(left, items)} with '+' (at most {TEMPLATE_ITEMS_LIMIT:,})"
            )
    elif name == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        bits = max(1, abs(left).bit_length()) * right
        if abs(left) > 1 and bits > TEMPLATE_INT_BITS_LIMIT:
            raise _TooLarge(
                f"it builds a number of about {bits:,} bits with '**' "
                f"(at most {TEMPLATE_INT_BITS_LIMIT:,})"
            )


def _compile(template: str) -> Any:
    """The template compiled in a sandbox that evaluates nothing before it renders."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    class Sandbox(ImmutableSandboxedEnvironment):
        # intercepted operators are checked when they run and never folded at compile time
        intercepted_binops = frozenset({"*", "+", "**"})

        def call_binop(self, context: Any, name: str, left: Any, right: Any) -> Any:
            _checked_binop(name, left, right)
            return super().call_binop(context, name, left, right)

    @jinja2.pass_context
    def at_render_time(_context: Any, value: Any) -> Any:
        # a finalize that needs the context stops Jinja folding output at compile time
        return value

    # as llama_cpp's Jinja2ChatFormatter sets it up (Transformers' chat-template extensions)
    environment = Sandbox(
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[Jinja2ChatFormatter.IgnoreGenerationTags, jinja2.ext.loopcontrols],
        optimized=False,
        finalize=at_render_time,
    )
    environment.filters["tojson"] = Jinja2ChatFormatter.tojson
    return environment.from_string(template)


def _raise_exception(message: str) -> None:
    raise ValueError(message)


def _strftime_now(pattern: str) -> str:
    return datetime.now().strftime(pattern)


def _failure(error: BaseException) -> str:
    if isinstance(error, MemoryError):
        if _memory_limit is None:
            return "it ran out of memory"
        return f"it needs more than {_memory_limit >> 20:,} MiB of memory"
    if isinstance(error, _TooLarge):
        return str(error)
    return f"{type(error).__name__}: {str(error)[:300]}"


class ChatFormatter:
    """Renders a conversation with the model's template, or a plain fallback without one."""

    def __init__(self, template: str | None, *, bos_text: str, eos_text: str) -> None:
        self.template = template
        self.bos_text = bos_text
        self.eos_text = eos_text
        self._compiled: Any = None  # the Jinja template, compiled at the first render
        self._broken: str | None = None  # why the template does not compile
        self._plain = not template

    @property
    def plain(self) -> bool:
        return self._plain

    def use_plain(self) -> None:
        """Ignore the model's template from now on."""
        self._plain = True
        self._compiled = None
        self._broken = None

    def render(self, messages: Sequence[Message]) -> str:
        if messages and messages[-1].role == "assistant":  # continue the unfinished answer
            return self._render(messages[:-1]) + messages[-1].content
        return self._render(messages)

    def _render(self, messages: Sequence[Message]) -> str:
        if self._plain:
            return render_plain(messages)
        with _bounded_memory():
            if self._compiled is None and self._broken is None:
                try:
                    self._compiled = _compile(str(self.template))
                except Exception as error:  # noqa: BLE001 - any compile failure: report it
                    self._broken = _failure(error)
            if self._broken is not None:
                raise ChatTemplateError(f"the chat template does not compile ({self._broken})")
            try:
                return str(
                    self._compiled.render(
                        messages=[m.as_dict() for m in messages],
                        eos_token=self.eos_text,
                        bos_token=self.bos_text,
                        raise_exception=_raise_exception,
                        add_generation_prompt=True,
                        functions=None,
                        function_call=None,
                        tools=None,
                        tool_choice=None,
                        strftime_now=_strftime_now,
                    )
                )
            except Exception as error:  # noqa: BLE001 - the template is untrusted code
                raise ChatTemplateError(f"the chat template failed ({_failure(error)})") from error

    def starts_with_bos(self, prompt: str) -> bool:
        return bool(self.bos_text) and prompt.startswith(self.bos_text)
