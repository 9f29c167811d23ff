"""Stored-file primitives: bounded reads, atomic writes, the user folders."""
