"""One describer for pydantic validation errors (cards, GPU files): ``field.path: what is wrong; allowed: ...``.

The allowed range comes from the model's own JSON schema, so a cap added to a field shows up in its message.
User input is never printed whole: values are clipped to about 60 characters.
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ValidationError

from kvplan.errors import SchemaErrors, clip, clip_text
from kvplan.model.card import ModelCard


def card_from_dict(data: dict, *, origin: str = "card") -> ModelCard:
    """Validate a plain dict as a ModelCard; schema errors become a one-line KvplanError naming the field (a
    SchemaErrors: its ``problems`` are every error pydantic found, one line each)."""
    try:
        return ModelCard.model_validate(data)
    except ValidationError as exc:
        raise SchemaErrors(origin, describe_validation_errors(exc, ModelCard)) from None


def describe_validation_error(exc: ValidationError, model_cls: type[BaseModel]) -> str:
    """The first schema error as one line: 'field.path: message (got VALUE); allowed: ...'."""
    return _describe(exc.errors(include_url=False)[0], model_cls)


def describe_validation_errors(exc: ValidationError, model_cls: type[BaseModel]) -> list[str]:
    """Every schema error, one line each (as ``describe_validation_error``), in pydantic's order."""
    return list(dict.fromkeys(_describe(err, model_cls) for err in exc.errors(include_url=False)))


def _describe(err: dict, model_cls: type[BaseModel]) -> str:
    path = _without_union_tags(model_cls, tuple(err["loc"]))
    loc = ".".join(_part(p) for p in path)
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown field; allowed fields: {', '.join(_fields_at(model_cls, path[:-1]))}"
    if err["type"] == "missing":
        return f"{loc}: required field is missing"
    if err["type"] in ("value_error", "assertion_error"):  # our validators start their message with the field
        return f"{loc}.{msg}" if loc else msg
    got = f" (got {clip(err['input'])})" if "input" in err and loc else ""
    allowed = _allowed(_schema_at(model_cls, path))
    if err["type"] in _NUMBER_TYPES and allowed.startswith("a number"):  # int | float: pydantic names its first member
        msg = "Input should be a number"
    return (f"{loc}: " if loc else "") + f"{msg}{got}" + (f"; allowed: {allowed}" if allowed else "")


_NUMBER_TYPES = frozenset({"int_type", "float_type", "int_parsing", "float_parsing", "int_from_float"})


def _part(p: object) -> str:
    return clip_text(p, 60) if isinstance(p, str) else clip(p)


@functools.lru_cache(maxsize=None)
def _schema(model_cls: type[BaseModel]) -> dict:
    return model_cls.model_json_schema()


def _resolve(root: dict, node: dict) -> dict:
    """Follow $ref and unwrap ``X | None`` to X."""
    if "$ref" in node:
        node = root.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
    options = [n for n in node.get("anyOf", ()) if n.get("type") != "null"]
    if len(options) == 1:
        return _resolve(root, options[0])
    return node


def _schema_at(model_cls: type[BaseModel], path: tuple) -> dict:
    root = _schema(model_cls)
    node = root
    for part in path:
        node = _resolve(root, node)
        if isinstance(part, int) and "items" in node:
            node = node["items"]
        elif isinstance(part, str) and part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            return {}
    return _resolve(root, node)


def _without_union_tags(model_cls: type[BaseModel], path: tuple) -> tuple:
    """The path the user wrote: pydantic names the member of a union that failed ('peak_flops.fp32.int')."""
    root = _schema(model_cls)
    node, out = root, []
    for part in path:
        node = _resolve(root, node)
        if isinstance(part, str) and "anyOf" in node and part not in node.get("properties", {}):
            continue
        out.append(part)
        if isinstance(part, int) and "items" in node:
            node = node["items"]
        elif isinstance(part, str) and part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            node = {}
    return tuple(out)


def _fields_at(model_cls: type[BaseModel], path: tuple) -> list[str]:
    return list(_schema_at(model_cls, path).get("properties", {}))


def _allowed(node: dict) -> str:
    """What the schema allows, in words: 'an integer 1..10000', 'true or false', 'a number > 0', 'rope, alibi'."""
    if "enum" in node:
        return ", ".join(_word(v) for v in node["enum"])
    if "const" in node:
        return _word(node["const"])
    kind = node.get("type")
    if kind is None and node.get("anyOf") and all(o.get("type") in ("integer", "number") for o in node["anyOf"]):
        kind, node = "number", _bounds(node)  # int | float: pydantic keeps its bounds as gt, le
    if kind in ("integer", "number"):
        return _range(node, "an integer" if kind == "integer" else "a number")
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        return _string(node)
    if kind == "array":
        return "a list"
    if kind == "object":
        return "a mapping"
    return ""


def _range(node: dict, noun: str) -> str:
    lo, hi = node.get("minimum"), node.get("maximum")
    if "exclusiveMinimum" in node:
        lo = node["exclusiveMinimum"] + 1 if noun == "an integer" else None
        if lo is None:
            return f"{noun} > {node['exclusiveMinimum']}" + (f", at most {hi:,}" if hi is not None else "")
    if lo is not None and hi is not None:
        return f"{noun} {lo}..{hi}"
    if lo is not None:
        return f"{noun} >= {lo}"
    return f"{noun} <= {hi}" if hi is not None else noun


def _word(value: object) -> str:
    """A schema value as a card writes it: true, false, null, rope."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _bounds(node: dict) -> dict:
    """pydantic's gt/ge/lt/le on a union as JSON-schema bounds; whole floats as integers (1e21: 1,000,...,000)."""
    names = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
    return {names[k]: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in node.items() if k in names}


def _string(node: dict) -> str:
    lo, hi = node.get("minLength"), node.get("maxLength")
    if hi is not None:
        text = f"a string of {lo}..{hi} characters" if lo else f"a string of at most {hi} characters"
    else:
        text = "a non-empty string" if lo == 1 else f"a string of at least {lo} characters" if lo else "a string"
    return text + (f" matching {node['pattern']}" if "pattern" in node else "")
