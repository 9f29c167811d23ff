"""Stored state: settings, conversations, paths, atomic files (no Qt)."""
