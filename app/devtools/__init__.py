"""Developer tools the installer leaves out: the llama.cpp reference build, the host-cost
benchmark and the window's screenshots."""
