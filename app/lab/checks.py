"""The checks of values the lab reads from servers, by the names ``remote`` and
``remote_chat`` import them; they live, with the schemas declared with them, in
``app.files.values``."""

from __future__ import annotations

from app.files.values import MAX_COUNT, BadValue, kind, loads, number, unicode, whole

__all__ = ["MAX_COUNT", "BadValue", "kind", "loads", "number", "unicode", "whole"]
