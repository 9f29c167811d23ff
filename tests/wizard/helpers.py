"""What the wizard tests share: the tiny catalog, the hardware they plan for, page screenshots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.llama.hardware import Hardware
from app.models.catalog import Catalog, CatalogModel, CatalogPair

if TYPE_CHECKING:  # only for the annotation: the Qt-free selection tests use these helpers too
    from PySide6.QtWidgets import QWizardPage

GIB = 1 << 30
TARGET, DRAFT, STRANGER = "acme/Tiny-1B-GGUF", "acme/Tiny-0.1B-GGUF", "other/Tiny-0.05B-GGUF"
HARDWARE = Hardware("CPU", (), 16 * GIB, 8 * GIB, 2)


def tiny_catalog() -> Catalog:
    return Catalog(
        (
            CatalogModel("tiny-1b", TARGET, "tiny", 1.0, "Q8_0", "A tiny test target."),
            CatalogModel("tiny-0.1b", DRAFT, "tiny", 0.1, "F32", "Its draft.", draft_only=True),
        ),
        (CatalogPair("tiny-1b", "tiny-0.1b"),),
    )


def shoot(page: QWizardPage, name: str) -> None:
    """Keep a PNG of the page when SPECDECK_SCREENSHOTS names a folder."""
    folder = os.environ.get("SPECDECK_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.window().grab().save(str(Path(folder) / f"wizard_{name}.png"))
