"""The pair wizard without a network, and the draft page's ways out of a dead end.

"Offline" is a closed port on 127.0.0.1 (connection refused) or a server that accepts the
connection and never answers. Set SPECDECK_SCREENSHOTS=/some/dir to keep a PNG of each page.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWizard

from app.devtools.test_models import synthetic
from app.models.catalog import Catalog, CatalogModel, CatalogPair
from app.models.hub import HubError, explain
from app.models.library import Library
from app.ui.wizard.wizard import PairWizard
from app.workers.calibration import CALIBRATION_DRAFT_LENGTHS
from app.workers.hub_jobs import PROBE_DEADLINE_S
from app.workers.hub_messages import Calibrated
from app.workers.jobs import is_unreachable
from tests.ggufs import write_gguf
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.wizard.helpers import DRAFT, HARDWARE, TARGET, shoot, tiny_catalog


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def local_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "specdeck"))
    cache = tmp_path / "model-cache"  # where the demo pair lives; empty unless a test fills it
    cache.mkdir()
    monkeypatch.setenv("SPECDECK_MODEL_CACHE", str(cache))
    root = tmp_path / "models"
    downloaded = root / "acme--Tiny-1B-GGUF"
    downloaded.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return {
        "root": root,
        "target": synthetic.write_tiny_llama(downloaded / "tiny-1b-F32.gguf", seed=0),
        "draft": synthetic.write_tiny_llama(
            elsewhere / "tiny-draft.gguf", seed=1, noise_from=0, noise=0.02
        ),
        "stranger": write_gguf(elsewhere / "stranger.gguf"),
        "cache": cache,
    }


def offline_wizard(qtbot, endpoint: str, root: Path, catalog: Catalog | None = None) -> PairWizard:  # type: ignore[no-untyped-def]
    wizard = PairWizard(
        Library(), catalog or tiny_catalog(), hardware=HARDWARE, models_root=root, endpoint=endpoint
    )
    qtbot.addWidget(wizard)
    wizard.show()
    return wizard


@pytest.mark.parametrize("where", ["closed_port", "silent_server"])
def test_offline_is_known_within_3_s(
    qtbot,
    request,
    where: str,  # type: ignore[no-untyped-def]
    local_models: dict[str, Path],
) -> None:
    endpoint = request.getfixturevalue(where)
    began = time.monotonic()
    wizard = offline_wizard(qtbot, endpoint, local_models["root"])
    try:
        qtbot.waitUntil(lambda: wizard.state.online is False, timeout=5_000)
        assert time.monotonic() - began < 3.0
        note = wizard.page_hardware.offline
        assert note.isVisible() and "Offline" in note.label.text()
        assert "switch to offline mode" not in note.label.text()
        # Said once: the target page reuses the answer instead of asking again.
        wizard.next()
        page = wizard.page_target
        assert page.offline.isVisible() and not wizard.probing
        assert page.tabs.currentIndex() == page.local_tab
        assert not page.search_button.isEnabled()
        # Retry asks again, and is answered as quickly.
        retried = time.monotonic()
        qtbot.mouseClick(page.offline.retry, Qt.MouseButton.LeftButton)
        assert wizard.probing
        qtbot.waitUntil(lambda: wizard.state.online is False, timeout=5_000)
        assert time.monotonic() - retried < PROBE_DEADLINE_S + 0.5
    finally:
        wizard.reject()
    assert not wizard.client._thread.isRunning()


def test_offline_pair_from_models_on_this_computer(
    qtbot,
    closed_port: str,  # type: ignore[no-untyped-def]
    local_models: dict[str, Path],
) -> None:
    wizard = offline_wizard(qtbot, closed_port, local_models["root"])
    try:
        qtbot.waitUntil(lambda: wizard.state.online is False, timeout=5_000)
        shoot(wizard.page_hardware, "offline-1-hardware")
        wizard.next()

        page = wizard.page_target
        qtbot.waitUntil(lambda: page.local_list.count() == 1, timeout=10_000)
        assert "tiny-1b-F32.gguf" in page.local_list.item(0).text()  # already downloaded
        assert "fits" in page.local_list.item(0).text()  # memory fit on this machine
        page.local_list.setCurrentRow(0)
        assert page.isComplete()
        shoot(page, "offline-2-target")
        wizard.next()

        page = wizard.page_draft  # the quantization page is skipped for a local file
        assert wizard.currentPage() is page
        qtbot.waitUntil(lambda: "No compatible draft" in page.status.text(), timeout=10_000)
        assert not page.isComplete() and not page.repo.isEnabled()
        page.add_local_file(str(local_models["stranger"]))  # Browse…
        qtbot.waitUntil(lambda: page.table.rowCount() == 1, timeout=10_000)
        verdict = page.table.item(0, 4).text()
        assert verdict.startswith("incompatible") and "different tokenizers" in verdict
        assert not page.isComplete()
        page.add_local_file(str(local_models["draft"]))
        qtbot.waitUntil(lambda: page.table.rowCount() == 2, timeout=10_000)
        qtbot.waitUntil(page.isComplete, timeout=5_000)
        assert page.table.item(page.table.currentRow(), 0).text() == "tiny-draft.gguf"
        shoot(page, "offline-3-draft")
        wizard.next()

        page = wizard.page_review
        assert "nothing" in page.summary.text() and "fits" in page.summary.text()
        page.name.setText("Offline pair")
        shoot(page, "offline-4-review")
        wizard.next()

        page = wizard.page_verify  # nothing to download: straight to the calibration
        assert wizard.currentPage() is page
        qtbot.waitUntil(lambda: page.isComplete() or page.retry.isVisible(), timeout=120_000)
        assert page.isComplete(), page.status.text()
        page.activate.setChecked(True)
        shoot(page, "offline-5-verify")
        calibration = wizard.state.calibration
        assert calibration is not None
        # the draft drafted in every trial (no guard pause): its near-copy agrees often
        assert calibration.acceptance > 0.3, page.status.text()
        said = draft_length_said(page.status.text())
        with qtbot.waitSignal(wizard.profile_saved, timeout=5_000):
            wizard.next()
        shoot(wizard.page_finish, "offline-6-finish")
    finally:
        wizard.accept()
    library = Library()
    assert wizard.page_finish.activated == "Offline pair"  # the window loads it now
    assert library.profiles["Offline pair"].draft_max == said  # as the Verify page said
    target, draft = library.model_specs(library.profiles["Offline pair"])
    assert Path(target.path) == local_models["target"]
    assert draft is not None and Path(draft.path) == local_models["draft"]


LONELY = "solo/Lonely-1B-GGUF"


@pytest.fixture
def lonely_hub(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    """A target whose family has no smaller model anywhere: only its own quantizations."""
    base = synthetic.write_tiny_llama(tmp_path / "lonely.gguf", seed=0).read_bytes()
    draft = synthetic.write_tiny_llama(
        tmp_path / "d.gguf", seed=1, noise_from=0, noise=0.02
    ).read_bytes()

    def padded(factor: float) -> bytes:
        return base + bytes(int(len(base) * (factor - 1)))

    fake_hub.add(
        FakeRepo(
            LONELY,
            {
                "lonely-1b-F32.gguf": padded(4.0),
                "lonely-1b-Q8_0.gguf": padded(2.0),
                "lonely-1b-Q4_1.gguf": padded(1.3),
                "lonely-1b-Q2_K.gguf": base,
            },
            downloads=10,
        )
    )
    fake_hub.add(FakeRepo(DRAFT, {"tiny-0.1b-F32.gguf": draft}, downloads=50))
    return fake_hub


def test_draft_dead_end_offers_quantization_typed_repo_and_ngram(  # type: ignore[no-untyped-def]
    qtbot, lonely_hub: FakeHub, tmp_path: Path
) -> None:
    wizard = PairWizard(
        Library(), Catalog((), ()), hardware=HARDWARE, models_root=tmp_path / "models"
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        qtbot.waitUntil(lambda: wizard.state.online is True, timeout=5_000)
        wizard.next()
        page = wizard.page_target
        page.tabs.setCurrentIndex(1)
        page.query.setText("lonely")
        page._search()
        qtbot.waitUntil(lambda: page.results.count() == 1, timeout=10_000)
        page.results.setCurrentRow(0)
        wizard.next()
        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        for row in range(page.table.rowCount()):
            if page.table.item(row, 0).text() == "F32":
                page.table.selectRow(row)
        wizard.next()

        page = wizard.page_draft
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        same = page.options[0]
        assert same.candidate.repo == LONELY and same.compatible
        assert same.candidate.source == "same model, smaller quantization"
        # The smallest sensible quantization by default: 4 bits, not Q8_0, not Q2_K.
        assert same.group is not None and same.group.quant == "Q4_1"
        choices = [page.quant.itemData(i).quant for i in range(page.quant.count())]
        assert choices[0] == "Q4_1" and set(choices) == {"Q4_1", "Q8_0", "Q2_K"}
        shoot(page, "dead-end-draft")

        # A repository typed by the person is checked like the others.
        page.repo.setText(DRAFT)
        page._check_repo()
        qtbot.waitUntil(lambda: page.options[0].candidate.repo == DRAFT, timeout=10_000)
        assert page.options[0].compatible and page.options[0].candidate.source == "typed by you"
        page.repo.setText("not a repo")
        page._check_repo()
        assert "not a repository name" in page.status.text()

        # The person may pick a larger draft quantization; Review then warns.
        page.table.selectRow(1)
        assert page.options[1].candidate.repo == LONELY
        page.quant.setCurrentIndex(choices.index("Q8_0"))
        wizard.next()
        assert wizard.state.draft is not None and wizard.state.draft.group.quant == "Q8_0"
        review = wizard.page_review
        assert "Warning: the draft is 50% of the target" in review.summary.text()
        shoot(review, "review-draft-too-big")
        wizard.back()
        page.quant.setCurrentIndex(choices.index("Q4_1"))
        wizard.next()
        assert "Warning" not in review.summary.text()
        wizard.back()

        # And no draft model at all.
        page.ngram.setChecked(True)
        assert page.isComplete() and not page.table.selectedItems()
        wizard.next()
        assert wizard.state.draft_ngram
        assert review.name.text() == "Lonely-1B + n-gram"
        assert "n-gram" in review.summary.text()
        wizard.next()
        page = wizard.page_download
        qtbot.waitUntil(page.isComplete, timeout=20_000)
        with qtbot.waitSignal(wizard.profile_saved, timeout=5_000):
            wizard.next()  # no calibration without a draft model
        assert wizard.currentPage() is wizard.page_finish
    finally:
        wizard.accept()
    library = Library()
    profile = library.profiles["Lonely-1B + n-gram"]
    assert profile.draft is None and wizard.page_finish.activated == profile.name


class _ProxyRefused(httpx2.ConnectError):
    """A transport's own kind of refused connection: an httpx2 error under another name."""


