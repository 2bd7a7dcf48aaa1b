"""The `kvplan check` configuration: ``kvplan.toml``, or ``[tool.kvplan]`` in ``pyproject.toml``.

Every mistake is one line naming the file, the line, the scenario and the key, with the closest valid key::

    kvplan.toml:9: scenario 'llama': max_kv_byte: unknown key; did you mean max_kv_bytes?
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, ValidationError, WithJsonSchema

from kvplan.errors import MAX_NAME_CHARS, KvplanError, clip, clip_text, name_problem
from kvplan.files import MAX_DEPTH, is_dir, nesting_depth, read_text, shown
from kvplan.model.validation import describe_validation_error
from kvplan.planning.check.lines import ScenarioLines, key_line, scenario_lines, table_key_line
from kvplan.units import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "kvplan.toml"
DEFAULT_BASELINE = "kvplan-baseline.json"
ESTIMATE_KEYS = ("batch", "seq_len", "engine", "kv_dtype", "weight_dtype", "encoder_len", "max_cache_len",
                 "block_size", "enable_prefix_caching", "kv_heads", "attention", "prompt_len", "gpu", "gpu_file", "mfu",
                 "mbu")
PLAN_KEYS = ("tp", "pp", "dp", "max_model_len", "gpu_memory", "platform", "gpu_memory_utilization", "kv_cache_memory",
             "max_num_batched_tokens", "max_num_seqs",  # options only the capacity planner (`kvplan plan`) takes
             "mem_fraction_static", "swa_full_tokens_ratio", "disable_hybrid_swa_memory",  # SGLang's
             "max_running_requests", "disable_radix_cache", "max_mamba_cache_size", "mamba_radix_cache_strategy",
             "speculative_config", "enable_lora", "max_loras", "max_lora_rank", "shared_prefix_len")  # serving features
DISAGG_KEYS = ("rate", "isl", "osl", "ttft_ms", "tpot_ms")  # `kvplan disagg`: a scenario with these is kind disagg
SIZE_KEYS = ("max_kv_bytes", "max_total_bytes", "max_gpu_bytes", "gpu_memory", "kv_cache_memory",
             "max_kv_transfer_bytes")
PLAN_BUDGETS = ("max_gpu_bytes", "min_concurrency", "fits")
DISAGG_BUDGETS = ("max_kv_transfer_bytes", "max_link_gb_per_s", "max_gpus")
BUDGET_KEYS = ("max_kv_bytes", "max_total_bytes", "max_ttft_ms", "max_tpot_ms", *PLAN_BUDGETS, *DISAGG_BUDGETS,
               "tolerance")
_SIZE_PATTERN = r"^\s*(\d+(\.\d+)?|\.\d+)\s*([kKmMgGtTpPeE]i?[bB]?|[bB])?\s*$"
Size = Annotated[int, Field(ge=0), WithJsonSchema({
    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": _SIZE_PATTERN}],
    "description": "Bytes: an integer, or a string with an IEC or SI unit (\"40 GiB\", \"80GB\", \"512MiB\")."})]
PosInt = Annotated[StrictInt, Field(ge=1)]
_OPT = None


def _one_line(text: str) -> str:
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        raise ValueError(f"holds the control character {ascii(bad)}; allowed: one printable line")
    return text


def _name(text: str) -> str:
    """A scenario's name: one printable line and a name by kvplan.errors.NAME_CHARS (it reaches tables, Markdown
    summaries, JUnit and workflow commands)."""
    _one_line(text)
    if problem := name_problem(text):
        raise ValueError(problem)
    return text


def _relative_path(text: str) -> str:
    _one_line(text)
    if Path(text).is_absolute() or text.startswith("~"):
        raise ValueError("an absolute path; allowed: a path relative to the config, inside its repository")
    return text


class Scenario(BaseModel):
    """One model and workload, and the budgets it must stay within."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    name: Annotated[str, AfterValidator(_name)] = Field(
        min_length=1, max_length=MAX_NAME_CHARS, description="Unique name, one printable line; the baseline and the "
                                                             "reports use it.")
    model: Optional[str] = Field(_OPT, description="A card path (relative to the config) or a bundled card name.")
    hf_config: Optional[str] = Field(_OPT, description="A Hugging Face config.json (or its folder), instead of model.")
    batch: Optional[PosInt] = Field(_OPT, description="estimate --batch (default 1).")
    seq_len: Optional[PosInt] = Field(_OPT, description="estimate --seq-len: tokens each sequence holds.")
    engine: Optional[str] = Field(_OPT, description="ideal, hf-dynamic, hf-static or vllm.")
    kv_dtype: Optional[str] = _OPT
    weight_dtype: Optional[str] = _OPT
    encoder_len: Optional[PosInt] = _OPT
    max_cache_len: Optional[PosInt] = _OPT
    block_size: Optional[PosInt] = _OPT
    enable_prefix_caching: Optional[bool] = Field(_OPT, description="estimate and plan --enable-prefix-caching (true) "
                                                  "/ --no-enable-prefix-caching (false), vLLM only; unset: the "
                                                  "release's default (a hybrid's Mamba cache mode follows it).")
    kv_heads: Optional[PosInt] = _OPT
    attention: Optional[str] = _OPT
    prompt_len: Optional[PosInt] = _OPT
    gpu: Optional[str] = Field(_OPT, description="A GPU of `kvplan gpus list`: adds the roofline figures.")
    gpu_file: Optional[str] = _OPT
    mfu: Optional[float] = Field(_OPT, gt=0, le=1)
    mbu: Optional[float] = Field(_OPT, gt=0, le=1)
    tp: Optional[PosInt] = Field(_OPT, description="kvplan plan --tp: tensor-parallel GPUs.")
    pp: Optional[PosInt] = Field(_OPT, description="kvplan plan --pp: pipeline stages.")
    dp: Optional[PosInt] = Field(_OPT, description="kvplan plan --dp: data-parallel replicas.")
    max_model_len: Optional[PosInt] = Field(_OPT, description="kvplan plan --max-model-len.")
    gpu_memory: Optional[Size] = Field(_OPT, description="kvplan plan --gpu-memory: overrides the GPU's total.")
    platform: Optional[str] = Field(_OPT, description="kvplan plan --platform: linux (default) or windows (native "
                                                      "Windows or WSL2: the catalog's Windows total).")
    gpu_memory_utilization: Optional[float] = Field(_OPT, gt=0, le=1)
    mem_fraction_static: Optional[float] = Field(_OPT, gt=0, le=1, description="kvplan plan --mem-fraction-static "
                                                                              "(SGLang).")
    swa_full_tokens_ratio: Optional[float] = Field(_OPT, gt=0, le=1, description="kvplan plan "
                                                   "--swa-full-tokens-ratio (SGLang's hybrid SWA pool).")
    disable_hybrid_swa_memory: Optional[bool] = Field(_OPT, description="kvplan plan --disable-hybrid-swa-memory.")
    max_running_requests: Optional[PosInt] = Field(_OPT, description="kvplan plan --max-running-requests (SGLang).")
    disable_radix_cache: Optional[bool] = Field(_OPT, description="kvplan plan --disable-radix-cache (SGLang).")
    max_mamba_cache_size: Optional[PosInt] = Field(_OPT, description="kvplan plan --max-mamba-cache-size (SGLang).")
    mamba_radix_cache_strategy: Optional[str] = Field(_OPT, description="kvplan plan --mamba-radix-cache-strategy "
                                                      "(SGLang; checked by the runtime).")
    kv_cache_memory: Optional[Size] = Field(_OPT, description="kvplan plan --kv-cache-memory.")
    max_num_batched_tokens: Optional[PosInt] = _OPT
    max_num_seqs: Optional[PosInt] = _OPT
    speculative_config: Optional[str] = Field(_OPT, description="kvplan plan --speculative-config (vLLM's JSON: "
                                                                "method, model, num_speculative_tokens).")
    enable_lora: Optional[bool] = Field(_OPT, description="kvplan plan --enable-lora (vLLM's LoRA slots).")
    max_loras: Optional[PosInt] = Field(_OPT, description="kvplan plan --max-loras.")
    max_lora_rank: Optional[PosInt] = Field(_OPT, description="kvplan plan --max-lora-rank.")
    shared_prefix_len: Optional[PosInt] = Field(_OPT, description="kvplan plan --shared-prefix-len: prompt tokens "
                                                                  "every request shares (prefix caching).")
    max_kv_bytes: Optional[Size] = Field(_OPT, description="Budget: KV cache of the whole batch.")
    max_total_bytes: Optional[Size] = Field(_OPT, description="Budget: weights + KV cache.")
    max_gpu_bytes: Optional[Size] = Field(_OPT, description="Budget (kvplan plan): memory per GPU.")
    min_concurrency: Optional[PosInt] = Field(_OPT, description="Budget (kvplan plan): sequences served at once.")
    max_ttft_ms: Optional[float] = Field(_OPT, gt=0, description="Budget: roofline time to first token (needs gpu).")
    max_tpot_ms: Optional[float] = Field(_OPT, gt=0, description="Budget: roofline time per output token (needs gpu).")
    fits: Optional[Literal[True]] = Field(_OPT, description="Budget (kvplan plan): the plan must fit.")
    rate: Optional[float] = Field(_OPT, gt=0, description="kvplan disagg --rate: requests per second (with isl, osl, "
                                                          "ttft_ms, tpot_ms and gpu: a disagg scenario).")
    isl: Optional[PosInt] = Field(_OPT, description="kvplan disagg --isl: prompt tokens per request.")
    osl: Optional[PosInt] = Field(_OPT, description="kvplan disagg --osl: output tokens per request.")
    ttft_ms: Optional[float] = Field(_OPT, gt=0, description="kvplan disagg --ttft-ms: the time-to-first-token target.")
    tpot_ms: Optional[float] = Field(_OPT, gt=0, description="kvplan disagg --tpot-ms: the time-per-output-token "
                                                             "target.")
    max_kv_transfer_bytes: Optional[Size] = Field(_OPT, description="Budget (kvplan disagg): K/V handed over per "
                                                                    "request.")
    max_link_gb_per_s: Optional[float] = Field(_OPT, gt=0, description="Budget (kvplan disagg): the link one hand-over "
                                                                       "needs within the TTFT target, GB/s.")
    max_gpus: Optional[PosInt] = Field(_OPT, description="Budget (kvplan disagg): GPUs of both pools.")
    tolerance: float = Field(0.0, ge=0, description="Growth over the baseline allowed, as a fraction (0.05 = 5%).")

    def options(self, keys: tuple[str, ...]) -> dict[str, object]:
        """The given option keys this scenario sets."""
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    @property
    def uses_plan(self) -> bool:
        return bool(self.options(PLAN_KEYS + PLAN_BUDGETS))

    @property
    def uses_disagg(self) -> bool:
        """A disagg scenario (``kvplan disagg``): it sets the rate, lengths or targets, or a disagg budget."""
        return bool(self.options(DISAGG_KEYS + DISAGG_BUDGETS))


