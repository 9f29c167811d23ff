"""The wizard with a target that drafts for itself: "This model drafts for itself (MTP, N
heads) — no draft download" comes first and ticked, the pair is saved with draft_source
"mtp" and no draft file; heads offered as a target (assistant, EAGLE-3) are explained.

Set SPECDECK_SCREENSHOTS=/some/dir to keep a PNG of every page.
"""

from __future__ import annotations

import html
import struct
from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.engine.config import DraftSource
from app.models.catalog import Catalog, CatalogFile, CatalogModel
from app.models.library import Library
from app.ui.pair_chooser import choice_for_profile
from app.ui.wizard.wizard import PairWizard
from tests.ggufs import GGUF_U32, head_header, kv_array
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.wizard.helpers import HARDWARE, shoot

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

SELF = "acme/Self-MTP-GGUF"
HEAD = "acme/Gemma4-Assistant-GGUF"


def catalog() -> Catalog:
    return Catalog(
        (
            CatalogModel(
                "self",
                SELF,
                "qwen35",
                1.0,
                "Q8_0",
                "A tiny model with a next-token layer.",
                confirmed="https://example.invalid/fake-hub",
                drafting="mtp",
                files=(CatalogFile("self-Q8_0.gguf"),),
            ),
        ),
        (),
    )


