"""Reading user files safely: bounded size, UTF-8 only, bounded YAML/JSON (writing: ``kvplan.writes``).

Every failure is one line naming the file, ``PATH: line L, column C: what is wrong`` where a position is known,
raised as ``KvplanError``. The limits (documented in docs/errors.md):

- a YAML file (card, GPU file) is at most ``MAX_YAML_BYTES``, a JSON file (config.json) at most ``MAX_JSON_BYTES``;
- documents nest at most ``MAX_DEPTH`` levels;
- YAML uses at most ``MAX_ALIASES`` aliases and expands to at most ``MAX_NODES`` nodes (checked on the parser's
  events, before anything is built, so an alias bomb is refused at once);
- integers have at most ``MAX_INT_DIGITS`` digits; duplicate mapping keys and unknown tags are refused.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
import stat
from typing import Any

from kvplan.errors import KvplanError, clip, clip_text

MAX_YAML_BYTES = 1 << 20
MAX_JSON_BYTES = 4 << 20
MAX_DEPTH = 32
MAX_ALIASES = 100
MAX_NODES = 100_000
MAX_INT_DIGITS = 100


# ---- reading ----------------------------------------------------------------------------------------------------

def shown(path: str | os.PathLike) -> str:
    """A path as error messages print it: one line, at most 200 characters."""
    return clip_text(os.fspath(path))


def is_dir(path: str | os.PathLike) -> bool:
    """``Path.is_dir`` that answers False instead of raising (a 5,000-character name, a permission error)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_file(path: str | os.PathLike) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_text(path: str | os.PathLike, *, what: str = "file", limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes; KvplanError naming the file otherwise."""
    data, _ = _read_bytes(path, what, limit)
    if len(data) > limit:
        raise KvplanError(f"{shown(path)}: {what} has more than {limit:,} bytes; allowed: at most {limit >> 20} MiB")
    return _decode(data, shown(path), what)


def read_text_head(path: str | os.PathLike, *, what: str = "file", limit: int = MAX_JSON_BYTES
                   ) -> tuple[str, int | None]:
    """(the UTF-8 text of the first ``limit`` bytes of a regular file, cut at the last line break within them; the
    file's size when it is longer, else None): a server log whose start-up comes first and whose traffic lines may
    run to gigabytes. KvplanError naming the file as ``read_text``."""
    data, size = _read_bytes(path, what, limit)
    if len(data) <= limit:
        return _decode(data, shown(path), what), None
    data = data[:limit]
    end = data.rfind(b"\n")
    if end >= 0:
        data = data[:end + 1]
    else:  # one line longer than the limit: cut before a character its last bytes begin
        for i in range(1, min(4, len(data)) + 1):
            b = data[-i]
            if b & 0xC0 == 0xC0:  # a lead byte: its sequence is 2, 3 or 4 bytes long
                if (2 if b < 0xE0 else 3 if b < 0xF0 else 4) > i:
                    data = data[:-i]
                break
            if b < 0x80:
                break
    return _decode(data, shown(path), what), max(size, limit + 1)


def _read_bytes(path: str | os.PathLike, what: str, limit: int) -> tuple[bytes, int]:
    """(at most ``limit`` + 1 bytes of a regular file, its size); KvplanError naming the file."""
    name = shown(path)
    try:
        info = os.stat(path)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        if not stat.S_ISREG(info.st_mode):
            raise KvplanError(f"{name}: {kind}; allowed: a {what}{'' if what.endswith('file') else ' file'}")
        with open(path, "rb") as f:
            return f.read(limit + 1), os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise KvplanError(f"{name}: cannot read {what}: {_reason(exc)}") from None
    except KvplanError:
        raise
    except ValueError as exc:  # an embedded NUL character in the path
        raise KvplanError(f"{name}: cannot read {what}: {exc}") from None


def _decode(data: bytes, name: str, what: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data:
        raise KvplanError(f"{name}: {what} is UTF-16 or binary (NUL bytes); allowed: UTF-8 text")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"{name}: {what} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                          "allowed: UTF-8 text") from None


def _reason(exc: OSError) -> str:
    """'no such file or directory', 'permission denied': the system's words, lower-cased to follow a colon."""
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


# ---- YAML -------------------------------------------------------------------------------------------------------

# yaml is imported on first use: it costs some 9 ms of every run, and a run on a bundled card reads none
# (kvplan.model.cardcache).

class _Refused(Exception):
    """A document kvplan refuses (not a syntax error): printed without 'not valid YAML'. Made like yaml's
    MarkedYAMLError: (context, context_mark, problem, problem_mark)."""

    def __init__(self, context: str | None, context_mark: Any, problem: str, problem_mark: Any) -> None:
        super().__init__(problem)
        self.context, self.context_mark, self.problem, self.problem_mark = context, context_mark, problem, problem_mark


@lru_cache(maxsize=1)
def _loader() -> type:
    """libyaml's safe loader (pure-Python where libyaml is missing) that refuses duplicate keys and huge ints."""
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            if isinstance(node, yaml.MappingNode):
                _check_duplicates(self, node)
            return super().construct_mapping(node, deep=deep)

    Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    # YAML 1.2's exponent without a dot or a sign (6.7e13, 1e6) is a float, as JSON and YAML 1.2 read it; PyYAML
    # follows YAML 1.1, where it is a string (and a GPU file's `fp32: 6.7e13` was refused as "not a number")
    exponent = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", exponent, list("-+0123456789"))
    # a date or time is kept as written, a string (every kvplan field that holds one is text: price_date, posted):
    # PyYAML's timestamp constructor turned `price_date: 2026-11-01` into a datetime.date the schema refused, and
    # raised ValueError on `2026-13-45` (an internal error, exit 3)
    Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: str(node.value))
    Loader.add_constructor(None, _refuse_tag)  # a tag no safe constructor knows: !!python/object:..., !custom
    return Loader


def _check_duplicates(loader: Any, node: Any) -> None:
    lines: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in lines:
                raise _Refused(None, None, f"duplicate key {clip(key)} (first at line {lines[key]}); "
                               "allowed: each key once", key_node.start_mark)
            lines[key] = key_node.start_mark.line + 1
        except TypeError:  # an unhashable key: the base constructor names it
            continue


def _construct_int(loader: Any, node: Any) -> int:
    from yaml.constructor import SafeConstructor

    text = str(node.value)
    digits = sum(c.isdigit() for c in text)
    if digits > MAX_INT_DIGITS:
        raise _Refused(None, None, f"an integer of {digits} digits; allowed: at most {MAX_INT_DIGITS} digits",
                       node.start_mark)
    return SafeConstructor.construct_yaml_int(loader, node)


def _refuse_tag(loader: Any, node: Any) -> Any:
    tag = str(node.tag)
    if tag.startswith("tag:yaml.org,2002:"):
        tag = "!!" + tag.removeprefix("tag:yaml.org,2002:")
    raise _Refused(None, None, f"unsupported tag {clip(tag)}; allowed: plain YAML values (mappings, lists, "
                   "strings, numbers, true/false, null)", node.start_mark)


class _Budget:
    """Counts the nodes a YAML document expands to, from the parser's events, before anything is built."""

    def __init__(self) -> None:
        self.frames: list[list] = []  # [anchor, nodes so far] per open mapping/sequence
        self.anchors: dict[str, int] = {}
        self.aliases = 0

    def open(self, event: Any) -> None:
        if len(self.frames) >= MAX_DEPTH:
            raise _Refused(None, None, f"nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH}",
                           event.start_mark)
        self.frames.append([event.anchor, 1])

    def close(self, event: Any) -> None:
        anchor, nodes = self.frames.pop()
        self.add(anchor, nodes, event)

    def alias(self, event: Any) -> None:
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise _Refused(None, None, f"more than {MAX_ALIASES} aliases; allowed: at most {MAX_ALIASES}",
                           event.start_mark)
        if event.anchor not in self.anchors:
            raise _Refused(None, None, f"alias *{clip_text(event.anchor, 60)} names no complete anchor before it; "
                           "allowed: aliases of earlier, complete nodes", event.start_mark)
        self.add(None, self.anchors[event.anchor], event)

    def add(self, anchor: str | None, nodes: int, event: Any) -> None:
        if anchor is not None:
            self.anchors[anchor] = nodes
        if self.frames:
            self.frames[-1][1] += nodes
            nodes = self.frames[-1][1]
        if nodes > MAX_NODES:
            raise _Refused(None, None, f"expands to more than {MAX_NODES:,} nodes (aliases); "
                           f"allowed: at most {MAX_NODES:,}", event.start_mark)


def _prescan(text: str) -> None:
    """Depth, aliases and expanded size from the event stream: linear in the text, whatever the aliases do."""
    import yaml

    loader, budget = _loader()(text), _Budget()
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                budget.open(event)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                budget.close(event)
            elif isinstance(event, yaml.ScalarEvent):
                budget.add(event.anchor, 1, event)
            elif isinstance(event, yaml.AliasEvent):
                budget.alias(event)
    finally:
        loader.dispose()


def parse_yaml(text: str, origin: str) -> Any:
    """One YAML document from ``text``; ``origin`` (a path, shown) heads every error."""
    import yaml

    try:
        _prescan(text)
        loader = _loader()(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except (_Refused, yaml.MarkedYAMLError) as exc:
        raise KvplanError(_marked(origin, exc)) from None
    except yaml.YAMLError as exc:
        raise KvplanError(f"{origin}: not valid YAML: {_one_line(str(exc))}") from None
    except (RecursionError, MemoryError):
        raise KvplanError(f"{origin}: document too large or too deeply nested; allowed: at most {MAX_DEPTH} "
                          "levels") from None


def load_yaml(path: str | os.PathLike, *, what: str = "file") -> Any:
    """A YAML file (card, GPU file) read and parsed within the limits above."""
    return parse_yaml(read_text(path, what=what, limit=MAX_YAML_BYTES), shown(path))


def _marked(origin: str, exc: Any) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
    what = _one_line(exc.problem or exc.context or "invalid document")
    return f"{origin}:{where} {what}" if isinstance(exc, _Refused) else f"{origin}:{where} not valid YAML: {what}"


def _one_line(text: str) -> str:
    return clip_text(" ".join(str(text).split()), 200)


# ---- JSON -------------------------------------------------------------------------------------------------------

class _JsonRefused(Exception):
    pass


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonRefused(f"an integer of {len(text.lstrip('-'))} digits; allowed: at most {MAX_INT_DIGITS} digits")
    return int(text)


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _JsonRefused(f"duplicate key {clip(key)}; allowed: each key once")
        out[key] = value
    return out


def parse_json(text: str, origin: str) -> Any:
    """One JSON value from ``text``, nested at most ``MAX_DEPTH`` levels; ``origin`` heads every error."""
    try:
        data = json.loads(text, parse_int=_json_int, object_pairs_hook=_json_object)
    except _JsonRefused as exc:
        raise KvplanError(f"{origin}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise KvplanError(f"{origin}: line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise KvplanError(f"{origin}: nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH}") from None
    except ValueError as exc:
        raise KvplanError(f"{origin}: not valid JSON: {_one_line(str(exc))}") from None
    if nesting_depth(data) > MAX_DEPTH:
        raise KvplanError(f"{origin}: nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH}")
    return data


def load_json(path: str | os.PathLike, *, what: str = "file") -> Any:
    """A JSON file (config.json) read and parsed within the limits above."""
    return parse_json(read_text(path, what=what, limit=MAX_JSON_BYTES), shown(path))


def nesting_depth(data: Any) -> int:
    """Nesting depth of lists, tuples and dicts, without recursion; stops counting past ``MAX_DEPTH`` (so a cyclic
    structure, infinitely deep, ends at once)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, (dict, list, tuple)):
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


# ---- writing: kvplan/writes.py (atomic files and folders, streams into devices and FIFOs) --------------------

_WRITERS = ("check_writable", "open_atomic", "write_atomic", "write_folder_atomic")


def __getattr__(name: str):
    """``check_writable``, ``open_atomic``, ``write_atomic``, ``write_folder_atomic`` from kvplan.writes, loaded when
    first used: a run that only reads (a plain estimate) does not import the writers."""
    if name in _WRITERS:
        from kvplan import writes

        return getattr(writes, name)
    raise AttributeError(f"module 'kvplan.files' has no attribute {name!r}")