class CheckConfig(BaseModel):
    """``kvplan.toml`` (or ``[tool.kvplan]`` in pyproject.toml)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, title="kvplan check configuration")
    baseline: Annotated[str, AfterValidator(_relative_path)] = Field(
        DEFAULT_BASELINE, min_length=1, max_length=1024,
        description="The baseline file, relative to this file and inside its repository.")
    scenarios: list[Scenario] = Field(min_length=1)


@dataclass(frozen=True)
class LoadedConfig:
    path: Path
    config: CheckConfig
    lines: list[ScenarioLines]  # one per scenario, same order (empty list: inline tables, no positions)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def baseline_path(self) -> Path:
        return self.root / self.config.baseline

    def inputs(self) -> list[tuple[str, Path]]:
        """Every file `kvplan check` reads besides the baseline, each with what it is in words: the config, and each
        scenario's card path, hf_config (a file or a folder) and gpu_file (relative to the config). A bundled card's
        name is listed too: a file of that name beside the config would be read as the card."""
        out = [(f"the config {shown(self.path)}", self.path)]
        for i, s in enumerate(self.config.scenarios):
            for key in ("model", "hf_config", "gpu_file"):
                value = getattr(s, key)
                if value is not None:
                    out.append((f"the {key} of scenario {s.name!r} ({shown(self.path)}:{self.line(i, key)})",
                                self.root / value))
        return out

    def line(self, index: int, key: str | None = None) -> int:
        return _line(self.lines, index, key)


def _line(lines: list[ScenarioLines], index: int, key: str | None = None) -> int:
    return lines[index].of(key) if index < len(lines) else 1


def json_schema() -> dict:
    return CheckConfig.model_json_schema()


def find_config(explicit: str | None, cwd: Path) -> Path:
    """``--config PATH``, else ``kvplan.toml``, else a ``pyproject.toml`` with ``[tool.kvplan]``, in ``cwd``."""
    if explicit is not None:
        path = Path(explicit)
        if is_dir(path):
            raise KvplanError(f"--config: {shown(explicit)}: a directory; allowed: a TOML file "
                              f"({shown(path / CONFIG_FILE)}, or a pyproject.toml with [tool.kvplan])")
        if not os.path.lexists(path):
            raise KvplanError(f"--config: {shown(explicit)}: no such file")
        return path  # read_text names anything else that is wrong (a dangling link, a FIFO, no permission)
    if (cwd / CONFIG_FILE).is_file():
        return cwd / CONFIG_FILE
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject)[0].get("tool", {})
        if not isinstance(tool, dict):
            raise KvplanError(f"{pyproject}: tool: {clip(tool)} is not a table; allowed: [tool] tables")
        if "kvplan" in tool:
            return pyproject
    raise KvplanError(f"no {CONFIG_FILE} (nor [tool.kvplan] in pyproject.toml) in {cwd}; write one (docs/check.md) "
                      "or pass --config PATH")


def load_config(path: Path) -> LoadedConfig:
    data, text = _read_toml(path)
    table = "tool.kvplan" if path.name == "pyproject.toml" else ""
    if table:
        tool = data.get("tool", {})
        data = tool.get("kvplan") if isinstance(tool, dict) else None
        if data is None:
            raise KvplanError(f"{shown(path)}: no [tool.kvplan] table; add one (docs/check.md) or pass --config PATH")
        if not isinstance(data, dict):
            raise KvplanError(f"{shown(path)}:{key_line(text, 'kvplan')}: tool.kvplan: {clip(data)} is not a table; "
                              "allowed: a [tool.kvplan] table (baseline, [[tool.kvplan.scenarios]])")
    lines = scenario_lines(text, table)
    _check_top(path, text, data, table)
    raws = data.get("scenarios")
    if not isinstance(raws, list) or not raws or not all(isinstance(r, dict) for r in raws):
        raise KvplanError(f"{shown(path)}: scenarios: give at least one [[{table + '.' if table else ''}scenarios]] table "
                          "(name, model, budgets)")
    lines = lines if len(lines) == len(raws) else []
    scenarios = [_scenario(path, lines, i, raw) for i, raw in enumerate(raws)]
    _check_unique(path, lines, scenarios)
    top = {k: v for k, v in data.items() if k != "scenarios"}
    try:
        config = CheckConfig.model_validate({**top, "scenarios": scenarios})
    except ValidationError as exc:
        raise KvplanError(f"{shown(path)}:{key_line(text, 'baseline')}: {_describe(exc, CheckConfig)}") \
            from None
    loaded = LoadedConfig(path, config, lines)
    where = _baseline_where(path, text, table, "baseline" in data)
    _check_inside(where, loaded)
    _check_own_file(where, loaded)
    return loaded


MAX_CONFIG_BYTES = 1 << 20


def _read_toml(path: Path) -> tuple[dict, str]:
    """The parsed TOML and its text: UTF-8, at most 1 MiB, nested at most MAX_DEPTH levels."""
    text = read_text(path, what="config", limit=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KvplanError(f"{shown(path)}: not valid TOML: {clip_text(str(exc), 200)}") from None
    except RecursionError:
        data = None
    except ValueError as exc:  # an integer beyond Python's 4,300-digit limit
        raise KvplanError(f"{shown(path)}: not valid TOML: {clip_text(str(exc), 80)}") from None
    if data is None or nesting_depth(data) > MAX_DEPTH:
        raise KvplanError(f"{shown(path)}: nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH}")
    return data, text


def repository_root(folder: Path) -> Path:
    """The nearest folder at or above ``folder`` holding ``.git``; ``folder`` itself when none does."""
    folder = folder.resolve()
    for parent in (folder, *folder.parents):
        if os.path.lexists(parent / ".git"):
            return parent
    return folder


def _baseline_where(path: Path, text: str, table: str, given: bool) -> str:
    """What a message about the baseline path starts with: the config's ``baseline`` line where it is set, else
    that the default is meant (there is no line to point at)."""
    if not given:
        return f"{shown(path)}: baseline (not set: the default {DEFAULT_BASELINE})"
    line = table_key_line(text, table, "baseline")
    return f"{shown(path)}{'' if line is None else f':{line}'}: baseline"


def _check_inside(where: str, loaded: LoadedConfig) -> None:
    """The baseline is written by --update-baseline: it may not leave the repository (``../../etc``, a symlink
    that points outside), nor sit in its ``.git`` folder (git's own files: objects, hooks, the index)."""
    baseline, root = loaded.baseline_path, repository_root(loaded.root)
    lexical = Path(os.path.normpath(_resolved(loaded.root) / loaded.config.baseline))  # no link followed
    try:
        resolved = baseline.resolve()
        inside = resolved.is_relative_to(root)
    except (OSError, RuntimeError, ValueError):  # a symlink loop
        raise KvplanError(f"{where}: {shown(baseline)} is a symbolic link loop; allowed: a regular file inside the "
                          f"repository {shown(root)}") from None
    if not inside:
        raise KvplanError(f"{where}: {_outside(baseline, lexical, resolved, root)}; allowed: a path inside it")
    if ".git" in resolved.relative_to(root).parts or ".git" in Path(loaded.config.baseline).parts:
        raise KvplanError(f"{where}: {shown(baseline)} is inside .git, git's own folder; allowed: a path in the "
                          "repository's work tree (kvplan-baseline.json beside kvplan.toml)")


def _outside(baseline: Path, lexical: Path, resolved: Path, root: Path) -> str:
    """Why the baseline is outside the repository, in words: the path itself, or a symbolic link on it."""
    if not lexical.is_relative_to(root):
        return f"{shown(baseline)} is outside the repository {shown(root)}"
    if os.path.islink(lexical):
        target = shown(os.readlink(lexical))
        state = "" if os.path.exists(lexical) else ", which does not exist (a dangling link)"
        return (f"{shown(baseline)} is a symbolic link to {target}{state}; it leads outside the repository "
                f"{shown(root)}")
    return (f"{shown(baseline)} leads through a symbolic link to {shown(resolved)}, outside the repository "
            f"{shown(root)}")


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.abspath(path))


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same inode where both exist (a hard link, another spelling, a
    case-insensitive file system), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return _resolved(a) == _resolved(b)


