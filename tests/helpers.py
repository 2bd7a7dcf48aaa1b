"""Assertions several test files share."""


def one_line_error(cli, *args) -> str:
    """Run the CLI, expect exit 2 with exactly one 'error: ...' line on stderr and no traceback; return that line."""
    code, out, err = cli(*args)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out + err, err
    return lines[0]
