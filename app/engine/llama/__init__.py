"""llama.cpp itself: the typed bindings, the extension functions, the process-wide runtime,
the machine it sees, the quantizer and the weight-repacking probe."""
