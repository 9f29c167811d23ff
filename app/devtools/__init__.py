"""Developer tools the installer leaves out: llama.cpp's own programs built from the vendored
sources (``reference``), measuring tools (``hostcost``, ``depth_prompts``, ``sampling_placement``,
``latency_probe``, ``mtp_reference``, ``eagle3_reference``), probes of llama.cpp's drafting
interfaces (``mtp_probe``, ``assistant_probe``, ``eagle3_probe``), the long-edits prompt set
(``long_edits``), the window's screenshots (``screenshots``), the GPU check (``gpu_check``), the
tiny test models (``test_models``) and the import-circle finder (``import_circles``)."""
