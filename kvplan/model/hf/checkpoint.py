"""Hub ids, and what a Hub checkpoint holds, read from its safetensors headers and index, never from its weights.

A safetensors file is an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and
``data_offsets`` into the byte buffer after the header), then the buffer
(https://huggingface.co/docs/safetensors/index#format); a tensor's stored bytes are ``end - start`` of its offsets.
A sharded checkpoint has ``model.safetensors.index.json`` with ``metadata.total_size`` (the bytes of all tensors)
and a ``weight_map`` from tensor name to shard.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# huggingface_hub's repo id rules (validate_repo_id): [\w.-], at most 96 characters a part; a revision after "@"
HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95})(?:@(?P<revision>[\w./-]{1,255}))?")


def parse_hub_id(text: str) -> tuple[str, str | None] | None:
    """(repo, revision) of ``ORG/NAME`` or ``ORG/NAME@REVISION``; None for anything else."""
    m = HUB_ID.fullmatch(text)
    return (m["repo"], m["revision"]) if m else None


@dataclass(frozen=True)
class Tensor:
    """One tensor of the checkpoint: its name, safetensors dtype (BF16, F32, F8_E4M3, I32, ...), elements, bytes."""

    name: str
    dtype: str
    numel: int
    nbytes: int


@dataclass(frozen=True)
class Checkpoint:
    """A repository's safetensors checkpoint at one commit."""

    repo: str
    commit: str
    index_total_bytes: int | None  # model.safetensors.index.json metadata.total_size; None: no index
    tensors: tuple[Tensor, ...]  # from the shards' headers; empty when they were not read
    files: int  # safetensors files

    @property
    def header_bytes(self) -> int | None:
        """The sum of the tensors' stored bytes, from the headers; None when they were not read."""
        return sum(t.nbytes for t in self.tensors) if self.tensors else None

    @property
    def total_bytes(self) -> int | None:
        """The checkpoint's bytes: the headers' sum where read (exact), else the index's total_size."""
        return self.header_bytes if self.tensors else self.index_total_bytes

    def to_json(self) -> str:
        return json.dumps({"repo": self.repo, "commit": self.commit, "index_total_bytes": self.index_total_bytes,
                           "files": self.files, "tensors": [[t.name, t.dtype, t.numel, t.nbytes]
                                                            for t in self.tensors]})

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        d = json.loads(text)
        return cls(d["repo"], d["commit"], d["index_total_bytes"], tuple(Tensor(*t) for t in d["tensors"]),
                   d["files"])
