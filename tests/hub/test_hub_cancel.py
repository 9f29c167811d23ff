"""The wizard can stop a header inspection stuck on a Hub that drips one byte at a time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.engine.llama.hardware import Hardware
from app.models.catalog import Catalog, CatalogModel, CatalogPair
from app.models.library import Library
from app.ui.wizard.wizard import PairWizard
from app.workers.hub_jobs import HubSession, InspectRepo, Search
from app.workers.hub_messages import HubFailure
from app.workers.hub_worker import HubClient
from tests.hub.fake_hub import FakeHub, FakeRepo

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

REPO, FILE = "acme/Slow-GGUF", "slow-Q8_0.gguf"


@pytest.fixture
def slow_hub(fake_hub: FakeHub, gguf_bytes: dict[str, bytes]) -> FakeHub:
    fake_hub.add(FakeRepo(REPO, {FILE: gguf_bytes["small-Q8_0.gguf"]}))
    fake_hub.hostile.drip_s[FILE] = 0.02  # steady bytes: no stall timeout ever fires
    return fake_hub


def test_inspection_request_is_cancelled(qtbot, slow_hub: FakeHub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client = HubClient(HubSession(tmp_path / "models"))
    try:
        request = InspectRepo(REPO)
        with qtbot.waitSignal(client.failed, timeout=10_000) as failed:
            request_id = client.submit(request)
            qtbot.wait(300)
            began = time.monotonic()
            request.cancel.set()
        failure = failed.args[0]
        assert isinstance(failure, HubFailure) and failure.request_id == request_id
        assert failure.cancelled and time.monotonic() - began < 3
        # the worker is free again at once
        with qtbot.waitSignal(client.result, timeout=10_000):
            client.submit(Search("slow"))
    finally:
        client.shutdown()


def test_going_back_cancels_the_wizards_inspection(
    qtbot,
    slow_hub: FakeHub,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    catalog = Catalog(
        (
            CatalogModel("slow", REPO, "slow", 1.0, "Q8_0", "A slow target."),
            CatalogModel("slower", REPO, "slow", 0.1, "Q8_0", "Its draft.", draft_only=True),
        ),
        (CatalogPair("slow", "slower"),),
    )
    wizard = PairWizard(
        Library(),
        catalog,
        hardware=Hardware("CPU", (), 16 << 30, 8 << 30, 2),
        models_root=tmp_path / "models",
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        wizard.next()
        wizard.page_target.catalog_list.setCurrentRow(0)
        wizard.next()
        page = wizard.page_quant
        assert wizard.currentPage() is page and page.busy
        (cancel,) = page._cancels.values()
        qtbot.wait(200)
        wizard.back()
        assert cancel.is_set() and not page.busy
        with qtbot.waitSignal(wizard.client.failed, timeout=5_000) as failed:
            pass
        assert failed.args[0].cancelled
    finally:
        wizard.shutdown()
