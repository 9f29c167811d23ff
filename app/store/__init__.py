"""Stored state (no Qt): ``settings`` (the user settings, validated field by field),
``conversations`` (one JSON file per conversation), ``current_pair`` (where the current pair
lives), ``migrations`` (schema versions of the stored files and their upgrades) and
``pending_saves`` (saves not written yet, retried). Paths and atomic files are in ``app.files``."""
