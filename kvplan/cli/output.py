"""The one way a command hands its result to report: JSON with exact integers, or a renderer for people."""

from __future__ import annotations

from typing import Any, Callable


def emit(result: Any, as_json: bool, render: Callable[[Any, Any], None]) -> None:
    """``--json``: the result as JSON on stdout; otherwise ``render(result, console)`` on a console that never cuts."""
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(result)
        return
    from kvplan.report.console import make_console

    render(result, make_console())
