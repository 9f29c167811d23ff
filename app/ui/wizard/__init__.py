"""The pair-selection wizard: hardware → target → quantization → draft → review →
download → verification → finish.

``wizard.PairWizard`` holds one page per module (``page_*``); the pages share ``common`` and
the Qt-free selection model ``pair_selection`` (with ``words``). This package imports nothing
itself, so that the selection model loads without Qt.
"""
