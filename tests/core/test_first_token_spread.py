"""The first-token spread tool's groups: what a bench taking that many runs would report."""

from __future__ import annotations

import pytest

from app.devtools.first_token_spread import group_ratios

pytestmark = pytest.mark.fast


def test_each_whole_group_gives_its_ratio_of_medians_and_a_partial_group_none() -> None:
    base = [100.0, 300.0, 200.0, 100.0, 100.0, 100.0, 999.0]
    spec = [110.0, 150.0, 210.0, 90.0, 100.0, 500.0, 1.0]
    # groups of 3: medians 200 vs 150, then 100 vs 100; the 7th run makes no group
    assert group_ratios(base, spec, 3) == [pytest.approx(0.75), pytest.approx(1.0)]
    assert group_ratios(base, spec, 7) == [pytest.approx(110.0 / 100.0)]
    assert group_ratios(base[:2], spec[:2], 3) == []
