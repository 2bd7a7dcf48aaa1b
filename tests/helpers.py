"""Assertions and small tools several test files share."""

import json
import os
import re
import subprocess
import sys


def one_line_error(cli, *args) -> str:
    """Run the CLI, expect exit 2 with exactly one 'error: ...' line on stderr and no traceback; return that line."""
    code, out, err = cli(*args)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out + err, err
    return lines[0]


def os_reason(code: int) -> str:
    """A regex of the system's words for errno ``code`` as kvplan prints them, first letter lower-cased (the words
    are the C library's, 'No such file or directory' on glibc, so tests ask the system rather than spell them)."""
    text = os.strerror(code)
    return re.escape(text[:1].lower() + text[1:])


def kvplan_run(*args: str, before: str = "") -> subprocess.CompletedProcess:
    """``kvplan ARGS`` in a fresh interpreter, through main() as the console script runs it."""
    code = f"import sys\n{before}\nsys.argv = ['kvplan', *{list(args)!r}]\nfrom kvplan.cli.app import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def fields_set(card) -> dict:
    """model_fields_set of a card and of every nested block."""
    out = {"": set(card.model_fields_set)}
    for name in type(card).model_fields:
        value = getattr(card, name)
        if hasattr(value, "model_fields_set"):
            out |= {f"{name}.{k}": v for k, v in fields_set(value).items()}
    return out


def tamper_json(path, keys: tuple[str, ...], **fields) -> None:
    """Update the object at ``keys`` inside the JSON file ``path`` with ``fields`` (a validated-cache entry, so that
    what a loader returns shows whether it used the cache)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    entry = data
    for key in keys:
        entry = entry[key]
    entry.update(fields)
    path.write_text(json.dumps(data), encoding="utf-8")


# the default tier checks a few cards of every kind; the slow tier (python -m pytest --tier all) checks every card
DEFAULT_TIER_CARDS = ("llama-2-7b", "gemma-2-9b", "gemma-3-1b", "deepseek-v2-lite", "mixtral-8x7b", "t5-base",
                      "bert-base-uncased", "jamba-1.5-mini", "qwen3-next-80b-a3b", "mamba-codestral-7b", "gpt2")


def tiered(names):
    """pytest params of ``names``: those in DEFAULT_TIER_CARDS in the default tier, the rest marked slow."""
    import pytest

    return [name if name in DEFAULT_TIER_CARDS else pytest.param(name, marks=pytest.mark.slow) for name in names]