@pytest.fixture
def mtp_hub(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    model = write_tiny_qwen35(tmp_path / "self.gguf").read_bytes()
    head = head_header(tmp_path / "head.gguf").read_bytes()
    files = {"self-Q8_0.gguf": model, "self-F32.gguf": model, "mtp-self-Q8_0.gguf": head}
    fake_hub.add(FakeRepo(SELF, files, downloads=10))
    fake_hub.add(FakeRepo(HEAD, {"gemma4-assistant-Q8_0.gguf": head}, downloads=5))
    return fake_hub


def wizard_on(qtbot, tmp_path: Path) -> PairWizard:  # type: ignore[no-untyped-def]
    wizard = PairWizard(Library(), catalog(), hardware=HARDWARE, models_root=tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    wizard.page_hardware.ctx.setValue(512)
    return wizard


def test_a_self_drafting_target_saves_an_mtp_pair_with_no_draft_download(
    qtbot,  # type: ignore[no-untyped-def]
    mtp_hub: FakeHub,
    tmp_path: Path,
) -> None:
    wizard = wizard_on(qtbot, tmp_path)
    try:
        wizard.next()
        page = wizard.page_target
        text = page.catalog_list.item(0).text()
        assert "drafts for itself (MTP)" in text
        assert "unchecked: not yet confirmed against the Hub with check-pair" in text
        page.catalog_list.setCurrentRow(0)
        shoot(page, "mtp_1_target")
        wizard.next()

        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        files = {page.table.item(r, 1).text() for r in range(page.table.rowCount())}
        assert files == {"self-Q8_0.gguf", "self-F32.gguf"}  # the head file is no target quant
        status = page.status.text()
        assert "drafting for itself (MTP, 1 head: its MTP context included)" in status
        assert "1 drafting head file(s) (mtp-self-Q8_0.gguf)" in status
        shoot(page, "mtp_2_quant")
        wizard.next()

        page = wizard.page_draft
        assert page.mtp.isVisible() and page.mtp.isChecked()  # first choice, the default
        assert page.mtp.text() == "This model drafts for itself (MTP, 1 head) — no draft download"
        assert page.isComplete()
        qtbot.waitUntil(lambda: not page.busy, timeout=10_000)
        assert page.mtp.isChecked() and not page.table.selectedItems()  # still the choice
        shoot(page, "mtp_3_draft")
        wizard.next()

        page = wizard.page_review
        assert page.name.text() == "Self-MTP + MTP"
        summary = html.unescape(page.summary.text())
        assert "the target's own next-token layers (MTP, 1 head), no draft model" in summary
        assert "MTP context" in summary
        assert [item.group.first.path for item in page.items()] == ["self-Q8_0.gguf"]
        shoot(page, "mtp_4_review")
        before = {e.path for e in mtp_hub.log}
        wizard.next()

        page = wizard.page_download
        qtbot.waitUntil(page.isComplete, timeout=20_000)
        assert wizard.page_download.nextId() == wizard.id_finish  # no calibration of a draft
        with qtbot.waitSignal(wizard.profile_saved, timeout=5_000) as saved:
            wizard.next()
        shoot(wizard.page_finish, "mtp_5_finish")
        fetched = {e.path for e in mtp_hub.log} - before
        assert not any("mtp-self" in path for path in fetched)  # no draft download
    finally:
        wizard.accept()
    library = Library()
    profile = library.profiles[saved.args[0]]
    assert profile.draft is None and profile.draft_source == "mtp"
    assert wizard.page_finish.activated == profile.name
    assert list(library.models.values())[0].drafting == "MTP, 1 head"
    choice = choice_for_profile(library, profile.name)
    assert choice.draft_source is DraftSource.MTP and choice.draft_path is None


def test_choosing_a_draft_source_other_than_mtp(
    qtbot,  # type: ignore[no-untyped-def]
    mtp_hub: FakeHub,
    tmp_path: Path,
) -> None:
    wizard = wizard_on(qtbot, tmp_path)
    try:
        wizard.next()
        wizard.page_target.catalog_list.setCurrentRow(0)
        wizard.next()
        qtbot.waitUntil(wizard.page_quant.isComplete, timeout=10_000)
        wizard.next()
        page = wizard.page_draft
        page.ngram.setChecked(True)
        assert not page.mtp.isChecked() and page.isComplete()
        wizard.next()
        assert wizard.page_review.name.text() == "Self-MTP + n-gram"
        wizard.back()
        assert not page.mtp.isChecked() and page.ngram.isChecked()  # the choice is kept
    finally:
        wizard.reject()


def test_a_head_offered_as_the_target_is_explained(
    qtbot,  # type: ignore[no-untyped-def]
    mtp_hub: FakeHub,
    tmp_path: Path,
) -> None:
    wizard = wizard_on(qtbot, tmp_path)
    try:
        wizard.next()
        page = wizard.page_target
        page.tabs.setCurrentIndex(1)
        page.query.setText("assistant")
        page._search()
        qtbot.waitUntil(lambda: page.results.count() >= 1, timeout=10_000)
        row = next(i for i in range(page.results.count()) if HEAD in page.results.item(i).text())
        page.results.setCurrentRow(row)
        wizard.next()
        page = wizard.page_quant
        qtbot.waitUntil(lambda: "not a target" in page.status.text(), timeout=10_000)
        assert "this is an assistant draft for gemma4, not a target" in page.status.text()
        assert "Choose a gemma4 model as the target instead" in page.status.text()
        assert page.table.rowCount() == 0 and not page.isComplete()
        shoot(page, "head_as_target")
        # the same file on this computer is listed, explained, and cannot be chosen
        wizard.back()
        page = wizard.page_target
        layers = struct.pack("<3I", 2, 14, 27)
        eagle = head_header(
            tmp_path / "eagle.gguf", "eagle3", kv_array("eagle3.target_layers", GGUF_U32, 3, layers)
        )
        page.tabs.setCurrentIndex(page.local_tab)
        page.add_local_file(str(eagle))
        qtbot.waitUntil(lambda: "not a target" in page.local_status.text(), timeout=10_000)
        assert "eagle.gguf" in page.local_status.text()
        assert page.selected_local() is None and not page.isComplete()
        shoot(page, "head_on_this_computer")
    finally:
        wizard.reject()


def test_an_assistant_in_its_target_s_repository_is_the_catalog_draft(
    qtbot,  # type: ignore[no-untyped-def]
    fake_hub: FakeHub,
    tmp_path: Path,
) -> None:
    """Gemma 4 repositories keep the assistant beside the target (``mtp-NAME.gguf``): the
    catalog names that file as the pair's draft, and the target's files stay the target's."""
    from app.models.catalog import CatalogPair
    from tests.ggufs import spm_tokens, write_gguf

    target = write_gguf(tmp_path / "t.gguf", arch="gemma4", tokens=spm_tokens(8)).read_bytes()
    assistant = head_header(tmp_path / "a.gguf").read_bytes()
    repo = "acme/Gem4-12B-GGUF"
    files = {"gem4-12B-Q4_0.gguf": target, "mtp-gem4-12B.gguf": assistant}
    fake_hub.add(FakeRepo(repo, files, downloads=3))
    pair_catalog = Catalog(
        (
            CatalogModel("gem4", repo, "gemma4", 12.0, "Q4_0", "Target."),
            CatalogModel(
                "gem4-assistant",
                repo,
                "gemma4",
                0.4,
                "Q8_0",
                "Its assistant.",
                draft_only=True,
                drafting="assistant",
                files=(CatalogFile("mtp-gem4-12B.gguf"),),
            ),
        ),
        (CatalogPair("gem4", "gem4-assistant"),),
    )
    wizard = PairWizard(Library(), pair_catalog, hardware=HARDWARE, models_root=tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        wizard.next()
        wizard.page_target.catalog_list.setCurrentRow(0)
        wizard.next()
        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        assert page.table.rowCount() == 1 and page.table.item(0, 1).text() == "gem4-12B-Q4_0.gguf"
        wizard.next()
        page = wizard.page_draft
        assert not page.mtp.isVisible()  # a plain target: its assistant is a draft file
        qtbot.waitUntil(lambda: not page.busy and bool(page.options), timeout=10_000)
        first = page.options[0]
        assert (first.candidate.source, first.candidate.file) == (
            "catalog pair",
            "mtp-gem4-12B.gguf",
        )
        assert first.group is not None and first.group.first.path == "mtp-gem4-12B.gguf"
        assert first.facts is not None and first.facts.drafting.name == "assistant draft for gemma4"
        assert first.compatible and [g.first.path for g in first.groups] == ["mtp-gem4-12B.gguf"]
    finally:
        wizard.reject()


def test_the_shipped_catalog_shows_self_drafting_targets_as_unchecked(
    qtbot,  # type: ignore[no-untyped-def]
    fake_hub: FakeHub,
    tmp_path: Path,
) -> None:
    from app.engine.llama.hardware import Device, Hardware

    gib = 1 << 30
    gpu = Device("CUDA0", "GPU 0", "GPU", 22 * gib, 24 * gib)
    wizard = PairWizard(
        Library(),
        Catalog.load(),
        hardware=Hardware("CUDA", (gpu,), 64 * gib, 48 * gib, 16),
        models_root=tmp_path / "models",
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        wizard.next()
        page = wizard.page_target
        texts = [page.catalog_list.item(i).text() for i in range(page.catalog_list.count())]
        own = [t for t in texts if "drafts for itself (MTP)" in t]
        assert any(t.startswith("unsloth/Qwen3.6-27B-MTP-GGUF") for t in own)
        assert any(t.startswith("unsloth/Qwen3.6-35B-A3B-MTP-GGUF") for t in own)
        assert any(t.startswith("unsloth/gemma-4-12B-it-qat-GGUF") for t in texts)
        assert all(
            "unchecked: not yet confirmed against the Hub with check-pair" in t for t in texts
        )
        page.catalog_list.scrollToItem(page.catalog_list.item(len(texts) // 2))
        shoot(page, "catalog_targets")
    finally:
        wizard.reject()
