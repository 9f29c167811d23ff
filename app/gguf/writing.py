"""Writing a GGUF file out with the ``gguf`` package: the one order its writer needs."""

from __future__ import annotations

from collections.abc import Mapping

import gguf
import numpy as np


def write_out(writer: gguf.GGUFWriter, tensors: Mapping[str, np.ndarray]) -> None:
    """Add ``tensors`` after every field added so far, write the file and close it."""
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
