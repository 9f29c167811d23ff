"""Developer tools the installer leaves out: the llama.cpp reference build."""
