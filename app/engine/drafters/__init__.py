"""The draft sources behind one small interface, like llama.cpp's ``common/speculative.cpp``:
what they share (``base``: the interface, the limits, the block, the context every drafter
drafts with), prompt lookup (``lookup``), drafting token by token from a model's rows
(``sampled``), the target's rows the heads read, kept by position (``row_ring``), and one
module per source: a draft model (``model``), the target's MTP heads or an assistant
(``mtp``), an EAGLE-3 head (``eagle3``), a block drafter (``dflash``), prompt lookup and a
model together (``combined``)."""
