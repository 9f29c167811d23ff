"""``mtp`` as a Lab configuration and a command-line draft source: the target drafts for
itself with its next-token layers, no draft file (the drafting itself is the engine's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import run
from app.devtools.test_models.synthetic import write_tiny_llama, write_tiny_qwen35
from app.engine.config import DraftSource
from app.lab import runner
from app.lab.configs import (
    ConfigError,
    LabConfig,
    check_drafting,
    describe_changes,
    parse_config,
    settings_changes,
)
from app.lab.plan import LabPlan
from app.lab.suites import Prompt
from app.store.settings import Settings


def test_mtp_configuration_parses_and_round_trips() -> None:
    heads = parse_config("heads:mtp,n=3")
    assert heads.source is DraftSource.MTP and heads.draft is None
    assert (heads.spec().draft_max, heads.spec().adaptive) == (3, False)
    assert heads.engine_key == ("mtp", None)
    assert heads.describe().startswith("MTP (the target's own heads) + n-gram first, fixed 3")
    assert "n-gram first" not in parse_config("h:mtp,lookup=off").describe()
    assert LabConfig.from_json(heads.to_json()) == heads
    with pytest.raises(ConfigError, match="cannot use 'mtp=2'"):
        parse_config("h:mtp=2")


def test_applying_an_mtp_configuration_names_it() -> None:
    changes = settings_changes(parse_config("heads:mtp"))
    assert changes["draft_source"] == "mtp" and "draft_path" not in changes
    current = Settings(draft_source="model", draft_path="/m/d.gguf")
    assert "drafting: draft model → MTP (the target's own heads)" in describe_changes(
        changes, current
    )


def test_an_mtp_configuration_needs_a_target_with_heads(tmp_path: Path) -> None:
    plain = write_tiny_llama(tmp_path / "plain.gguf")
    mtp = write_tiny_qwen35(tmp_path / "mtp.gguf")
    configs = (parse_config("heads:mtp"), parse_config("ng:ngram"))
    with pytest.raises(ConfigError, match=r"heads: plain.gguf has no next-token \(MTP\) layers"):
        check_drafting(configs, str(plain))
    check_drafting(configs, str(mtp))
    check_drafting((parse_config("ng:ngram"),), str(plain))


class _Loaded(Exception):
    pass


def test_the_lab_loads_an_mtp_configuration_without_a_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the Lab asks the engine process to load, for each kind of configuration."""
    asked: list[object] = []

    class Recorder:
        def __init__(self, cancel: object) -> None:
            pass

        def load(self, request: object) -> None:
            asked.append(request)
            raise _Loaded

    monkeypatch.setattr(runner, "EngineHost", Recorder)
    target = write_tiny_qwen35(tmp_path / "mtp.gguf")
    configs = (
        parse_config("heads:mtp,n=3"),
        parse_config("ng:ngram"),
        parse_config(f"d:draft={target}"),
    )
    plan = LabPlan(runner.target_spec(str(target)), configs, (Prompt("p", "code", "hi"),))
    pool = runner.EnginePool(plan, runner.CancelFlag())
    for config in configs:
        with pytest.raises(_Loaded):
            pool.for_config(config)
    sources = [(r.draft_source, r.draft) for r in asked]  # type: ignore[attr-defined]
    assert sources[0] == (DraftSource.MTP, None)
    assert sources[1] == (DraftSource.NGRAM, None)
    assert sources[2][0] is DraftSource.MODEL and sources[2][1].path == str(target)


def test_the_command_line_draft_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = write_tiny_llama(tmp_path / "plain.gguf")
    # refused before anything loads, with the reason
    cases = {
        ("--draft-source", "mtp"): "plain.gguf has no next-token (MTP) layers",
        ("--draft-source", "model"): "--draft-source model needs --draft FILE",
        ("--draft-source", "ngram", "--draft", str(plain)): "leave --draft out",
        ("--draft-source", "mtp", "--ngram"): "name different draft sources",
    }
    for options, message in cases.items():
        assert run(["generate", "--target", str(plain), *options, "hi"]) == 2
        assert message in capsys.readouterr().err
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n')
    bench = ["bench", "--target", str(plain), "--prompts", str(prompts), "--json", "o.json"]
    assert run([*bench, "--draft-source", "mtp"]) == 2
    assert "has no next-token (MTP) layers" in capsys.readouterr().err
    assert run(bench) == 2
    assert "--draft-source mtp" in capsys.readouterr().err


def test_the_command_line_picks_mtp_for_a_target_with_heads(tmp_path: Path) -> None:
    import argparse

    from app.cli.options import model_specs

    mtp = write_tiny_qwen35(tmp_path / "mtp.gguf")
    base = dict(
        target=str(mtp),
        ngram=False,
        ctx=512,
        threads=1,
        gpu_layers=0,
        draft_gpu_layers=0,
        kv_type="f16",
        flash_attn="auto",
        repack="auto",
        sampling="auto",
    )
    target, draft, source = model_specs(argparse.Namespace(**base, draft=None, draft_source="mtp"))
    assert (target.path, draft, source) == (str(mtp), None, DraftSource.MTP)
    _, _, source = model_specs(argparse.Namespace(**base, draft=None, draft_source=None))
    assert source is DraftSource.NGRAM