def _check_own_file(where: str, loaded: LoadedConfig) -> None:
    """--update-baseline replaces the baseline file whole: it may not be the config itself, a file by a config's name
    (kvplan.toml, pyproject.toml) or a file a scenario reads (a card, a config.json or its folder, a GPU file; a
    bundled card's name too, as a file of that name would be read as the card). QA B D1: the config was overwritten.
    ``.git`` and paths outside the repository: ``_check_inside``."""
    baseline = loaded.baseline_path
    if same_file(baseline, loaded.path):
        what = "the config file"
    elif baseline.name in (CONFIG_FILE, "pyproject.toml"):
        what = f"a {baseline.name} (a config file's name)"
    else:
        what = _read_by_a_scenario(baseline, loaded)
    if what:
        raise KvplanError(f"{where}: {shown(baseline)} is {what}, which --update-baseline would overwrite; allowed: a "
                          f"file of its own, such as {DEFAULT_BASELINE}")


def _read_by_a_scenario(baseline: Path, loaded: LoadedConfig) -> str:
    """What ``baseline`` is to the scenarios, in words ("" when none reads it)."""
    for source, path in loaded.inputs()[1:]:  # [0] is the config
        if is_dir(path) and _resolved(baseline).is_relative_to(_resolved(path)):  # an hf_config folder
            return f"inside {source}, a folder the scenarios read"
        if same_file(baseline, path):
            return f"{source}, a file the scenarios read"
    return ""


