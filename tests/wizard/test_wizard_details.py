"""Details of the pair wizard: the gated lock in search results, "To download" after a
partial download, "Download again" after a corrupt one, the context size capped at the trained
length, vocabulary mismatches in words, and `pull --offline` naming a later split part."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.models.catalog import Catalog, CatalogModel, CatalogPair
from app.models.hub import GGUFFile, QuantGroup
from app.models.library import Library, models_dir
from app.ui.wizard.pair_selection import still_to_download
from app.ui.wizard.wizard import PairWizard
from app.ui.wizard.words import mismatch_in_words
from app.workers.hub_messages import DownloadItem
from tests.ggufs import kv_u32, llama_kvs, raw_gguf, tensor_entry
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.wizard.helpers import DRAFT, HARDWARE, shoot, tiny_catalog


def wizard_on(qtbot, catalog: Catalog, tmp_path: Path, **kwargs: object) -> PairWizard:  # type: ignore[no-untyped-def]
    wizard = PairWizard(
        Library(), catalog, hardware=HARDWARE, models_root=tmp_path / "models", **kwargs
    )  # type: ignore[arg-type]
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.online is True, timeout=5_000)
    return wizard


def test_gated_lock_in_search_results(
    qtbot,
    populated_hub: FakeHub,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    wizard = wizard_on(qtbot, Catalog((), ()), tmp_path, token=False)
    try:
        wizard.next()
        page = wizard.page_target
        page.tabs.setCurrentIndex(1)
        page.query.setText("gguf")
        page._search()
        qtbot.waitUntil(lambda: page.results.count() == 4, timeout=10_000)
        rows = {
            page.results.item(i).text().split()[0]: page.results.item(i).text()
            for i in range(page.results.count())
        }
        assert "🔒 gated" in rows["acme/Gated-GGUF"]
        assert "🔒" not in rows["acme/Big-GGUF"]
        shoot(page, "search-gated-lock")
    finally:
        wizard.reject()


def test_to_download_subtracts_the_partial_file(tmp_path: Path) -> None:
    group = QuantGroup(
        "Q8_0",
        (
            GGUFFile("a-00001-of-00002.gguf", 1000, None),
            GGUFFile("a-00002-of-00002.gguf", 500, None),
        ),
    )
    item = DownloadItem("acme/A-GGUF", group)
    folder = tmp_path / "acme--A-GGUF"
    assert still_to_download(tmp_path, item) == 1500
    folder.mkdir()
    (folder / "a-00001-of-00002.gguf.part").write_bytes(bytes(400))
    assert still_to_download(tmp_path, item) == 1100
    (folder / "a-00001-of-00002.gguf").write_bytes(bytes(1000))  # finished
    assert still_to_download(tmp_path, item) == 500


def test_corrupt_download_offers_download_again(
    qtbot,
    tiny_hub: FakeHub,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    tiny_hub.repos[DRAFT].wrong_sha.add("tiny-0.1b-F32.gguf")
    wizard = wizard_on(qtbot, tiny_catalog(), tmp_path)
    try:
        # The hardware page's context size is beyond the models' trained 512 tokens.
        wizard.page_hardware.ctx.setValue(262_144)
        wizard.next()
        assert wizard.state.n_ctx == 262_144
        wizard.page_target.catalog_list.setCurrentRow(0)
        wizard.next()
        page = wizard.page_quant
        qtbot.waitUntil(page.isComplete, timeout=10_000)
        assert wizard.state.n_ctx == 512 and wizard.page_hardware.ctx.value() == 512
        assert "lowered from 262,144 to 512" in page.status.text()
        wizard.next()
        qtbot.waitUntil(wizard.page_draft.isComplete, timeout=10_000)
        wizard.next()
        review = wizard.page_review
        assert "lowered from 262,144 to 512" in review.summary.text()
        assert "fits" in review.summary.text()
        wizard.next()
        page = wizard.page_download
        qtbot.waitUntil(lambda: page.resume_button.isVisible(), timeout=20_000)
        assert page.resume_button.text() == "Download again"
        assert "sha256" in page.status.text()
        shoot(page, "download-again")
        gets = len(tiny_hub.requests_for("tiny-0.1b-F32.gguf", "GET"))
        page.resume_button.click()  # starts over: the corrupt file was deleted
        qtbot.waitUntil(
            lambda: len(tiny_hub.requests_for("tiny-0.1b-F32.gguf", "GET")) > gets, timeout=20_000
        )
        again = tiny_hub.requests_for("tiny-0.1b-F32.gguf", "GET")[gets:]
        assert all(not e.range or e.range.startswith("bytes=0-") for e in again)
        qtbot.waitUntil(lambda: page.resume_button.isVisible(), timeout=20_000)
    finally:
        wizard.reject()


def test_vocabulary_mismatch_in_words() -> None:
    token = mismatch_in_words("token 300: target 'a', draft 'b'")
    assert "different tokenizers" in token and "token 300" in token
    eos = mismatch_in_words("EOS token id: target 2, draft 151645")
    assert eos.startswith("the models use different tokens to mark the end") and "151645" in eos
    assert mismatch_in_words(None) == ""


def test_pull_offline_naming_the_second_split_part(
    fake_hub: FakeHub,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli.hub import register

    data = raw_gguf(
        llama_kvs() + [kv_u32("split.count", 2)], [tensor_entry("output_norm.weight", (64,))]
    )
    fake_hub.add(
        FakeRepo(
            "acme/Split-GGUF",
            {"m-Q8_0-00001-of-00002.gguf": data, "m-Q8_0-00002-of-00002.gguf": data},
        )
    )
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))

    def cli(*argv: str) -> int:
        args = parser.parse_args(list(argv))
        return int(args.func(args))

    assert cli("pull", "acme/Split-GGUF", "m-Q8_0-00001-of-00002.gguf") == 0
    first = capsys.readouterr().out.strip()
    before = len(fake_hub.log)
    assert cli("pull", "acme/Split-GGUF", "m-Q8_0-00002-of-00002.gguf", "--offline") == 0
    assert capsys.readouterr().out.strip() == first
    assert len(fake_hub.log) == before  # offline: not one request
    assert Path(first).parent == models_dir() / "acme--Split-GGUF"


def test_curated_targets_show_fit_smallest_sensible_first(
    qtbot,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    fake_hub: FakeHub,
) -> None:
    catalog = Catalog(
        (
            CatalogModel("big", "a/Big-32B-GGUF", "x", 32.8, "Q4_K_M"),
            CatalogModel("mid", "a/Mid-8B-GGUF", "x", 8.2, "Q4_K_M"),
            CatalogModel("small", "a/Small-1.7B-GGUF", "x", 1.7, "Q4_K_M"),
            CatalogModel("draft", "a/Draft-0.6B-GGUF", "x", 0.6, "Q8_0", draft_only=True),
        ),
        tuple(CatalogPair(t, "draft") for t in ("big", "mid", "small")),
    )
    wizard = wizard_on(qtbot, catalog, tmp_path)
    try:
        wizard.next()
        page = wizard.page_target
        texts = [page.catalog_list.item(i).text() for i in range(page.catalog_list.count())]
        assert [t.split()[0] for t in texts] == [
            "a/Small-1.7B-GGUF",
            "a/Mid-8B-GGUF",
            "a/Big-32B-GGUF",
        ]
        assert "fits on this computer" in texts[0]  # 8 GiB free of RAM
        assert "does not fit on this computer" in texts[2]
    finally:
        wizard.reject()


def test_slower_calibration_is_called_slower_and_needs_consent(  # type: ignore[no-untyped-def]
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.workers.hub_messages import Calibrated

    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "specdeck"))
    wizard = PairWizard(
        Library(), Catalog((), ()), hardware=HARDWARE, models_root=tmp_path / "models", offline=True
    )
    qtbot.addWidget(wizard)
    wizard.show()
    try:
        page = wizard.page_verify
        page._done_steps = ["Loading both models", "Target alone: 64 tokens"]
        # The measured numbers of the screenshot: a draft bigger than its target.
        page.show_calibration(
            Calibrated(0, 0.81, 4.1, 7.9, 0.52, 8, 3.2, ((4, 4.0), (8, 4.1)), noise=0.03)
        )
        text = page.status.text()
        assert "0.52× — 48 % slower" in text and "barely" not in text  # as the window writes it
        assert "not sure" in text and "within 2%" in text  # 4.0 vs 4.1 tok/s
        assert not page.activate.isChecked() and not wizard.state.activate
        assert not page.use_ngram.isHidden() and "Alternatives" in text
        page.activate.setChecked(True)  # the person consents
        assert wizard.state.activate
        page.show_calibration(
            Calibrated(0, 0.9, 12.0, 8.0, 1.5, 4, 1.0, ((4, 12.0), (8, 9.0)), noise=0.02)
        )
        assert (
            "50 % faster" in page.status.text() and "clearly the faster one" in page.status.text()
        )
        # A 25 % margin is no proof when two runs of the target alone differed by 20 %.
        page.show_calibration(
            Calibrated(0, 0.9, 12.0, 8.0, 1.5, 4, 1.0, ((4, 12.0), (8, 9.0)), noise=0.2)
        )
        assert "not sure" in page.status.text() and "differed by 20%" in page.status.text()
        assert page.activate.isChecked() and page.use_ngram.isHidden()
    finally:
        wizard.reject()
