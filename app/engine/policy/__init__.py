"""How the engine decides what to draft and when to stop: pass costs by size and depth
(``pass_cost``), the cost model and break-even (``costs``), the prompt-lookup gate
(``lookup_gate``), the draft's confidence calibration (``calibration``), what the guard
measures and records of a pause (``guard``), and the controller that picks the draft length,
pauses drafting and probes again (``controller``)."""
