"""Where SpecDeck keeps its files: platformdirs locations, never the install folder.

Each can be redirected by an environment variable (tests, portable installs, screenshots).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import platformdirs

APP_DIR_NAME = "specdeck"


def _resolve(env: str, default: str) -> Path:
    override = os.environ.get(env)
    root = Path(override) if override else Path(default)
    # Read-only or full: the app still starts, and each save says why it cannot.
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
    return root


def config_dir() -> Path:
    """Settings (JSON)."""
    return _resolve("SPECDECK_CONFIG_DIR", platformdirs.user_config_dir(APP_DIR_NAME))


def data_dir() -> Path:
    """Conversations, the model library and downloaded models."""
    return _resolve("SPECDECK_DATA_DIR", platformdirs.user_data_dir(APP_DIR_NAME))


def cache_dir() -> Path:
    """Verdicts and builds that can be made again (the repacking probe, the reference build)."""
    return _resolve("SPECDECK_CACHE_DIR", platformdirs.user_cache_dir(APP_DIR_NAME))


def model_cache_dir() -> Path:
    """PyPI-shipped test/demo models and the pairs derived from them."""
    default = os.path.join(platformdirs.user_cache_dir(APP_DIR_NAME), "models")
    return _resolve("SPECDECK_MODEL_CACHE", default)
