"""GGUF files in: the metadata llama.cpp sizes its memory from, and the tensor table (type and bytes of every tensor).

Read with the ``gguf`` package (llama.cpp's own reader, ``gguf-py``; the optional extra ``kvplan[gguf]``), imported
only here and only when a GGUF is given: a bundled card never reaches it. ``load_gguf(path)`` reads one file or every
part of a split GGUF (``NAME-00001-of-0000N.gguf``, keys ``split.no``/``split.count``), ``LlamaHparams`` holds the
per-layer facts llama.cpp's ``llama_hparams`` holds (``src/llama-hparams.h``, ``llama-model.cpp`` ``load_hparams``),
and ``card_from_gguf`` turns the file into a kvplan card for the engines that take a card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kvplan.errors import KvplanError, clip
from kvplan.model.card import ModelCard
from kvplan.model.llama_hparams import LlamaHparams, hparams_from_metadata

SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_SKIP = ("tokenizer.ggml.",)  # vocabularies and merges: read for their length only


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor-info entry: the name, the GGML type, the shape (ne, fastest first), elements and exact bytes
    (``ggml_nbytes``: type_size x elements / block size)."""

    name: str
    type_name: str  # GGML type name as gguf-py spells it (F32, Q4_K, ...)
    shape: tuple[int, ...]
    n_elements: int
    nbytes: int

    @property
    def layer(self) -> int | None:
        """The block index of a ``blk.N.`` tensor; None for token_embd, output, output_norm, rope_freqs..."""
        m = re.match(r"blk\.(\d+)\.", self.name)
        return int(m.group(1)) if m else None


@dataclass(frozen=True)
class GGUFModel:
    """A GGUF model: its files, metadata (tokenizer arrays reduced to their lengths) and tensor table."""

    path: str
    files: tuple[str, ...]
    metadata: dict
    tensors: tuple[GGUFTensor, ...]
    file_bytes: int

    @property
    def arch(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def hparams(self) -> LlamaHparams:
        return hparams_from_metadata(self.metadata, self.tensors_by_name(), source=self.path)

    def tensors_by_name(self) -> dict[str, GGUFTensor]:
        return {t.name: t for t in self.tensors}

    @property
    def weight_bytes(self) -> int:
        """llama.cpp's "model size": the sum of ggml_nbytes over the tensors (llama-model-loader.cpp n_bytes)."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def params(self) -> int:
        return sum(t.n_elements for t in self.tensors)


def split_parts(path: Path) -> list[Path]:
    """Every part of a split GGUF named like ``path`` (the path itself when it is not split); a missing part is an
    error naming it."""
    m = SPLIT.match(path.name)
    if not m:
        return [path]
    count = int(m.group("count"))
    parts = [path.with_name(f"{m.group('stem')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise KvplanError(f"--gguf: split GGUF {clip(path.name)} lacks part(s) {', '.join(missing[:3])} beside it")
    return parts


def _reader(path: Path):
    try:
        import gguf  # noqa: F401 - llama.cpp's reader; only when a GGUF is given
        from gguf import GGUFReader
    except ImportError as e:  # pragma: no cover - exercised where the extra is missing
        raise KvplanError("--gguf: reading GGUF files needs the gguf package: pip install 'kvplan[gguf]'") from e
    try:
        return GGUFReader(str(path), "r")
    except (ValueError, OSError, IndexError, KeyError) as e:
        raise KvplanError(f"--gguf: {clip(str(path))} is not a readable GGUF file ({type(e).__name__})") from e


def _value(field):
    """A field's value: scalars as Python values, arrays as lists (tokenizer arrays: their length only)."""
    from gguf import GGUFValueType

    if field.types and field.types[0] == GGUFValueType.ARRAY:
        if field.name.startswith(_SKIP):
            return len(field.data)
        return list(field.contents())
    return field.contents()


@lru_cache(maxsize=16)
def load_gguf(path: str) -> GGUFModel:
    """The GGUF at ``path`` (all parts of a split file): metadata and tensor table; KvplanError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise KvplanError(f"--gguf: no such file {clip(path)}")
    metadata: dict = {}
    tensors: list[GGUFTensor] = []
    parts = split_parts(p)
    for part in parts:
        r = _reader(part)
        for name, field in r.fields.items():
            if name.startswith("GGUF."):
                continue
            if name not in metadata:  # the first part carries the model's keys; later ones repeat split.*
                metadata[name] = _value(field)
        for t in r.tensors:
            tensors.append(GGUFTensor(t.name, t.tensor_type.name, tuple(int(x) for x in t.shape),
                                      int(t.n_elements), int(t.n_bytes)))
    if "general.architecture" not in metadata:
        raise KvplanError(f"--gguf: {clip(path)} has no general.architecture key; not a llama.cpp model GGUF")
    return GGUFModel(path=str(p), files=tuple(str(x) for x in parts), metadata=metadata, tensors=tuple(tensors),
                     file_bytes=sum(x.stat().st_size for x in parts))


GGUF_SOURCE = "gguf:"  # a card made from a GGUF names its file in ``source``: the llama.cpp runtimes read it again


def gguf_path_of(card: ModelCard) -> str | None:
    """The GGUF a card was made from (``card_from_gguf``), else None."""
    return card.source[len(GGUF_SOURCE):] if card.source.startswith(GGUF_SOURCE) else None



LORA_SUFFIXES = (".lora_a", ".lora_b")


def load_lora(path: str) -> tuple[tuple[str, int], ...]:
    """A LoRA adapter GGUF (convert_lora_to_gguf.py): each ``NAME.lora_a`` / ``NAME.lora_b`` tensor as (the base
    tensor NAME it modifies, its bytes). llama-adapter.cpp ``llama_adapter_lora_init_impl`` refuses a file whose
    ``general.type`` is not ``adapter`` or whose ``adapter.type`` is not ``lora``, and skips ``*_norm.weight``."""
    try:
        g = load_gguf(path)
    except KvplanError as e:  # load_gguf names --gguf, the model's flag
        raise KvplanError(f"--lora: {str(e).removeprefix('--gguf: ')}") from None
    md = g.metadata
    if md.get("general.type") != "adapter" or md.get("adapter.type") != "lora":
        raise KvplanError(f"--lora: {clip(path)} is not a LoRA adapter GGUF (general.type {md.get('general.type')!r}, "
                          f"adapter.type {md.get('adapter.type')!r}; llama.cpp expects adapter / lora)")
    out = []
    for t in g.tensors:
        if t.name.endswith("_norm.weight"):
            continue
        if not t.name.endswith(LORA_SUFFIXES):
            raise KvplanError(f"--lora: {clip(path)}: tensor {t.name!r} has unexpected suffix (llama.cpp refuses it)")
        out.append((t.name[: -len(".lora_a")], t.nbytes))
    return tuple(out)