def _check_top(path: Path, text: str, data: dict, table: str) -> None:
    for key in data:
        if key not in CheckConfig.model_fields:
            raise KvplanError(f"{shown(path)}:{key_line(text, key)}: {key}: unknown key{_closest(key, CheckConfig)}")


def _closest(key: str, model: type[BaseModel]) -> str:
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f"; allowed: {', '.join(model.model_fields)}"


def _scenario(path: Path, lines: list[ScenarioLines], i: int, raw: dict) -> Scenario:
    name = raw.get("name")
    label = f"scenario {clip(name)}" if isinstance(name, str) and name else f"scenario #{i + 1}"
    where = f"{shown(path)}:{_line(lines, i)}: {label}"
    for key in raw:
        if key not in Scenario.model_fields:
            raise KvplanError(f"{shown(path)}:{_line(lines, i, key)}: {label}: {key}: unknown key{_closest(key, Scenario)}")
    if "name" not in raw:
        raise KvplanError(f"{where}: name: required (a unique name for the scenario)")
    if "model" not in raw and "hf_config" not in raw:
        raise KvplanError(f"{where}: model: required (a card path or bundled name; or hf_config = a config.json)")
    if "model" in raw and "hf_config" in raw:
        raise KvplanError(f"{shown(path)}:{_line(lines, i, 'hf_config')}: {label}: hf_config: give model or hf_config, "
                          "not both")
    values = dict(raw)
    for key in SIZE_KEYS:
        if key in values:
            values[key] = parse_size(f"{shown(path)}:{_line(lines, i, key)}: {label}: {key}", values[key])
    try:
        s = Scenario.model_validate(values)
    except ValidationError as exc:
        key = str(exc.errors()[0]["loc"][0])
        raise KvplanError(f"{shown(path)}:{_line(lines, i, key)}: {label}: "
                          f"{_describe(exc, Scenario)}") from None
    if s.uses_disagg:
        for key in (*DISAGG_KEYS, "gpu"):
            if getattr(s, key) is None:
                raise KvplanError(f"{where}: {key}: required by a disagg scenario (rate, isl, osl, ttft_ms, tpot_ms, "
                                  "gpu)")
    if s.uses_plan:
        given = next(k for k in PLAN_KEYS + PLAN_BUDGETS if getattr(s, k) is not None)
        for key in ("gpu", "max_model_len"):
            if getattr(s, key) is None:
                raise KvplanError(f"{where}: {key}: required by a capacity scenario (it sets {given}; `kvplan plan` "
                                  "needs gpu and max_model_len)")
    return s


def _describe(exc: ValidationError, model: type[BaseModel]) -> str:
    """kvplan's describer; a check of the config's own validators (one printable line, a path inside the
    repository) reads 'field: problem; allowed: ...'."""
    err = exc.errors(include_url=False)[0]
    if err["type"] == "value_error":
        loc = ".".join(str(p) for p in err["loc"])
        return f"{loc}: {str(err['msg']).removeprefix('Value error, ')}"
    return describe_validation_error(exc, model)


def _check_unique(path: Path, lines: list[ScenarioLines], scenarios: list[Scenario]) -> None:
    seen: set[str] = set()
    for i, s in enumerate(scenarios):
        if s.name in seen:
            raise KvplanError(f"{shown(path)}:{_line(lines, i, 'name')}: scenario {s.name!r}: name: used twice; "
                              "each scenario needs its own name")
        seen.add(s.name)
