"""The pair wizard without a network, and the draft page's ways out of a dead end.

"Offline" is a closed port on 127.0.0.1 (connection refused) or a server that accepts the
connection and never answers. Set SPECDECK_SCREENSHOTS=/some/dir to keep a PNG of each page.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from app.models.catalog import Catalog  # noqa: E402
from app.models.library import Library  # noqa: E402
from app.ui.wizard import PairWizard  # noqa: E402
from app.workers.hub_worker import PROBE_DEADLINE_S  # noqa: E402
from tests.ggufs import write_gguf  # noqa: E402
from tests.hub.fake_hub import FakeHub, FakeRepo  # noqa: E402
from tests.wizard.helpers import DRAFT, HARDWARE, shoot, tiny_catalog  # noqa: E402


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
    synthetic = pytest.importorskip("app.engine.synthetic")
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "specdeck"))
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
    }


def offline_wizard(qtbot, endpoint: str, root: Path) -> PairWizard:  # type: ignore[no-untyped-def]
    wizard = PairWizard(
        Library(), tiny_catalog(), hardware=HARDWARE, models_root=root, endpoint=endpoint
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
        with qtbot.waitSignal(wizard.profile_saved, timeout=5_000):
            wizard.next()
        shoot(wizard.page_finish, "offline-6-finish")
    finally:
        wizard.accept()
    library = Library()
    assert wizard.page_finish.activated == "Offline pair"  # the window loads it now
    target, draft = library.model_specs(library.profiles["Offline pair"])
    assert Path(target.path) == local_models["target"]
    assert draft is not None and Path(draft.path) == local_models["draft"]


LONELY = "solo/Lonely-1B-GGUF"


@pytest.fixture
def lonely_hub(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    """A target whose family has no smaller model anywhere: only its own quantizations."""
    synthetic = pytest.importorskip("app.engine.synthetic")
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
