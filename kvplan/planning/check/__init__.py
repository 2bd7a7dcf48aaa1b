"""``kvplan check``: evaluate every scenario of ``kvplan.toml`` against its budgets and the committed baseline.

>>> report = run_check()              # kvplan.toml (or [tool.kvplan]) in the current directory
>>> report.failed, [r.verdict for r in report.rows]

Each row is one scenario x check: a budget key (``max_kv_bytes``) or ``baseline`` for one figure. A failing row points
at the line responsible (``file``, ``line``): the card field or scenario option that changed since the baseline when
one did; else, for a KV figure, the card's ``num_kv_heads:`` (``num_layers:``) line; else the budget's line in the
config (the scenario's ``[[scenarios]]`` line for a baseline check).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kvplan.planning.check.baseline import ACCEPT, check_replaceable, read_baseline, regressed, write_baseline
from kvplan.planning.check.config import LoadedConfig, find_config, load_config, same_file
from kvplan.planning.check.figures import FIGURES, PLAN_FIGURES, Evaluated, Figure, Value, evaluate
from kvplan.planning.check.lines import yaml_field_line
from kvplan.errors import KvplanError, clip, clip_text
from kvplan.files import shown
from kvplan.units import fmt_bytes, fmt_int

SCHEMA_VERSION = 1
_RESULT = ConfigDict(frozen=True, extra="forbid")


class CheckRow(BaseModel):
    model_config = _RESULT
    scenario: str
    check: str  # the budget key (max_kv_bytes, min_concurrency, ...) or "baseline"
    figure: str  # kv_bytes_per_token, kv_bytes, weights_bytes, total_bytes, ttft_ms, tpot_ms, gpu_bytes, ...
    unit: Literal["bytes", "ms", "count", "bool"]
    limit: bool | int | float | None  # the budget, or the baseline's figure; None: not in the baseline yet
    value: bool | int | float
    delta: int | float | None  # value - limit
    verdict: Literal["pass", "fail", "new"]
    message: str
    file: str  # what a failure points at (relative to the working directory when inside it)
    line: int


class CheckReport(BaseModel):
    """What ``kvplan check --json`` prints."""

    model_config = _RESULT
    schema_version: int = SCHEMA_VERSION
    config: str
    baseline: str
    baseline_found: bool
    baseline_updated: bool
    figures: dict[str, dict[str, bool | int | float]]  # scenario -> figure -> value
    rows: list[CheckRow]
    failed: int
    notes: list[str]

    def _repr_html_(self) -> str:
        """A notebook shows every check as a table (kvplan.planning.htmlrepr)."""
        from kvplan.planning.htmlrepr import check_html

        return check_html(self)


def run_check(config: str | None = None, *, cwd: Path | None = None, update_baseline: bool = False,
              outputs: dict[str, Path] | None = None) -> CheckReport:
    """Evaluate every scenario; with ``update_baseline`` write the current figures as the new baseline first.

    ``outputs``: the other files the caller writes from the report (``{"--junit": path}``). Every path written,
    the baseline's too, is checked before anything is: bad input (exit 2) never leaves one file written."""
    cwd = Path.cwd() if cwd is None else cwd
    loaded = load_config(find_config(config, cwd))
    _check_outputs(loaded, outputs or {}, update_baseline)
    done = [evaluate(loaded, i) for i in range(len(loaded.config.scenarios))]
    dropped: list[str] = []
    if update_baseline:
        dropped = _gone(loaded, _old_baseline(loaded.baseline_path))
        write_baseline(loaded.baseline_path, {e.scenario.name: _entry(e) for e in done})
    baseline = read_baseline(loaded.baseline_path)
    # a scenario the baseline lacks is checked against it all the same: its figures are "new", never silently skipped
    rows = [row for e in done for row in _rows(loaded, e, None if baseline is None else
                                               baseline.get(e.scenario.name, {}), cwd)]
    notes = _notes(loaded, baseline, rows, update_baseline, cwd, dropped)
    return CheckReport(config=_shown(loaded.path, cwd), baseline=_shown(loaded.baseline_path, cwd),
                       baseline_found=baseline is not None, baseline_updated=update_baseline,
                       figures={e.scenario.name: e.figures for e in done}, rows=rows,
                       failed=sum(r.verdict == "fail" for r in rows), notes=notes)


def _entry(e: Evaluated) -> dict:
    figures = {name: e.figures[name] for name in FIGURES if name in e.figures}
    return {"figures": figures, "inputs": e.inputs, "card": e.card}


def _check_outputs(loaded: LoadedConfig, outputs: dict[str, Path], update_baseline: bool) -> None:
    """Every file this run will write, checked before any is: none may be a file the check reads (the config, a
    card, a GPU file) or the baseline, and each must be writable (``kvplan.writes.check_writable``)."""
    from kvplan.files import check_writable

    for flag, path in outputs.items():
        for what, source in [*loaded.inputs(), (f"the baseline {shown(loaded.baseline_path)}", loaded.baseline_path)]:
            if same_file(path, source):
                raise KvplanError(f"{flag}: {shown(path)} is {what}; allowed: a file of its own")
        try:
            check_writable(path)
        except KvplanError as exc:
            raise KvplanError(f"{flag}: {exc}") from None
    if update_baseline:
        check_replaceable(loaded.baseline_path)


