"""The parts of one request's step loop that ``Engine.generate`` reads draft → verify →
accept → record through: the drafting side of the request (``drafting_turn``), judging a
block against the target's rows (``acceptance``), the accepted tokens into the answer
(``answer_writer``, over the UTF-8-safe ``textstream``), and the run's clock and summary
(``run_clock``)."""
