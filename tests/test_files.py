"""kvplan.files: reading user files within limits, one-line errors, and atomic, exclusive writes."""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import threading
import time

import pytest

from helpers import os_reason
from kvplan.errors import KvplanError, clip
from kvplan.files import (MAX_ALIASES, MAX_DEPTH, MAX_YAML_BYTES, load_json, load_yaml, parse_json, parse_yaml,
                          write_atomic)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and /sys")


def _yaml_error(text: str) -> str:
    with pytest.raises(KvplanError) as err:
        parse_yaml(text, "c.yaml")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_utf16_and_latin1_are_refused(tmp_path):
    (tmp_path / "u16.yaml").write_bytes("name: x\n".encode("utf-16"))
    (tmp_path / "latin.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(KvplanError, match=r"u16\.yaml: card is UTF-16 or binary .*allowed: UTF-8 text"):
        load_yaml(tmp_path / "u16.yaml", what="card")
    with pytest.raises(KvplanError, match=r"latin\.yaml: card is not UTF-8 \(byte 0xe9 at offset 9\)"):
        load_yaml(tmp_path / "latin.yaml", what="card")


def test_utf8_bom_is_accepted(tmp_path):
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert load_json(tmp_path / "bom.json") == {"a": 1}


def test_directory_symlink_loop_missing_and_long_names(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    cases = [(tmp_path, "a directory; allowed: a card file"),
             (loop, rf"loop\.yaml: cannot read card: {os_reason(errno.ELOOP)}$"),
             (tmp_path / "no.yaml", rf"no\.yaml: cannot read card: {os_reason(errno.ENOENT)}$"),
             (tmp_path / ("n" * 5000), rf"n\.\.\.n+: cannot read card: {os_reason(errno.ENAMETOOLONG)}$")]
    for path, needle in cases:
        with pytest.raises(KvplanError, match=needle) as err:
            load_yaml(path, what="card")
        assert len(str(err.value)) < 300


@linux_only
def test_unreadable_file_is_one_line():
    # chmod 000 does not stop root; /proc/self/mem is a regular file that no read at offset 0 succeeds on
    with pytest.raises(KvplanError, match=rf"^/proc/self/mem: cannot read config\.json: {os_reason(errno.EIO)}$"):
        load_json("/proc/self/mem", what="config.json")


def test_permission_denied_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "locked.yaml"
    path.write_text("a: 1\n")

    def denied(*args, **kwargs):  # what open() raises on a mode-000 file for anyone but root (tests run as root too)
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("kvplan.files.open", denied, raising=False)
    with pytest.raises(KvplanError, match="locked.yaml: cannot read card: permission denied"):
        load_yaml(path, what="card")


def test_big_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("a: 1\n" * (MAX_YAML_BYTES // 5 + 1))
    start = time.monotonic()
    with pytest.raises(KvplanError, match=r"big\.yaml: card has more than 1,048,576 bytes; allowed: at most 1 MiB"):
        load_yaml(path, what="card")
    assert time.monotonic() - start < 1


def test_duplicate_keys_name_key_and_lines():
    assert _yaml_error("a: 1\nb: 2\na: 3\n") == ("c.yaml: line 3, column 1: duplicate key 'a' (first at line 1); "
                                                "allowed: each key once")
    assert "duplicate key 'x'" in _yaml_error("moe: {x: 1, x: 2}\n")
    with pytest.raises(KvplanError, match=r"^c\.json: duplicate key 'a'; allowed: each key once$"):
        parse_json('{"a": 1, "a": 2}', "c.json")


def test_deep_nesting_is_refused_fast():
    start = time.monotonic()
    # flow nesting: refused by kvplan's depth limit or, first, by the YAML parser's own (PyYAML 6.0.4 stops at
    # 1,000 levels while reading ahead); either way one line naming the file and the place, exit 2, at once
    flow = _yaml_error("a: " + "[" * 100_000)
    assert flow.startswith("c.yaml: line 1, column ") and "\n" not in flow
    assert f"nested deeper than {MAX_DEPTH} levels" in _yaml_error("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    block = "".join(" " * i + f"k{i}:\n" for i in range(40)) + " " * 40 + "v\n"
    assert f"nested deeper than {MAX_DEPTH} levels" in _yaml_error(block)
    for depth in (MAX_DEPTH + 1, 5000, 100_000):
        with pytest.raises(KvplanError, match=f"c.json: nested deeper than {MAX_DEPTH} levels"):
            parse_json("[" * depth + "]" * depth, "c.json")
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "c.json") is not None
    assert time.monotonic() - start < 2


def test_alias_bomb_is_refused_before_expansion():
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    start = time.monotonic()
    assert "expands to more than 100,000 nodes" in _yaml_error(bomb)
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    assert f"more than {MAX_ALIASES} aliases" in _yaml_error(many)
    assert "names no complete anchor" in _yaml_error("a: &a [*a]\n")
    assert time.monotonic() - start < 1
    assert parse_yaml("a: &a [1, 2]\nb: *a\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_huge_integers_are_refused_with_their_size():
    assert _yaml_error("num_layers: " + "9" * 5000) == ("c.yaml: line 1, column 13: an integer of 5000 digits; "
                                                       "allowed: at most 100 digits")
    with pytest.raises(KvplanError, match="an integer of 5000 digits; allowed: at most 100 digits"):
        parse_json('{"n": ' + "9" * 5000 + "}", "c.json")
    assert clip(10 ** 5000) == "an integer of 5001 digits"


def test_syntax_errors_are_one_line_with_position():
    # what follows "not valid YAML/JSON: " is the parser's own wording: only kvplan's parts are asserted
    assert re.fullmatch(r"c\.yaml: line 2, column 2: not valid YAML: \S.*", _yaml_error("a: [1, 2\nb: 3\n"))
    with pytest.raises(KvplanError, match=r"^c\.json: line 1, column 8: not valid JSON: \S.*$"):
        parse_json('{"a": 1', "c.json")


def test_python_and_custom_tags_are_refused_by_name():
    allowed = "; allowed: plain YAML values (mappings, lists, strings, numbers, true/false, null)"
    assert _yaml_error("!!python/object:os.system x\n") == ("c.yaml: line 1, column 1: unsupported tag "
                                                             f"'!!python/object:os.system'{allowed}")
    assert _yaml_error("a: !custom {b: 1}\n") == f"c.yaml: line 1, column 4: unsupported tag '!custom'{allowed}"
    assert parse_yaml("a: !!str 1\nb: !!float 2\n", "ok.yaml") == {"a": "1", "b": 2.0}


# ---- write_atomic -----------------------------------------------------------------------------------------------

def _leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_new_file_gets_umask_mode_and_overwrite_keeps_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.yaml", "a\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.yaml").stat().st_mode) == 0o640
    target = tmp_path / "card.yaml"
    target.write_text("old\n")
    target.chmod(0o604)
    write_atomic(target, "new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o604 and target.read_text() == "new\n"


def test_exclusive_refuses_existing_and_dangling_symlink(tmp_path):
    (tmp_path / "x.yaml").write_text("keep\n")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    for name in ("x.yaml", "dangling.yaml"):
        with pytest.raises(KvplanError, match=f"{name}: exists; pass --force to overwrite it"):
            write_atomic(tmp_path / name, "new\n", exclusive=True)
    assert (tmp_path / "x.yaml").read_text() == "keep\n" and not (tmp_path / "gone.yaml").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("check_first", [True, False])
def test_exclusive_race_has_exactly_one_winner(tmp_path, monkeypatch, check_first):
    if not check_first:  # skip the friendly pre-check: the atomic create alone must decide
        monkeypatch.setattr("kvplan.files.os.path.lexists", lambda p: False)
    target, barrier, results = tmp_path / "race.yaml", threading.Barrier(6), []

    def writer(i: int) -> None:
        barrier.wait()
        try:
            write_atomic(target, f"writer {i}\n", exclusive=True)
            results.append(i)
        except KvplanError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if isinstance(r, int)]
    assert len(winners) == 1 and target.read_text() == f"writer {winners[0]}\n"
    assert sum("exists; pass --force" in str(r) for r in results) == 5
    assert _leftovers(tmp_path) == []


def test_missing_parent_directory_target_and_readonly_folder(tmp_path):
    with pytest.raises(KvplanError, match=r"out\.yaml: cannot write in .*nope: no such folder$"):
        write_atomic(tmp_path / "nope" / "out.yaml", "a\n")
    with pytest.raises(KvplanError, match="is a directory; allowed: a file path"):
        write_atomic(tmp_path, "a\n")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "x.yaml"
    elif os.path.isdir("/sys"):
        target = "/sys/kvplan-test.yaml"  # root may write anywhere but sysfs
    else:
        pytest.skip("running as root without /sys: no folder root cannot write")
    reasons = f"({os_reason(errno.EACCES)}|{os_reason(errno.EROFS)})"
    with pytest.raises(KvplanError, match=rf"\.yaml: cannot write in .*: {reasons}$"):
        write_atomic(target, "a\n")


def test_temp_file_removed_after_interrupt(tmp_path, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr("kvplan.files.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "x.yaml", "a\n")
    assert list(tmp_path.iterdir()) == []


def test_write_failure_is_one_line_and_cleans_up(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("kvplan.files.os.replace", full)
    with pytest.raises(KvplanError, match=r"x\.yaml: cannot write: no space left on device$"):
        write_atomic(tmp_path / "x.yaml", "a\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["2026-13-45", "2026-02-30", "2026-11-01", "2001-12-14t21:59:43.10-05:00"])
def test_a_yaml_date_stays_the_text_written(text):
    """PyYAML's timestamp constructor raised ValueError on an impossible date (an internal error, exit 3, from
    `cards validate`, --model x.yaml and --gpu-file) and made a valid one a datetime.date the schemas refuse."""
    from kvplan.files import parse_yaml

    assert parse_yaml(f"d: {text}\n", "x.yaml") == {"d": text}


def test_a_gpu_file_takes_an_unquoted_price_date(tmp_path):
    from kvplan.cost.hardware import load_gpu

    p = tmp_path / "gpus.yaml"
    p.write_text("gpus:\n  H100-SXM:\n    price_per_hour_usd: 2.5\n    price_source: https://example.invalid/p\n"
                 "    price_date: 2026-11-01\n")
    assert load_gpu("H100-SXM", p).price_date == "2026-11-01"
