"""The wizard with a catalog target that has a DFlash / DSpark sidecar: the target list and
the draft table name the method in words, the sidecar beside the target in its repository
(``dflash-NAME.gguf``, as ggml-org's conversions name it) is no target quantization, and the
shipped catalog's sidecars are shown unchecked.

Set SPECDECK_SCREENSHOTS=/some/dir to keep a PNG of every page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.test_models.synthetic_dflash import write_tiny_dflash_pair
from app.models.catalog import Catalog, CatalogFile, CatalogModel, CatalogPair
from app.models.library import Library
from app.ui.wizard.wizard import PairWizard
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.wizard.helpers import HARDWARE, shoot

REPO = "acme/Tiny-Block-GGUF"
CHECK_PAIR = "unchecked: not yet confirmed against the Hub with check-pair"


def block_catalog(variant: str, drafting: str) -> Catalog:
    return Catalog(
        (
            CatalogModel("tiny", REPO, "tiny", 1.0, "F32", "A tiny target."),
            CatalogModel(
                "tiny-head",
                REPO,
                "tiny",
                0.1,
                "F32",
                "Its block drafter.",
                confirmed="https://example.invalid/fake-hub",
                draft_only=True,
                drafting=drafting,
                files=(CatalogFile(f"{variant}-tiny.gguf"),),
            ),
        ),
        (CatalogPair("tiny", "tiny-head"),),
    )


@pytest.mark.parametrize(
    ("variant", "drafting", "words"),
    [
        ("dflash", "dflash", "DFlash block drafter"),
        ("dspark", "dspark", "DSpark block drafter"),
    ],
)
def test_a_catalog_sidecar_is_named_and_offered_as_the_target_s_draft(
    qtbot,  # type: ignore[no-untyped-def]
    fake_hub: FakeHub,
    tmp_path: Path,
    variant: str,
    drafting: str,
    words: str,
) -> None:
    target, head = write_tiny_dflash_pair(tmp_path, variant)
    files = {"tiny-F32.gguf": target.read_bytes(), f"{variant}-tiny.gguf": head.read_bytes()}
    fake_hub.add(FakeRepo(REPO, files, downloads=3))
    catalog = block_catalog(variant, drafting)
    wizard = PairWizard(Library(), catalog, hardware=HARDWARE, models_root=tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    wizard.page_hardware.ctx.setValue(512)
    try:
        wizard.next()
        page = wizard.page_target
        text = page.catalog_list.item(0).text()
        assert text.startswith(REPO) and f"{words} in the catalog" in text and CHECK_PAIR in text
        page.catalog_list.setCurrentRow(0)
        shoot(page, f"{variant}_1_target")
        wizard.next()

        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        quants = [page.table.item(r, 1).text() for r in range(page.table.rowCount())]
        assert quants == ["tiny-F32.gguf"]  # the sidecar is no quantization of the target
        wizard.next()

        page = wizard.page_draft
        qtbot.waitUntil(lambda: not page.busy and bool(page.options), timeout=10_000)
        first = page.options[0]
        assert (first.candidate.file, first.candidate.method) == (f"{variant}-tiny.gguf", words)
        assert first.facts is not None and first.facts.drafting.name.startswith(words)
        assert first.compatible, first.mismatch or first.error
        assert page.table.item(0, 3).text() == f"catalog pair · {words}"
        shoot(page, f"{variant}_3_draft")
    finally:
        wizard.reject()


def test_the_shipped_catalog_names_the_sidecars_of_its_targets(
    qtbot,  # type: ignore[no-untyped-def]
    fake_hub: FakeHub,
    tmp_path: Path,
) -> None:
    wizard = PairWizard(Library(), Catalog.load(), hardware=HARDWARE, models_root=tmp_path)
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        wizard.next()
        page = wizard.page_target
        texts = [page.catalog_list.item(i).text() for i in range(page.catalog_list.count())]
        named = {t.split("  ·  ")[0] for t in texts if "block drafter in the catalog" in t}
        assert named == {
            "bartowski/Qwen_Qwen3-8B-GGUF",
            "unsloth/Qwen3.5-9B-MTP-GGUF",
            "unsloth/Qwen3.6-27B-MTP-GGUF",
            "localweights/Qwen3.6-27B-MTP-IMAT-IQ4_XS-Q8nextn-GGUF",
            "unsloth/Qwen3.6-35B-A3B-MTP-GGUF",
            "localweights/Qwen3.6-35B-A3B-MTP-IQ4_XS-Q8nextn-GGUF",
        }
        qwen3 = next(t for t in texts if t.startswith("bartowski/Qwen_Qwen3-8B-GGUF"))
        assert "DFlash block drafter in the catalog · DSpark block drafter in the catalog" in qwen3
        assert all(CHECK_PAIR in t for t in texts)  # nothing is checked against the Hub yet
    finally:
        wizard.reject()
