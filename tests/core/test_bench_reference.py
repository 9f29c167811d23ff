"""``bench --reference``: the command line passes the developer tools' runner to the bench,
and refuses in words where the developer tools are left out (as the installers do)."""

from __future__ import annotations

import importlib.util
import pickle

import pytest

from app.cli import main as cli
from app.engine.bench import BenchSettings

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_from_source_the_reference_runner_is_the_developer_tools_one() -> None:
    from app.devtools.reference import run_reference

    assert cli.reference_run() is run_reference
    # the settings cross into the engine process with the runner in them
    settings = pickle.loads(pickle.dumps(BenchSettings(reference=run_reference)))
    assert settings.reference is run_reference


def test_without_the_developer_tools_reference_is_refused_in_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    real_find_spec = importlib.util.find_spec

    def left_out(name: str, package: str | None = None):
        if name.startswith("app.devtools"):
            return None
        return real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", left_out)
    code = cli.run(
        [
            "bench",
            *("--target", str(tmp_path / "target.gguf"), "--draft", str(tmp_path / "draft.gguf")),
            *("--prompts", str(tmp_path / "prompts.jsonl"), "--json", str(tmp_path / "out.json")),
            "--reference",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "bench --reference is not in this build" in err
    assert "developer tools are left out of installers" in err
    assert not (tmp_path / "out.json").exists()
