"""Finding and loading model cards: bundled ones by name, a user's own by path. Errors are one line each."""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import IO, Iterator

import yaml
from pydantic import ValidationError

from kvplan.model.card import ModelCard
from kvplan.errors import KvplanError


def cards_dir() -> Path:
    """The bundled cards: ``kvplan/model_cards`` in a wheel, top-level ``model_cards/`` in a source checkout."""
    packaged = Path(str(resources.files("kvplan"))) / "model_cards"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "model_cards"


def bundled_names() -> list[str]:
    return sorted(p.stem for p in cards_dir().glob("*.yaml"))


def load_card(name_or_path: str | Path) -> ModelCard:
    """A bundled card by name (``llama-2-7b``) or any card by path (``./my-card.yaml``)."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return load_card_file(path)
    bundled = cards_dir() / f"{text}.yaml"
    if bundled.is_file():
        return load_card_file(bundled)
    close = difflib.get_close_matches(text, bundled_names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KvplanError(f"unknown model {text!r}{hint} (`kvplan cards list` shows all; or pass a path to a .yaml card)")


def resolve_card(model: str | None, hf_config: str | None) -> ModelCard:
    """The card a command runs on: ``--model NAME|PATH`` or ``--hf-config PATH`` (exactly one of them)."""
    if (model is None) == (hf_config is None):
        raise KvplanError("give exactly one of --model NAME|PATH and --hf-config PATH")
    if hf_config is not None:
        from kvplan.model.hf.config import card_from_hf_config

        return card_from_hf_config(hf_config)
    return load_card(model)


def validate_cards(paths: list[str]) -> list[tuple[str, str | None]]:
    """(path, None) for each valid card, (path, one-line problem) for each invalid one."""
    out: list[tuple[str, str | None]] = []
    for path in paths:
        try:
            load_card(path)
            out.append((path, None))
        except KvplanError as exc:
            out.append((path, str(exc)))
    return out


def write_atomic(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write via a temporary file in the same folder and rename it: never a half-written file."""
    if exclusive and (path.exists() or path.is_symlink()):
        raise KvplanError(f"{path}: exists; pass --force to overwrite it")
    with open_atomic(path) as f:
        f.write(text)


@contextmanager
def open_atomic(path: str | Path, *, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file to stream into; it becomes ``path`` only when the block ends without an error (Ctrl-C
    included), so a reader never sees a partial file. An unwritable folder is a KvplanError naming ``path``."""
    import os
    import tempfile

    path = Path(path)
    if path.is_dir():
        raise KvplanError(f"{path}: is a folder; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise KvplanError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
        os.chmod(tmp, _mode_for(path))
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise KvplanError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        os.unlink(tmp)
        raise


def _mode_for(path: Path) -> int:
    """An existing file's permissions, else what a plain open() would give (0o666 less the umask)."""
    import os

    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def load_card_file(path: Path) -> ModelCard:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KvplanError(f"{path}: cannot read card: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(raw)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise KvplanError(f"{path}:{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise KvplanError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: a card is a YAML mapping of fields (name, num_layers, ...), got {type(data).__name__}")
    return card_from_dict(data, origin=str(path))


def card_from_dict(data: dict, *, origin: str = "card") -> ModelCard:
    """Validate a plain dict as a ModelCard; schema errors become a one-line KvplanError naming the field."""
    try:
        return ModelCard.model_validate(data)
    except ValidationError as exc:
        raise KvplanError(f"{origin}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first schema error as 'field.path: message; allowed: ...'."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        allowed = ", ".join(_allowed_fields(err["loc"]))
        return f"{loc}: unknown field; allowed fields: {allowed}"
    if err["type"] == "missing":
        return f"{loc}: required field is missing"
    if err["type"] == "value_error":  # our model validators start their message with the field's name
        return f"{loc}.{msg}" if loc else msg
    if err["type"] == "literal_error":
        return f"{loc}: {msg} (got {err['input']!r})"
    if "input" in err and loc:
        return f"{loc}: {msg} (got {err['input']!r})"
    return f"{loc}: {msg}" if loc else msg


def _allowed_fields(loc: tuple) -> list[str]:
    model: type = ModelCard
    for part in loc[:-1]:
        annotation = model.model_fields[part].annotation
        model = next(a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields"))
    return list(model.model_fields)