def _old_baseline(path: Path) -> dict | None:
    """The baseline about to be replaced, if kvplan can read it (a damaged one is rewritten all the same)."""
    try:
        return read_baseline(path)
    except KvplanError:
        return None


def _gone(loaded: LoadedConfig, baseline: dict | None) -> list[str]:
    """Scenarios of the baseline that the config no longer has."""
    names = {s.name for s in loaded.config.scenarios}
    return sorted(n for n in (baseline or {}) if n not in names)


def _notes(loaded: LoadedConfig, baseline: dict | None, rows: list[CheckRow], updated: bool, cwd: Path,
           dropped: list[str]) -> list[str]:
    path, config = _shown(loaded.baseline_path, cwd), _shown(loaded.path, cwd)
    if updated:
        gone = f" (dropped {_names(dropped)}, no longer in {config})" if dropped else ""
        return [f"wrote {path}{gone}; commit it with the change that moved the figures"]
    gone = _gone(loaded, baseline)
    out = [f"{path} also holds {_names(gone)}, no longer in {config}; `{ACCEPT}` drops "
           f"{'them' if len(gone) > 1 else 'it'}"] if gone else []
    if baseline is None and not rows:
        return out + [f"nothing was checked: no scenario sets a budget and there is no baseline at {path} yet; run "
                      f"`{ACCEPT}` and commit {path} (later runs compare every figure with it), or set budgets "
                      "(max_kv_bytes, max_total_bytes, max_gpu_bytes, min_concurrency, fits, ...; docs/check.md)"]
    if baseline is None:
        return out + [f"no baseline at {path}: only budgets were checked; `{ACCEPT}` writes one to commit"]
    if any(r.verdict == "new" for r in rows):
        out.append(f"figures marked new are not in {path} yet, so nothing was compared for them; `{ACCEPT}` adds "
                   "them")
    better = _improved(loaded, rows)
    if better:
        shown = ", ".join(f"{clip_text(r.scenario, 40)} {r.figure}" for r in better[:3])
        more = f" and {len(better) - 3} more" if len(better) > 3 else ""
        out.append(f"{len(better)} figure{'s' if len(better) > 1 else ''} improved past the baseline by more than "
                   f"the tolerance ({shown}{more}): a baseline only fails what gets worse, so a regression back to "
                   f"the old figure would pass; `{ACCEPT}` locks the improvement in")
    return out


def _improved(loaded: LoadedConfig, rows: list[CheckRow]) -> list[CheckRow]:
    """Baseline rows whose figure got better than the baseline by more than the scenario's tolerance (the baseline
    is stale: it would let the figure fall back unnoticed)."""
    tolerance = {s.name: s.tolerance for s in loaded.config.scenarios}
    return [r for r in rows if r.check == "baseline" and r.verdict == "pass" and r.limit is not None
            and regressed(r.limit, r.value, tolerance.get(r.scenario, 0.0), FIGURES[r.figure].higher_is_better)]


