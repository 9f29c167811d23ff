"""One place for each default (issue 19 §3): the chat, the command line, the Lab and the
server offer the same sampler and the same draft lengths, so a setting carried from one to
another means the same thing."""

from __future__ import annotations

from dataclasses import fields

import pytest

from app.cli.main import build_parser
from app.engine.config import DEFAULT_SEED, SamplerConfig
from app.lab.configs import ConfigError, LabConfig, parse_config, settings_changes
from app.serve.params import Sampling
from app.store.settings import Invalid, Settings, parse_field

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

NUMBERS = ("temperature", "top_k", "top_p", "min_p")


def test_the_chat_the_command_line_the_lab_and_the_server_start_from_one_sampler() -> None:
    engine = SamplerConfig()
    settings, served = Settings(), Sampling()
    parser = build_parser()
    generate = parser.parse_args(["generate", "--target", "t.gguf", "hello"])
    bench = parser.parse_args(["bench", "--target", "t.gguf", "--prompts", "p", "--json", "j"])
    lab = parser.parse_args(["lab", "run", "--target", "t.gguf"])
    for name in NUMBERS:
        want = getattr(engine, name)
        for where, value in (
            ("settings", getattr(settings, name)),
            ("server", getattr(served, name)),
            ("generate", getattr(generate, name)),
            ("bench", getattr(bench, name)),
        ):
            assert value == want, (name, where, value, want)
    assert LabConfig("c", draft="d.gguf").temperature == engine.temperature
    # a person's runs start from one fixed seed; the engine and the server draw a fresh one
    assert settings.seed == generate.seed == bench.seed == lab.seed == DEFAULT_SEED
    assert engine.seed is None and served.seed is None
    assert {f.name for f in fields(SamplerConfig)} >= set(NUMBERS)


def test_every_draft_length_the_lab_accepts_the_chat_accepts_too() -> None:
    """The Lab took n up to 256, the chat's setting 1..64: "Apply to chat" could carry a
    length the chat then refused."""
    longest = None
    for n in (1, 16, 64, 65, 128, 256, 257):
        try:
            config = parse_config(f"x:draft=d.gguf,n={n}")
        except ConfigError:
            with pytest.raises(Invalid):
                parse_field("draft_max", str(n))
            continue
        longest = n
        changes = settings_changes(config)
        assert parse_field("draft_max", str(changes["draft_max"])) == n
    assert longest == 64
    assert LabConfig("c", draft="d.gguf").draft_max == Settings().draft_max
