"""``kvplan check`` for people and for CI systems: a table, JUnit XML, GitHub annotations, a Markdown summary."""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

from rich.console import Console

from kvplan.errors import printable
from kvplan.planning.check import CheckReport, CheckRow
from kvplan.report.console import escape, note, table
from kvplan.report.docformat import md_text
from kvplan.units import fmt_bytes

_VERDICT = {"pass": "[green]ok[/green]", "fail": "[bold red]FAIL[/bold red]", "new": "[yellow]new[/yellow]"}
_WORD = {"pass": "ok", "fail": "FAIL", "new": "new"}
COLUMNS = ["scenario", "figure", "budget or baseline", "value", "delta", "verdict"]


def short(row: CheckRow, v: bool | int | float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    if row.unit == "bool":
        return str(v).lower()
    sign = "+" if signed and v > 0 else ""
    if row.unit == "bytes":
        return sign + fmt_bytes(v)
    text = f"{v:.4g}" if isinstance(v, float) else f"{v:,}"
    return sign + text + (" ms" if row.unit == "ms" else "")


def cells(row: CheckRow) -> list[str]:
    if row.check == "baseline":
        against = f"baseline {short(row, row.limit)}" if row.limit is not None else "baseline -"
    else:
        op = "=" if row.unit == "bool" else (">=" if row.check.startswith("min_") else "<=")
        against = f"{row.check} {op} {short(row, row.limit)}"
    return [row.scenario, row.figure, against, short(row, row.value), short(row, row.delta, signed=True),
            _WORD[row.verdict]]


def _safe(text: str) -> str:
    """For the terminal: one printable line (no escape sequences), rich markup escaped."""
    return escape(printable(text))


def render_check(report: CheckReport, console: Console) -> None:
    title = f"kvplan check: {_safe(report.config)} (baseline {_safe(report.baseline)})"
    if not report.rows:  # no budget, no baseline: no table of nothing; the note says what to do
        console.print(title)
    else:
        t = table(title, COLUMNS, left=("scenario", "figure", "budget or baseline", "verdict"))
        for row in report.rows:
            c = cells(row)
            t.add_row(*(_safe(x) for x in c[:-1]), _VERDICT[row.verdict])
        console.print(t)
    for row in report.rows:
        if row.verdict == "fail":
            console.print(f"[bold red]FAIL[/bold red] {_safe(row.scenario)} {_safe(row.check)}: "
                          f"{_safe(row.message)}  [dim]({_safe(row.file)}:{row.line})[/dim]")
    for text in report.notes:
        note(console, text)
    held, checked, new = tally(report)
    line = f"{held} of {checked} checks hold" if checked else "nothing was checked"
    line += f"; {new} new, not compared (not in the baseline yet)" if new else ""
    console.print(line + (f"; [bold red]{report.failed} failed[/bold red]" if report.failed else ""))


def tally(report: CheckReport) -> tuple[int, int, int]:
    """(checks that hold, checks made, figures new): a new figure is compared with nothing, so it neither holds nor
    fails."""
    held = sum(r.verdict == "pass" for r in report.rows)
    new = sum(r.verdict == "new" for r in report.rows)
    return held, held + report.failed, new


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    """Text XML 1.0 can hold: a character it cannot (a control character, a lone surrogate) is written as its
    escape, so the file stays well-formed for every JUnit reader."""
    return _NOT_XML.sub(lambda m: ascii(m[0])[1:-1], text)


def junit_xml(report: CheckReport) -> str:
    """One testcase per scenario x check; a failure carries the figures and the line responsible."""
    suite = ET.Element("testsuite", name="kvplan check", tests=str(len(report.rows)), failures=str(report.failed),
                       errors="0", skipped=str(sum(r.verdict == "new" for r in report.rows)))
    for row in report.rows:
        case = ET.SubElement(suite, "testcase", classname=_x(f"kvplan.{row.scenario}"),
                             name=_x(f"{row.check} {row.figure}"), file=_x(row.file), line=str(row.line))
        if row.verdict == "fail":
            ET.SubElement(case, "failure", message=_x(row.message), type=row.check).text = _x(
                f"{row.file}:{row.line}: {row.message}\nvalue {row.value!r}, limit {row.limit!r}, delta {row.delta!r}")
        elif row.verdict == "new":
            ET.SubElement(case, "skipped", message=_x(row.message))
    root = ET.Element("testsuites", name="kvplan check", tests=suite.get("tests"), failures=suite.get("failures"))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: CheckReport) -> list[str]:
    """``::error file=...,line=...,title=...::message`` per failed check (GitHub Actions workflow commands)."""
    out = []
    for row in report.rows:
        if row.verdict == "fail":
            title = f"kvplan check: {row.scenario} {row.check} {row.figure}"
            out.append(f"::error file={_gh_prop(row.file)},line={row.line},title={_gh_prop(title)}::"
                       f"{_gh_data(row.message)}")
    return out


def markdown_summary(report: CheckReport) -> str:
    """For ``$GITHUB_STEP_SUMMARY``: a heading with the verdict, the table, the failures and notes."""
    _, checked, new = tally(report)
    head = (f"{report.failed} of {checked} checks failed" if report.failed else
            f"all {checked} checks hold" if checked else "nothing was checked")
    head += f"; {new} new, not compared" if new else ""
    lines = [f"### kvplan check: {head}"]
    if report.rows:  # no table of nothing
        lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_md(c) for c in cells(row)) + " |" for row in report.rows]
    fails = [f"- **{_md(r.scenario)}** `{r.check}`: {_md(r.message)} (`{_md(r.file)}:{r.line}`)" for r in report.rows
             if r.verdict == "fail"]
    lines += ([""] + fails if fails else []) + ([""] + [f"> {_md(n)}" for n in report.notes] if report.notes else [])
    return "\n".join(lines) + "\n\n"


def _md(text: str) -> str:
    return md_text(printable(" ".join(text.split("\n"))))