def _names(names: list[str]) -> str:
    listed = ", ".join(repr(clip_text(n, 60)) for n in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"scenario{'s' if len(names) > 1 else ''} {listed}{more}"


def _shown(path: Path, cwd: Path) -> str:
    """A path as GitHub annotations want it: relative to the working directory (the repository root in CI)."""
    try:
        rel = os.path.relpath(path.resolve(), cwd.resolve())
    except ValueError:  # another drive (Windows)
        return path.as_posix()
    return Path(rel).as_posix() if not rel.startswith("..") else path.resolve().as_posix()


def _rows(loaded: LoadedConfig, e: Evaluated, base: dict | None, cwd: Path) -> list[CheckRow]:
    rows = []
    for name, value in e.figures.items():
        fig = FIGURES[name]
        limit = getattr(e.scenario, fig.budget) if fig.budget else None
        if limit is not None:
            rows.append(_budget_row(loaded, e, base, fig, value, limit, cwd))
        if base is not None and fig.unit != "bool":
            rows.append(_baseline_row(loaded, e, base, fig, value, cwd))
    return rows


def _budget_row(loaded: LoadedConfig, e: Evaluated, base: dict | None, fig: Figure, value: Value, limit: Value,
                cwd: Path) -> CheckRow:
    broken = regressed(value, limit, 0.0, fig.higher_is_better)
    bound = "at least" if fig.higher_is_better else "at most"
    unfit = e.unfit if broken and fig.name in PLAN_FIGURES else None  # the planner's reason, where it refused
    if fig.unit == "bool":
        why = f" ({unfit})" if unfit else ""
        text = f"{fig.name} is {str(value).lower()}{why}; the budget {fig.budget} = true"
    else:
        text = f"{fig.name} {_fmt(fig, value)}; budget {fig.budget} {bound} {_fmt(fig, limit)}"
        if broken:
            text += f", {'short' if fig.higher_is_better else 'over'} by {_fmt(fig, abs(value - limit))}"
        text += f" (the plan does not fit: {unfit})" if unfit else ""
    file, line, cause = _blame(loaded, e, base, fig, fig.budget, cwd)
    return _row(e, fig, fig.budget, limit, value, "fail" if broken else "pass", text + (cause if broken else ""),
                file, line)


def _baseline_row(loaded: LoadedConfig, e: Evaluated, base: dict, fig: Figure, value: Value, cwd: Path) -> CheckRow:
    old = base.get("figures", {}).get(fig.name)
    file, line, cause = _blame(loaded, e, base, fig, None, cwd)
    if old is None or isinstance(old, bool) or not isinstance(old, (int, float)):
        return _row(e, fig, "baseline", None, value, "new", f"{fig.name} {_fmt(fig, value)}: not in the baseline yet",
                    file, line)
    if not regressed(value, old, e.scenario.tolerance, fig.higher_is_better):
        return _row(e, fig, "baseline", old, value, "pass", f"{fig.name} {_fmt(fig, value)}; baseline "
                    f"{_fmt(fig, old)}", file, line)
    verb = "fell" if fig.higher_is_better else "grew"
    text = (f"{fig.name} {verb} from {_fmt(fig, old)} to {_fmt(fig, value)} ({_pct(value, old)}), beyond the "
            f"tolerance {e.scenario.tolerance:g}{cause}. If intended, accept it: `{ACCEPT}` and commit "
            f"{_shown(loaded.baseline_path, cwd)}")
    return _row(e, fig, "baseline", old, value, "fail", text, file, line)


def _row(e: Evaluated, fig: Figure, check: str, limit: Value | None, value: Value, verdict: str, message: str,
         file: str, line: int) -> CheckRow:
    numeric = limit is not None and fig.unit != "bool"
    return CheckRow(scenario=e.scenario.name, check=check, figure=fig.name, unit=fig.unit, limit=limit, value=value,
                    delta=value - limit if numeric else None, verdict=verdict, message=message, file=file, line=line)


def _blame(loaded: LoadedConfig, e: Evaluated, base: dict | None, fig: Figure, budget: str | None,
           cwd: Path) -> tuple[str, int, str]:
    """(file, line, "; because ...") for a row: what changed since the baseline, else the static rule."""
    config = _shown(loaded.path, cwd)
    for key, old, new in _changes(e, base):
        if key in e.card:
            place = _card_place(loaded, e, key, cwd)
            return (*place, f" (card {key} changed from {_val(old)} to {_val(new)})")
        return config, loaded.line(e.index, key), f" ({key} changed from {_val(old)} to {_val(new)})"
    if fig.kv and e.card_file is not None:
        for key in ("kv_lora_rank", "num_kv_heads", "num_layers") if "kv_lora_rank" in e.card else \
                ("num_kv_heads", "num_layers"):
            line = yaml_field_line(e.card_file, key)
            if line is not None:
                return _shown(e.card_file, cwd), line, f" (card {key}: {e.card[key]})" if key in e.card else ""
    return config, loaded.line(e.index, budget), ""


def _changes(e: Evaluated, base: dict | None) -> list[tuple[str, object, object]]:
    """Card fields, then scenario options, that differ from the baseline's record, in card / config order."""
    if not base:
        return []
    out = []
    for now, then in ((e.card, base.get("card", {})), (e.inputs, base.get("inputs", {}))):
        for key in dict.fromkeys([*now, *then]):
            if now.get(key) != then.get(key):
                out.append((key, then.get(key), now.get(key)))
    return out


def _val(v: object) -> str:
    """A card field or option as a message shows it: bounded, one printable line (a baseline is user input)."""
    return clip_text(v, 60) if isinstance(v, str) else clip(v)


def _card_place(loaded: LoadedConfig, e: Evaluated, key: str, cwd: Path) -> tuple[str, int]:
    line = yaml_field_line(e.card_file, key) if e.card_file is not None else None
    if line is None:  # a bundled card or an hf_config: point at the scenario's model line
        return _shown(loaded.path, cwd), loaded.line(e.index, "model" if e.scenario.model else "hf_config")
    return _shown(e.card_file, cwd), line


def _fmt(fig: Figure, v: Value) -> str:
    if fig.unit == "bytes":
        return f"{fmt_bytes(v)} ({fmt_int(v)} B)" if abs(v) >= 1024 else f"{fmt_int(v)} B"
    if fig.unit == "ms":
        return f"{v:.4g} ms"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _pct(value: int | float, old: int | float) -> str:
    return f"{(value - old) / old * 100:+.2f}%" if old else f"{value - old:+}"
