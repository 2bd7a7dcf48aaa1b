"""`kvplan check`: the memory and capacity regression gate for CI (docs/check.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli import options as o
from kvplan.errors import KvplanError


def check(
    config: Annotated[Optional[str], typer.Option(
        "--config", help="The config file (default: kvplan.toml, else the tool.kvplan table of pyproject.toml).")] = None,
    update_baseline: Annotated[bool, typer.Option(
        "--update-baseline", metavar="", help="Write the current figures as the baseline (accepts a change).")] = False,
    junit: Annotated[Optional[str], typer.Option("--junit", help="Also write JUnit XML to FILE.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, or github (annotations on the lines responsible).")]
    = "table",
    schema: Annotated[bool, typer.Option("--schema", metavar="", help="Print the config's JSON Schema and exit.")]
    = False,
    as_json: o.Json = False,
) -> None:
    """Check every scenario of kvplan.toml against its budgets and the baseline: exit 0 all hold, 1 a check failed,
    2 bad input. Appends a Markdown summary to $GITHUB_STEP_SUMMARY when it is set."""
    if schema:
        import json

        from kvplan.planning.check.config import json_schema

        typer.echo(json.dumps(json_schema(), indent=2))
        return
    if fmt not in ("table", "github"):
        raise KvplanError(f"--format: {fmt!r} is not one of table, github")
    if as_json and fmt != "table":
        raise KvplanError("--json: give either --json or --format github")
    from kvplan.planning.check import run_check

    outputs = {} if junit is None else {"--junit": Path(junit)}  # checked with the baseline before either is written
    report = run_check(config, update_baseline=update_baseline, outputs=outputs)
    _junit(report, junit)
    _print(report, fmt, as_json)
    _step_summary(report)
    if report.failed:
        raise typer.Exit(1)


def _junit(report, junit: str | None) -> None:
    if junit is not None:
        from kvplan.files import write_atomic
        from kvplan.report.check import junit_xml

        write_atomic(Path(junit), junit_xml(report))


def _step_summary(report) -> None:
    """Append the Markdown summary to $GITHUB_STEP_SUMMARY, after the result is printed: a summary that cannot be
    written (a folder, a full disk) is a warning, never the end of the gate."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return
    from kvplan.report.check import markdown_summary

    try:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(markdown_summary(report))
    except (OSError, ValueError) as exc:
        from kvplan.errors import clip_text
        from kvplan.report.console import make_console, note

        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        note(make_console(stderr=True), f"$GITHUB_STEP_SUMMARY ({clip_text(summary)}): cannot write: "
             f"{clip_text(reason, 80)}; the result above stands", label="warning")


def _print(report, fmt: str, as_json: bool) -> None:
    if as_json:
        from kvplan.report.jsonout import print_json

        print_json(report)
        return
    from kvplan.report.check import github_annotations, render_check
    from kvplan.report.console import make_console

    render_check(report, make_console())
    if fmt == "github":
        for line in github_annotations(report):
            typer.echo(line)


def register(app: typer.Typer) -> None:
    from kvplan.cli.examples import epilog

    app.command(epilog=epilog("check"))(check)
