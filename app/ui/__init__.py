"""The desktop app (PySide6): widgets, models and dialogs. Imports core, never the reverse."""
