"""One declared schema per outside input (request bodies, Lab result files, settings): each
holds its values to strict types (true is not a number, "5" is not 5, NaN is not a number)
and names a refused value by its place."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.engine.config import DraftSource
from app.files.values import BadValue
from app.lab.configs import ConfigError, LabConfig
from app.lab.results import check_record
from app.serve.params import ApiError, Sampling, chat_call
from app.store.settings import settings_from_json

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

ASK = {"messages": [{"role": "user", "content": "x"}]}
RUN = {"tok_s": 20.0, "tokens": 8}
PROMPT = {"kind": "prompt", "phase": "tuning", "prompt": "p", "category": "c", "repeat": 0}


@pytest.mark.parametrize("value", [True, "5", math.nan, math.inf, [5], {"n": 5}])
def test_a_number_is_a_number_in_every_schema(value: Any) -> None:
    with pytest.raises(ApiError) as refused:
        chat_call({**ASK, "max_tokens": value}, Sampling())
    assert refused.value.param == "max_tokens" and "max_tokens" in refused.value.message
    record = {**PROMPT, "baselines": {}, "runs": {"ng": {**RUN, "tokens": value}}}
    with pytest.raises(BadValue, match="runs.ng.tokens"):
        check_record(record)
    with pytest.raises(ConfigError, match="draft_max"):
        LabConfig.from_json({"name": "ng", "source": "ngram", "draft_max": value})
    settings, notes = settings_from_json({"max_tokens": value}, "settings.json")
    assert settings.max_tokens == 256 and '"max_tokens"' in notes[0]


def test_a_figure_given_as_null_is_refused_and_one_left_out_is_not() -> None:
    check_record({**PROMPT, "baselines": {}, "runs": {"ng": {"tok_s": 1.0}}})
    with pytest.raises(BadValue, match=r"runs.ng.tok_s is not a number \(it is null\)"):
        check_record({**PROMPT, "baselines": {}, "runs": {"ng": {"tok_s": None}}})
    with pytest.raises(ConfigError, match=r"adaptive is not true or false \(it is null\)"):
        LabConfig.from_json({"name": "ng", "source": "ngram", "adaptive": None})
    assert LabConfig.from_json({"name": "ng", "source": "ngram"}) == LabConfig(
        "ng", DraftSource.NGRAM
    )


def test_every_missing_key_is_named_at_once() -> None:
    with pytest.raises(BadValue, match="^prompt, category, repeat, baselines, runs missing$"):
        check_record({"kind": "prompt", "phase": "tuning"})


def test_choices_say_what_they_allow() -> None:
    with pytest.raises(ConfigError, match="source is 'eagle', not one of model, ngram, mtp"):
        LabConfig.from_json({"name": "x", "source": "eagle"})
    with pytest.raises(ApiError, match="role is 'a list'; it must be one of system"):
        chat_call({"messages": [{"role": ["user"], "content": "x"}]}, Sampling())
