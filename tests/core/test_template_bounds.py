"""A GGUF's chat template is a stranger's code: compiling it (which Jinja used to do at load,
folding constants such as ``'x' * 4000000000`` with no bound) and rendering it are bounded in
time and memory, in the real engine process, and end in a clear error the chat recovers from
with the plain format."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.chat_template import (
    TEMPLATE_MEMORY_BYTES,
    ChatFormatter,
    ChatTemplateError,
    Message,
)
from app.engine.config import DraftSource, ModelSpec
from app.engine.process.host import EngineHost, LoadRequest
from app.engine.process.protocol import TEMPLATE_SECONDS

MIB = 1 << 20
LINUX = sys.platform.startswith("linux")
DOUBLING = (
    "{% set ns = namespace(text='x') %}"
    "{% for i in range(40) %}{% set ns.text = ns.text ~ ns.text %}{% endfor %}{{ ns.text }}"
)
CAPPED = pytest.mark.skipif(not LINUX, reason="the address-space cap is Linux's")
# (template, what the error says, the most the engine process may grow by, seconds): the
# operators that build from a number are refused before they run; any other growth ends at
# the address-space cap (copying 512 MiB by doubling takes a few seconds on a busy machine,
# so that case gets more than the TEMPLATE_SECONDS the chat allows: the memory is the point)
BOMBS = [
    ("{{ 'x' * 4000000000 }}", "4,000,000,000 characters", 64 * MIB, TEMPLATE_SECONDS),
    (
        "{% if messages %}{{ [0] * 10 ** 9 }}{% endif %}",
        "1,000,000,000 items",
        64 * MIB,
        TEMPLATE_SECONDS,
    ),
    ("{{ 2 ** 100000000 }}", "bits", 64 * MIB, TEMPLATE_SECONDS),
    pytest.param(
        "{{ 'x' | center(4000000000) }}",
        "MiB of memory",
        TEMPLATE_MEMORY_BYTES + 64 * MIB,
        TEMPLATE_SECONDS,
        marks=CAPPED,
    ),
    pytest.param(DOUBLING, "MiB of memory", TEMPLATE_MEMORY_BYTES + 64 * MIB, 30.0, marks=CAPPED),
]


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (Linux's VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(("template", "said", "growth", "seconds"), BOMBS)
def test_a_template_bomb_is_a_clear_error_within_time_and_memory(
    tmp_path: Path, template: str, said: str, growth: int, seconds: float
) -> None:
    target = write_tiny_llama(tmp_path / "bomb.gguf", seed=1, chat_template=template)
    host = EngineHost()
    try:
        began = time.perf_counter()
        host.load(
            LoadRequest(ModelSpec(str(target), n_ctx=512, n_threads=1), None, DraftSource.NGRAM)
        )
        assert time.perf_counter() - began < 30  # nothing of the template runs at load
        assert host.pid is not None
        before = _peak_rss(host.pid) if LINUX else 0
        began = time.perf_counter()
        with pytest.raises(ChatTemplateError) as refused:
            host.tokenize_chat([{"role": "user", "content": "hello"}], timeout_s=seconds)
        took = time.perf_counter() - began
        message = str(refused.value)
        assert "broken chat template in bomb.gguf" in message and said in message
        assert took < seconds
        grew = _peak_rss(host.pid) - before if LINUX else 0
        assert grew < growth, f"the engine process grew by {grew / MIB:.0f} MiB"
        print(f"{template[:40]!r}: refused after {took:.2f} s, grew {grew / MIB:.0f} MiB")
        # the engine process lives on, and the chat goes on in the plain format
        host.use_plain_chat()
        assert len(host.tokenize_chat([{"role": "user", "content": "hello"}])) > 2
    finally:
        host.close()


def test_nothing_is_evaluated_at_compile_time_and_normal_templates_render() -> None:
    chatml = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    formatter = ChatFormatter(chatml, bos_text="<s>", eos_text="</s>")
    prompt = formatter.render([Message("user", "hi " * 3 + "|" * 2)])
    assert prompt == "<|im_start|>user\nhi hi hi ||<|im_end|>\n<|im_start|>assistant\n"
    extras = "{{ bos_token }}{% generation %}g{% endgeneration %}{{ messages | tojson }}"
    rendered = ChatFormatter(extras, bos_text="<s>", eos_text="</s>").render([Message("user", "é")])
    assert rendered == '<s>g[{"role": "user", "content": "é"}]'
    # a template that only fails when rendered is not run by building the formatter
    lazy = ChatFormatter("{{ 'x' * 4000000000 }}", bos_text="", eos_text="")
    assert not lazy.plain
    with pytest.raises(ChatTemplateError, match="16,777,216"):
        lazy.render([Message("user", "hi")])