def test_an_unreachable_hub_is_known_by_the_error_s_type_not_its_name() -> None:
    wrapped = HubError("listing acme/x failed")
    wrapped.__cause__ = _ProxyRefused("connection refused by the proxy")
    assert is_unreachable(wrapped)
    assert is_unreachable(httpx2.WriteError("broken pipe"))
    assert not is_unreachable(HubError("acme/x: the Hub answered HTTP 404"))
    assert "cannot reach the Hugging Face Hub" in str(explain(_ProxyRefused("refused"), "listing"))


def draft_length_said(status: str) -> int:
    """The longest draft the Verify page says the pair is saved with; when it promises that
    adaptive drafting settles the length, that length must leave it room to."""
    line = next(x for x in status.split("<br>") if "Draft length:" in x)
    match = re.search(r"up to (\d+) tokens per pass", line)
    assert match is not None, line
    said = int(match.group(1))
    assert line.rstrip().endswith("."), line  # its last sentence ends
    if "settles" in line:
        assert said > max(CALIBRATION_DRAFT_LENGTHS), line
    return said


@pytest.mark.parametrize(
    "trials, noise, sure",
    [
        (((4, 21.6), (8, 21.0)), 0.03, False),  # the screenshot: a toss-up
        (((4, 12.0), (8, 9.0)), 0.02, True),  # 4 clearly faster
        (((4, 9.0), (8, 12.0)), 0.02, True),  # 8 clearly faster
    ],
)
def test_calibration_text_and_saved_draft_length_agree(  # type: ignore[no-untyped-def]
    qtbot, tmp_path: Path, local_models: dict[str, Path], trials, noise: float, sure: bool
) -> None:
    library = Library()
    target = library.import_gguf(local_models["target"]).id
    draft = library.import_gguf(local_models["draft"]).id
    wizard = PairWizard(
        library, tiny_catalog(), hardware=HARDWARE, models_root=local_models["root"], offline=True
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        best = max(trials, key=lambda trial: trial[1])
        result = Calibrated(0, 0.94, best[1], 13.3, best[1] / 13.3, best[0], 3.0, trials, noise)
        assert result.length_sure is sure
        page = wizard.page_verify
        page.show_calibration(result)
        said = draft_length_said(page.status.text())
        if not sure:
            assert "adaptive" in page.status.text() and "not sure" in page.status.text()
        state = wizard.state
        state.target_model_id, state.draft_model_id = target, draft
        state.profile_name = "Calibrated pair"
        wizard.page_finish.initializePage()
        saved = Library().profiles["Calibrated pair"]
        assert saved.draft_max == said
        assert f"longest draft ({said} tokens per pass)" in wizard.page_finish.status.text()
    finally:
        wizard.reject()


def test_models_on_this_computer_include_the_model_cache(  # type: ignore[no-untyped-def]
    qtbot, closed_port: str, local_models: dict[str, Path]
) -> None:
    cache = local_models["cache"]
    synthetic.write_tiny_llama(cache / "demo-target.F32.gguf", seed=0)
    synthetic.write_tiny_llama(cache / "demo-draft.Q2_K.gguf", seed=1, noise_from=0, noise=0.02)
    build = cache / "reference" / "src" / "models"  # a build tree below it: not models to offer
    build.mkdir(parents=True)
    write_gguf(build / "ggml-vocab-test.gguf")
    (cache / "broken.gguf").write_bytes(b"GGUF" + bytes(12))  # fails its header check
    wizard = offline_wizard(qtbot, closed_port, local_models["root"])
    try:
        qtbot.waitUntil(lambda: wizard.state.online is False, timeout=5_000)
        wizard.next()
        page = wizard.page_target
        assert page.tabs.currentIndex() == page.local_tab
        qtbot.waitUntil(lambda: page.local_list.count() == 3, timeout=10_000)
        texts = [page.local_list.item(row).text() for row in range(3)]
        cached = [text for text in texts if "in SpecDeck's model cache" in text]
        assert len(cached) == 2, texts
        assert not any("ggml-vocab" in text for text in texts)
        assert "broken.gguf" in page.local_status.text()  # read, and said why it is not usable
        shoot(page, "offline-2-target-model-cache")
        row = next(i for i, text in enumerate(texts) if "demo-target.F32.gguf" in text)
        page.local_list.setCurrentRow(row)
        assert page.isComplete() and wizard.button(QWizard.WizardButton.NextButton).isEnabled()
        wizard.next()

        page = wizard.page_draft  # the cache's draft is offered, checked against the target
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        names = {
            page.table.item(r, 0).text(): page.table.item(r, 4).text()
            for r in range(page.table.rowCount())
        }
        assert names.get("demo-draft.Q2_K.gguf") == "compatible", names
    finally:
        wizard.reject()


def test_offline_curated_target_says_why_next_is_off_or_goes_on_with_its_files(  # type: ignore[no-untyped-def]
    qtbot, closed_port: str, local_models: dict[str, Path]
) -> None:
    base = tiny_catalog()
    elsewhere = CatalogModel("big-8b", "acme/Big-8B-GGUF", "tiny", 8.0, "Q4_K_M", "Not here.")
    catalog = Catalog((*base.models, elsewhere), (*base.pairs, CatalogPair("big-8b", "tiny-0.1b")))
    wizard = offline_wizard(qtbot, closed_port, local_models["root"], catalog)
    next_button = wizard.button(QWizard.WizardButton.NextButton)
    try:
        qtbot.waitUntil(lambda: wizard.state.online is False, timeout=5_000)
        wizard.next()
        page = wizard.page_target
        qtbot.waitUntil(lambda: page.local_list.count() == 1, timeout=10_000)
        page.tabs.setCurrentIndex(0)  # Curated pairs
        rows = {
            page.catalog_list.item(r).data(Qt.ItemDataRole.UserRole): r
            for r in range(page.catalog_list.count())
        }
        page.catalog_list.setCurrentRow(rows["acme/Big-8B-GGUF"])
        assert not page.isComplete() and not next_button.isEnabled()
        reason = page.reason
        assert reason.isVisible() and reason.textFormat() == Qt.TextFormat.PlainText
        assert "cannot be reached" in reason.text() and "Models on this computer" in reason.text()
        assert "acme/Big-8B-GGUF" in reason.text()
        shoot(page, "offline-curated-not-here")

        # a curated target downloaded before goes on, from its files on this computer
        page.catalog_list.setCurrentRow(rows[TARGET])
        assert page.isComplete() and next_button.isEnabled() and reason.isHidden()
        wizard.next()
        assert wizard.currentPage() is wizard.page_draft  # no Hub: no quantization page
        assert wizard.state.target_local is not None
        assert Path(wizard.state.target_local.path) == local_models["target"]
    finally:
        wizard.reject()
