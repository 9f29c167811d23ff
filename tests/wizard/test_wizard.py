"""The pair wizard driven page by page against the fake Hub, down to a saved active pair.

Set SPECDECK_SCREENSHOTS=/some/dir to keep a PNG of every page.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.models.catalog import Catalog, CatalogModel, CatalogPair
from app.models.library import Library
from app.ui.wizard.wizard import PairWizard
from app.workers.hub_messages import Calibrated
from tests.hub.fake_hub import FakeHub
from tests.wizard.helpers import DRAFT, HARDWARE, STRANGER, TARGET, shoot, tiny_catalog


def test_wizard_to_saved_active_pair(qtbot, tiny_hub: FakeHub, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    library = Library()
    wizard = PairWizard(library, tiny_catalog(), hardware=HARDWARE, models_root=tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        page = wizard.page_hardware
        assert wizard.currentPage() is page and page.isComplete()
        assert "CPU" in page.devices.text()
        page.ctx.setValue(512)
        shoot(page, "1_hardware")
        wizard.next()

        page = wizard.page_target
        assert wizard.currentPage() is page and not page.isComplete()
        page.tabs.setCurrentIndex(1)  # the Hub search works too
        page.query.setText("tiny")
        page._search()
        qtbot.waitUntil(lambda: page.results.count() == 3, timeout=10_000)
        assert page.results.item(0).text().startswith(TARGET)
        page.tabs.setCurrentIndex(0)
        page.catalog_list.setCurrentRow(0)
        assert page.isComplete()
        shoot(page, "2_target")
        wizard.next()

        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        rows = {
            page.table.item(r, 0).text(): page.table.item(r, 4).text()
            for r in range(page.table.rowCount())
        }
        assert rows == {"Q8_0": "fits", "F32": "fits"}
        assert page.table.item(page.table.currentRow(), 0).text() == "Q8_0"  # recommended
        shoot(page, "3_quant")
        wizard.next()

        page = wizard.page_draft
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        verdicts = [(o.candidate.repo, o.candidate.source, o.compatible) for o in page.options]
        assert verdicts[0] == (DRAFT, "catalog pair", True)
        stranger = next(o for o in page.options if o.candidate.repo == STRANGER)
        assert not stranger.compatible and stranger.mismatch
        shoot(page, "4_draft")
        wizard.next()

        page = wizard.page_review
        assert page.name.text() == "Tiny-1B + Tiny-0.1B"
        assert "fits" in page.summary.text()
        page.name.setText("Tiny pair")
        shoot(page, "5_review")

        tiny_hub.chunk_delay_s = 0.05  # slow enough to cancel part-way
        wizard.next()
        page = wizard.page_download
        qtbot.waitUntil(lambda: "Downloading" in page.status.text(), timeout=10_000)
        shoot(page, "6_download")
        qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: page.resume_button.isVisible(), timeout=10_000)
        assert "paused" in page.status.text() and not page.isComplete()
        tiny_hub.chunk_delay_s = 0
        qtbot.mouseClick(page.resume_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(page.isComplete, timeout=20_000)
        resumed = [e.range for e in tiny_hub.requests_for("tiny-1b-Q8_0.gguf") if e.range]
        assert resumed, "the second attempt should continue with a Range request"
        assert len(library.models) == 2
        wizard.next()

        page = wizard.page_verify
        calibrated: list[object] = []
        cancelled: list[int] = []
        wizard.calibration.result.connect(
            lambda r: calibrated.append(r) if isinstance(r, Calibrated) else None
        )
        wizard.calibration.failed.connect(
            lambda f: cancelled.append(f.request_id) if f.cancelled else None
        )
        # Back during the calibration and Next again: the first run is cancelled, not repeated.
        qtbot.waitUntil(lambda: "step" in page.steps.text(), timeout=30_000)
        assert page.cancel_button.isVisible()
        first = next(iter(page._pending))
        wizard.back()
        assert wizard.currentPage() is wizard.page_download
        wizard.next()
        qtbot.waitUntil(lambda: page.isComplete() or page.retry.isVisible(), timeout=120_000)
        assert page.isComplete(), page.status.text()
        qtbot.waitUntil(lambda: first in cancelled, timeout=10_000)
        assert len(calibrated) == 1 and calibrated[0].request_id != first
        cal = wizard.state.calibration
        assert cal is not None and 0.0 <= cal.acceptance <= 1.0 and cal.draft_max in (4, 8)
        assert len(cal.trials) == 2
        assert "✓ Target alone" in page.steps.text()
        text = page.status.text()
        assert ("not sure" in text) == (not cal.length_sure)
        if cal.speedup < 1:  # honest: slower is "slower", and needs consent to become active
            assert "slower" in text and "barely" not in text
            assert page.use_ngram.isVisible() and not page.activate.isChecked()
            page.activate.setChecked(True)  # the person consents
        else:
            assert page.activate.isChecked()
        shoot(page, "7_verify")
        with qtbot.waitSignal(wizard.profile_saved, timeout=5_000) as saved:
            wizard.next()
        assert saved.args == ["Tiny pair"]
        shoot(wizard.page_finish, "8_finish")
    finally:
        wizard.accept()
    assert not wizard.client._thread.isRunning()
    assert not wizard.calibration._thread.isRunning()
    assert wizard.calibration.context._engine is None  # the calibration's models are freed
    reloaded = Library()
    assert wizard.page_finish.activated == "Tiny pair"  # the window loads it now
    profile = reloaded.profiles["Tiny pair"]
    assert profile.n_ctx == 512 and profile.draft is not None
    assert profile.draft_max == cal.saved_draft_max  # the longest draft the Verify page said
    target_spec, draft_spec = reloaded.model_specs(profile)
    assert Path(target_spec.path).name == "tiny-1b-Q8_0.gguf" and draft_spec is not None


def test_gated_target_explains_the_token(
    qtbot,
    populated_hub: FakeHub,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    catalog = Catalog(
        (
            CatalogModel("g", "acme/Gated-GGUF", "g", 1.0, "Q8_0"),
            CatalogModel("s", "acme/Small-GGUF", "g", 0.1, "Q8_0"),
        ),
        (CatalogPair("g", "s"),),
    )
    wizard = PairWizard(
        Library(),
        catalog,
        hardware=HARDWARE,
        models_root=tmp_path / "models",
        token=False,
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        wizard.next()
        wizard.page_target.catalog_list.setCurrentRow(0)
        wizard.next()
        page = wizard.page_quant
        qtbot.waitUntil(lambda: "gated" in page.status.text(), timeout=10_000)
        assert "token" in page.status.text() and not page.isComplete()
        shoot(page, "gated")
    finally:
        wizard.reject()
    assert not wizard.client._thread.isRunning()
