"""`kvplan check`: the memory and capacity regression gate (config, budgets, baseline, CI outputs)."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.units import parse_size


@pytest.mark.parametrize("text, expected", [
    (1024, 1024), ("1024", 1024), ("40 GiB", 40 * 2**30), ("80GB", 80 * 10**9), ("512MiB", 512 * 2**20),
    ("1.5 KiB", 1536), ("2 kB", 2000), ("3 tib", 3 * 2**40), ("0", 0),
])
def test_parse_size(text, expected):
    assert parse_size("max_kv_bytes", text) == expected


@pytest.mark.parametrize("text", ["1.0001 KiB", "-3", "40 GiBs", "abc", True, 1.5, "", -1, "1.5 B"])
def test_parse_size_rejects(text):
    with pytest.raises(KvplanError, match=r"^max_kv_bytes: "):
        parse_size("max_kv_bytes", text)
