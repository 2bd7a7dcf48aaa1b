"""The report's blocks as one self-contained HTML file, or as Markdown with its charts as SVG files beside it.

HTML: inline SVG, CSS in one <style> block, no script, and no src/href to anything outside the file; tables scroll
sideways on a phone and break cleanly when printed.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from kvplan.report.document import Block, Table

CSS = """
:root { color-scheme: light; --ink: #1a1a1a; --muted: #555; --rule: #d0d0d0; --accent: #0072B2; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       max-width: 68rem; margin: 0 auto; padding: 1rem; background: #fff; }
h1 { font-size: 1.6rem; margin: 0.5rem 0; } h2 { font-size: 1.35rem; margin-top: 2rem;
     border-bottom: 2px solid var(--accent); } h3 { font-size: 1.1rem; margin-top: 1.5rem; }
figure { margin: 0.75rem 0; } svg { width: 100%; height: auto; max-width: 100%; display: block; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1rem; min-width: 50%; }
caption { text-align: left; font-weight: 600; padding: 0.25rem 0; color: var(--muted); }
th, td { padding: 0.25rem 0.6rem; border-bottom: 1px solid var(--rule); white-space: nowrap; }
th { text-align: left; background: #f3f6f9; white-space: normal; vertical-align: bottom; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code, .formula { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85rem; }
ul.formulas { list-style: none; padding-left: 0; } ul.formulas li { background: #f6f6f6; padding: 0.3rem 0.5rem;
       margin: 0.25rem 0; overflow-wrap: anywhere; }
p.verdict { font-weight: 600; background: #eef5fb; border-left: 4px solid var(--accent); padding: 0.5rem; }
@media (max-width: 40rem) { body { font-size: 15px; padding: 0.5rem; } th, td { padding: 0.2rem 0.4rem; } }
@media print { body { max-width: none; font-size: 11pt; } .scroll { overflow: visible; }
       figure, table { break-inside: avoid; page-break-inside: avoid; } h2, h3 { break-after: avoid; }
       th, td { white-space: normal; } }
"""


def to_html(blocks: list[Block], title: str) -> str:
    body = "\n".join(_html_block(b) for b in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _html_block(b: Block) -> str:
    e = html.escape
    if b.kind in ("h1", "h2", "h3"):
        return f"<{b.kind}>{e(b.text)}</{b.kind}>"
    if b.kind == "p":
        cls = ' class="verdict"' if b.text.startswith("Verdict:") else ""
        return f"<p{cls}>{e(b.text)}</p>"
    if b.kind == "chart":
        return f"<figure>{b.svg}</figure>"
    if b.kind == "table":
        return _html_table(b.table)
    cls = ' class="formulas"' if b.kind == "formulas" else ""
    return f"<ul{cls}>" + "".join(f"<li>{e(i)}</li>" for i in b.items) + "</ul>"


def _html_table(t: Table) -> str:
    e = html.escape
    head = "".join(f'<th scope="col">{e(c)}</th>' for c in t.columns)
    rows = []
    for row in t.rows:
        cells = [f'<td class="n" data-value="{c.value!r}">{e(c.text)}</td>' if c.value is not None
                 else f"<td>{e(c.text)}</td>" for c in row]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table id="{e(t.id)}"><caption>{e(t.caption)}</caption><thead><tr>{head}</tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>")


def to_markdown(blocks: list[Block], chart_dir: str) -> tuple[str, dict[str, str]]:
    """Markdown text and the chart files it links ({relative path: SVG text})."""
    out, files = [], {}
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + md_text(b.text))
        elif b.kind == "p":
            out.append(f"**{md_text(b.text)}**" if b.text.startswith("Verdict:") else md_text(b.text))
        elif b.kind == "chart":
            name = f"{chart_dir}/chart-{len(files) + 1}.svg"
            files[name] = b.svg
            out.append(f"![{_chart_title(b)}]({name})")
        elif b.kind == "table":
            out.append(_md_table(b.table))
        else:
            code = b.kind == "formulas"  # a code span shows its text as written: only its ticks need care
            out.append("\n".join(f"- `{i.replace('`', chr(39))}`" if code else f"- {md_text(i)}" for i in b.items))
    return "\n\n".join(out) + "\n", files


def _chart_title(b: Block) -> str:
    start = b.svg.find("<title")
    return b.svg[b.svg.index(">", start) + 1:b.svg.index("</title>")] if start >= 0 else "chart"


_ENTITY = re.compile(r"&(?=#?\w+;)")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def md_text(text: str) -> str:
    """Text as Markdown shows it, never as markup a file's text could inject: an HTML tag's or entity's opening
    (``<x``, ``&x;``), links and images (``[`` ``]``) and table cells (``|``) escaped; the rest of Markdown (emphasis,
    code, a ``<=``) is harmless in kvplan's prose and kept readable."""
    text = _ENTITY.sub("&amp;", text.replace("\\", "\\\\"))  # a backslash first: '\\[' cannot undo an escape
    text = _TAG.sub("&lt;", text)  # '<' that could open a tag or a comment; '<=' stays as written
    return text.replace("[", "\\[").replace("]", "\\]").replace("|", "\\|")


def _md_table(t: Table) -> str:
    def cell(text: str) -> str:
        return md_text(text)

    lines = [f"*{md_text(t.caption)}*", "", "| " + " | ".join(t.columns) + " |",
             "|" + "|".join("---:" if t.rows and t.rows[0][i].value is not None else "---"
                            for i in range(len(t.columns))) + "|"]
    lines += ["| " + " | ".join(cell(c.text) for c in row) + " |" for row in t.rows]
    return "\n".join(lines)


def write_markdown(path: Path, blocks: list[Block]) -> None:
    """The .md file and its charts in a folder named after it (``report.md`` -> ``report_charts/``), each atomic: the
    folder is written whole beside the old one and renamed into place (no stale or half-written charts)."""
    import re

    import shutil

    from kvplan.errors import KvplanError, printable
    from kvplan.files import write_atomic, write_folder_atomic
    from kvplan.writes import check_writable

    chart_dir = f"{path.stem}_charts"
    text, files = to_markdown(blocks, chart_dir)
    try:  # the text links the charts by the folder's name: a name that is not UTF-8 cannot be written in it
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise KvplanError(f"--output: {printable(str(path))}: not a UTF-8 name, which the Markdown's links to its "
                          f"charts folder cannot hold; allowed: a UTF-8 file name (or .html)") from None
    check_writable(path)  # refused before any chart is written (a link, a folder, a missing or read-only folder)
    folder = path.parent / chart_dir
    new_folder = not os.path.lexists(folder)
    write_folder_atomic(folder, {name.rsplit("/", 1)[-1]: svg for name, svg in files.items()},
                        owned=lambda name: re.fullmatch(r"chart-\d+\.svg", name) is not None)
    try:
        write_atomic(path, text)
    except BaseException:
        if new_folder:  # charts of a report that was not written: gone with it
            shutil.rmtree(folder, ignore_errors=True)
        raise
