"""A local stand-in for the Hugging Face Hub's file endpoints, for tests that must never touch the real Hub.

It serves ``HEAD``/``GET /ORG/NAME/resolve/REVISION/FILE`` with the headers huggingface_hub reads (``X-Repo-Commit``,
``ETag``, ``Content-Length``, ``Accept-Ranges``), ranged reads (``206`` with ``Content-Range``), and the Hub's error
codes (``X-Error-Code: RepoNotFound | GatedRepo | RevisionNotFound | EntryNotFound``). It refuses a GET of a
``.safetensors`` file without a Range header (a weights download) and counts the bytes it sends per file, so a test
can prove that only headers were read. Safetensors files are built by hand from the format
(https://huggingface.co/docs/safetensors/index#format): 8-byte little-endian header length, JSON header, buffer.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from math import prod
from urllib.parse import unquote, urlparse

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4, "I8": 1, "U8": 1, "F8_E4M3": 1}


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file of zero-filled tensors: name -> (dtype, shape)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def tensor_bytes(tensors: dict[str, tuple[str, list[int]]]) -> int:
    """The bytes of the tensors' data, counted independently of any header."""
    return sum(prod(shape) * DTYPE_BYTES[dtype] for dtype, shape in tensors.values())


def sharded(tensors: dict[str, tuple[str, list[int]]], shards: int = 2) -> dict[str, bytes]:
    """model-0000i-of-0000n.safetensors files and their index (metadata.total_size and weight_map)."""
    names = list(tensors)
    files, weight_map = {}, {}
    step = -(-len(names) // shards)
    for i in range(shards):
        part = names[i * step:(i + 1) * step]
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        files[fname] = safetensors_bytes({n: tensors[n] for n in part})
        weight_map |= {n: fname for n in part}
    index = {"metadata": {"total_size": tensor_bytes(tensors)}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


@dataclass
class Repo:
    files: dict[str, bytes]
    revisions: dict[str, str]  # branch or tag -> commit
    gated: bool = False


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    sent: Counter = field(default_factory=Counter)  # file name -> bytes of body sent
    requests: list = field(default_factory=list)  # (method, path, range header)
    refused: list = field(default_factory=list)  # full GETs of weights files
    url: str = ""

    def add(self, repo: str, files: dict[str, bytes], *, gated: bool = False, tags: tuple[str, ...] = ()) -> str:
        """Serve ``files`` as ``repo`` at one commit (its main branch and ``tags``); returns the commit."""
        commit = hashlib.sha1(repo.encode() + b"".join(files[f] for f in sorted(files))).hexdigest()
        self.repos[repo] = Repo(files, {"main": commit, **{t: commit for t in tags}}, gated)
        return commit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: FakeHub

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _error(self, status: int, code: str) -> None:
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, body: bool) -> None:
        path = urlparse(self.path).path
        rng = self.headers.get("Range")
        self.hub.requests.append((self.command, path, rng))
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        repo = self.hub.repos.get(m[1]) if m else None
        if repo is None:
            return self._error(404, "RepoNotFound")
        if repo.gated and not self.headers.get("Authorization"):
            return self._error(401, "GatedRepo")
        revision, name = unquote(m[2]), unquote(m[3])
        commit = repo.revisions.get(revision) or (revision if revision in repo.revisions.values() else None)
        if commit is None:
            return self._error(404, "RevisionNotFound")
        if name not in repo.files:
            return self._error(404, "EntryNotFound")
        data = repo.files[name]
        if body and name.endswith(".safetensors") and not rng:
            self.hub.refused.append(path)
            return self._error(403, "WeightsRefused")
        status, chunk, extra = 200, data, {}
        if rng:
            a, b = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip()).groups()
            start, end = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
            status, chunk = 206, data[start:end + 1]
            extra["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        self.send_response(status)
        for key, value in {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                           "Content-Length": str(len(chunk)), "Accept-Ranges": "bytes",
                           "Content-Type": "application/octet-stream", **extra}.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(chunk)
            self.hub.sent[name] += len(chunk)


def serve(hub: FakeHub) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start serving ``hub`` on 127.0.0.1 (a free port) in a daemon thread; ``hub.url`` is its endpoint."""
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, thread
