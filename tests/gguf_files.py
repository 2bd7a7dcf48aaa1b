"""Small GGUF files for the tests, written with gguf-py's GGUFWriter (llama.cpp's own writer); no downloads.

``write_gguf`` writes the metadata and a tensor table. Tensor data is not written: the file is extended to its full
length as a sparse file (no disk blocks), which GGUFReader maps without reading, so a table as large as a published
8B model's costs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

# (block elements, bytes per block) of the GGML types the tests use (ggml-common.h)
TYPES = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_K": (256, 144),
         "Q5_K": (256, 176), "Q6_K": (256, 210)}


def write_gguf(path: Path, arch: str, kv: dict, tensors: list[tuple[str, tuple[int, ...], str]] = (),
               split_max_tensors: int = 0) -> Path:
    """A GGUF of ``arch`` with ``kv`` (keys without the ``<arch>.`` prefix get it) and ``tensors`` (name, ne fastest
    first, GGML type name)."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter

    w = GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    for key, value in kv.items():
        full = key if key.startswith(("general.", "tokenizer.", "adapter.")) else f"{arch}.{key}"
        if isinstance(value, bool):
            w.add_bool(full, value)
        elif isinstance(value, int):
            w.add_uint32(full, value)
        elif isinstance(value, float):
            w.add_float32(full, value)
        elif isinstance(value, str):
            w.add_string(full, value)
        else:
            w.add_array(full, list(value))
    total = 0
    for name, ne, type_name in tensors:
        blck, size = TYPES[type_name]
        row = ne[0] * size // blck
        rows = 1
        for n in ne[1:]:
            rows *= n
        w.add_tensor_info(name, (*reversed(ne[1:]), row), np.dtype(np.uint8), row * rows,
                          raw_dtype=GGMLQuantizationType[type_name])
        total += -(-(row * rows) // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    paths = sorted(path.parent.glob(f"{path.stem}*.gguf")) if split_max_tensors else [path]
    if not split_max_tensors:
        size = path.stat().st_size
        os.truncate(path, -(-size // 32) * 32 + total)  # sparse: the data section's length, no data
    return paths[0]
