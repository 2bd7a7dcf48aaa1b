"""``kvplan plan --from-log FILE``: a real start-up log's figures beside kvplan's, from the launch flags alone and from
the logged pool; ``--calibrate``: the log's measured overheads reused for what-ifs (kvplan.planning.capacity.calibrate).

The log is read by ``kvplan.planning.capacity.logparse``; this module turns what it found into ``kvplan.plan`` arguments (the
model through the bundled cards' ``source`` ids, the GPU, the engine version, the flags), runs the plans, and judges
each stated figure: exact, within the log's rounding, or off by x%.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from kvplan.errors import KvplanError, Refused
from kvplan.units import require_positive
from kvplan.planning.capacity.calibrate import Calibration, summary_peak_holds_graphs
from kvplan.planning.capacity.results import PlanResult
from kvplan.planning.capacity.logparse import FIGURES, GIB, Figure, ParsedLog, parse_log, with_graph_estimate
from kvplan.planning.capacity.verdicts import Verdict, judge, value_of  # noqa: F401 - judge: part of this API
from kvplan.planning.results import RESULT

FROMLOG_SCHEMA_VERSION = 1

class Row(BaseModel):
    """One figure the log states, kvplan's two predictions and their verdicts."""

    model_config = RESULT
    figure: str  # a key of logparse.FIGURES
    what: str
    unit: str
    logged: Figure
    flags_alone: float | None  # kvplan from the launch flags alone
    flags_verdict: Verdict
    flags_error_pct: float | None
    logged_pool: float | None  # kvplan given the logged pool (None: the figure is the pool itself, or not given)
    pool_low: float | None  # the logged pool at the low and high end of its printed rounding
    pool_high: float | None
    pool_verdict: Verdict | None
    pool_error_pct: float | None


class FromLog(BaseModel):
    model_config = RESULT
    schema_version: int = FROMLOG_SCHEMA_VERSION
    log: ParsedLog
    model: str  # the card used
    model_how: str  # how the card was found
    gpu: str
    gpu_memory_bytes: int  # the total the plans start from
    gpu_how: str
    engine: str  # the --engine spec used, e.g. vllm==0.10
    plan_args: dict[str, int | float | str | bool]  # what kvplan.plan was given (the launch flags alone)
    logged_pool_bytes: int | None  # the pool handed to the second column
    rows: list[Row]
    plan: PlanResult  # from the launch flags alone
    pooled: PlanResult | None  # from the logged pool
    calibration: Calibration | None
    notes: list[str]


def from_log(path: str | Path, *, model=None, gpu: str | None = None, gpu_memory: int | str | None = None,
             engine: str | None = None, calibrate: bool = False, platform: str | None = None, **flags) -> FromLog:
    """Read ``path`` and compare kvplan with every figure it states. ``model`` (a card or its name), ``gpu``,
    ``gpu_memory``, ``engine`` and ``flags`` (kvplan.plan keywords: tp, max_model_len, kv_dtype, ...) override what
    the log says; with ``calibrate`` the flags that differ from the log's are what-ifs on its measured overheads."""
    from kvplan.planning.capacity import plan

    log = _with_platform(parse_log(path), platform)
    card, model_how = _card(log, model)
    notes: list[str] = _read_notes(log)
    spec, modelled = _engine(log, engine, notes)
    g, total, gpu_how = _gpu(log, gpu, gpu_memory)
    if calibrate and (gpu is not None or gpu_memory is not None):
        logged_gpu, logged_total, _ = _gpu(log, None, None)
        if (g, total) != (logged_gpu, logged_total):
            flag = "--gpu" if gpu is not None and g != logged_gpu else "--gpu-memory"
            raise KvplanError(f"{flag}: --calibrate reuses the overheads {log.path} measured on its own GPU "
                              f"({logged_gpu}); another GPU is not a what-if it scales: plan it without --calibrate")
    given = {k: v for k, v in flags.items() if v is not None}
    for key in ("tp", "pp", "dp"):  # checked before --calibrate compares GPU counts with them
        if key in given:
            require_positive(f"--{key}", given[key])
    base = _plan_args(log, card, notes, say_length=calibrate or "max_model_len" not in given)
    args = {**base, **({} if calibrate else given)}
    kw = dict(gpu=g, gpu_memory=total, engine=spec, **args, **_platform_kw(log))
    # the log's own deployment where the command line changes what it states (model, engine, GPU, a flag): those
    # rows are another deployment's, not scored against the log (--calibrate: what-ifs, or refused)
    own, changed = _own_deployment(log, card, base, given, (g, total, spec), (model, engine, gpu, gpu_memory),
                                   calibrate, notes)
    refused = None
    try:
        typed = {**given, **{k: v for k, v in (('engine', engine), ('gpu', gpu), ('gpu_memory', gpu_memory),
                                              ('model', model)) if v is not None}}
        flat = _from_the_log(log, typed, lambda: plan(card, **kw))
    except Refused as exc:  # the budget leaves nothing for the cache: right when the log's own pool is negative
        stated = log.figure("available")
        if stated is None or stated.value > 0:
            raise
        refused = str(exc)
        notes.append(f"kvplan refuses this deployment from its flags, as the engine did (the log's available KV cache "
                     f"memory is {stated.text} GiB): {refused}; the other figures are planned with a nominal pool"
                     + ("" if calibrate else _FAILED_HINT))
        flat = _pool_plan(card, {**kw, "kv_cache_memory": "1GiB"})
    pool_kw, pool_bytes, spread = (_pool_args(log, flat, kw) if refused is None
                                   else (None, log.figure("available").bytes, 0.0))
    if refused is None and pool_bytes is not None and pool_bytes <= 0:  # the engine stopped: "No available memory
        stated = log.figure("available")  # for the cache blocks"; kvplan's plan from the flags did not
        notes.append(f"The log's pool is {stated.text} GiB (line {stated.line}): the engine refused to start, so "
                     f"nothing is planned from it{'' if calibrate else _FAILED_HINT}")
    log = with_graph_estimate(log, flat.inputs.gpu_memory_bytes)
    pooled = None if pool_kw is None else _pool_plan(card, pool_kw)
    ends = [] if pool_kw is None or not spread else [_pool_plan(card, {**pool_kw, **_shift(pool_kw, d)})
                                                     for d in (-spread, spread)]
    rows = [_row(f, flat, pooled, ends, pool_bytes is not None, summary_peak_holds_graphs(f, spec))
            for f in _stated(log)]
    if "stand-in" in (log.gpu_header or "") and not gpu and not gpu_memory and not log.gpu_memory_header:
        # `# gpu: X (stand-in: ...)` without `# gpu-memory:`: the total is not known (with it, X lends only its
        # name and compute capability, as the nearest-in-memory stand-in does)
        rows = [r.model_copy(update=dict(flags_alone=None, flags_verdict="GPU unknown", flags_error_pct=None))
                if r.figure not in ("weights", "load_usage") else r for r in rows]
    if refused is not None:  # the pool's own figures: both refuse
        rows = [r.model_copy(update=dict(flags_alone=None, flags_verdict="refused, as logged", flags_error_pct=None))
                if r.figure in ("available", "blocks", "tokens", "concurrency") else r for r in rows]
    if changed:
        rows = _not_comparable(log, rows, own, (flat, pooled))
    cal = None
    if calibrate:
        from kvplan.planning.capacity.calibrate import calibrated

        cal = calibrated(log, card, kw, flat, pool_bytes, {k: v for k, v in given.items() if base.get(k) != v},
                         modelled, rows)
    if model is None:  # the log's deployment (no --model): the checkpoint it launched
        flat, pooled = (_own_checkpoint(log, card, r) for r in (flat, pooled))
        if cal is not None and cal.plan is not None:
            cal = cal.model_copy(update={"plan": _own_checkpoint(log, card, cal.plan)})
    if refused is not None:  # the plan's pool is a nominal 1 GiB: no line launches it, nothing of it is served
        flat = flat.model_copy(update={
            "launch_command": None, "fits": False, "max_concurrency": 0.0, "max_concurrency_total": 0.0,
            "max_model_len_fit": 0,
            "max_running": 0.0, "verdict": f"refused, as the engine did: {refused}",
            "notes": [f"Refused from the flags: the pool figures (kv_cache, ranks) are of a nominal 1 GiB pool that sizes "
                      "the other figures (weights, activations), not a deployment; no launch line.", *flat.notes]})
    return FromLog(log=log, model=card.name, model_how=model_how, gpu=g, gpu_memory_bytes=flat.inputs.gpu_memory_bytes,
                   gpu_how=gpu_how, engine=spec, plan_args={k: v for k, v in args.items() if v is not None},
                   logged_pool_bytes=pool_bytes, rows=rows, plan=flat, pooled=pooled, calibration=cal, notes=notes)


def _own_checkpoint(log: ParsedLog, card, result: PlanResult | None) -> PlanResult | None:
    """``result`` with its launch line naming the checkpoint the log launched (``log.model_id``, e.g.
    Qwen/Qwen3-8B-FP8 or a local folder) where the card was matched to it through another repo (the card's source,
    Qwen/Qwen3-8B); a pre-quantized checkpoint (a quantization suffix) then loads its own quantization from its
    config, so the online fp8 flag the plan added for it (--quantization fp8 on the base repo) is dropped."""
    import shlex

    from kvplan.cost.runtimes import get_engine
    from kvplan.model.origin import hf_repo, revision

    if result is None or result.launch_command is None or not log.model_id:
        return result
    repo = hf_repo(card)
    words = result.launch_command.split(" ")
    if log.model_id == repo or repo not in words:
        return result
    words = [shlex.quote(log.model_id) if w == repo else w for w in words]
    line = " ".join(words)
    if revision(card):  # the card's pinned commit is its own repo's, not the launched checkpoint's
        line = line.replace(f" --revision {revision(card)}", "", 1)
    flag = getattr(get_engine(result.inputs.engine), "online_fp8_flag", None)
    if flag and _quant_suffix(log.model_id) and card.quantization is None:
        line = line.replace(f" {flag}", "", 1)
    return result.model_copy(update={"launch_command": line})


# launch flags an engine's full argument line (vLLM's non-default args, SGLang's ServerArgs) states by leaving them out
_LAUNCH_FLAGS = ("tp", "pp", "dp", "max_model_len", "gpu_memory_utilization", "mem_fraction_static",
                 "max_num_batched_tokens", "max_num_seqs", "block_size", "kv_dtype", "weight_dtype", "expert_parallel",
                 "cpu_offload_gb")


def _own_deployment(log: ParsedLog, card, base: dict, given: dict, used: tuple, asked: tuple, calibrate: bool,
                    notes: list[str]) -> tuple[tuple | None, list[str]]:
    """((the log's card, plan arguments) where the command line changes a value the log states; None where that
    deployment cannot be planned), [what changed]. A value the log does not state (no max_model_len line, no compile
    line, a flag left to its default where no argument line shows it) is taken as the log's and said so; with
    --calibrate another model or engine release is refused, as another GPU is."""
    model, engine, gpu, gpu_memory = asked
    g, total, spec = used
    changed, corrected = [], []
    own_card = card
    if model is not None:
        logged = _quietly(lambda: _card(log, None)[0])
        if logged is not None and logged.name != card.name:
            if calibrate:
                raise KvplanError(f"--model: --calibrate reuses the overheads {log.path} measured with "
                                  f"{logged.name}; another model is not a what-if it scales: plan it without "
                                  "--calibrate")
            changed.append(f"--model {card.name} (the log's {logged.name})")
            own_card = logged
    own_spec = spec
    if engine is not None:
        logged = _quietly(lambda: _engine(log, None, [])[0])
        if logged is not None and (log.version is not None or logged.split("==")[0] != engine.split("==")[0]):
            from kvplan.cost.runtimes import get_engine

            if get_engine(engine).rules_text != get_engine(logged).rules_text:
                if calibrate:
                    raise KvplanError(f"--engine: --calibrate reuses the overheads {log.path} measured with "
                                      f"{logged}; another engine or release is not a what-if it scales: plan it "
                                      "without --calibrate")
                changed.append(f"--engine {engine} (the log's {logged})")
                own_spec = logged
    own_gpu = (g, total)
    if gpu is not None or gpu_memory is not None:
        logged = _quietly(lambda: _gpu(log, None, None))
        if logged is not None and "stand-in" not in (log.gpu_header or "") and logged[:2] != (g, total):
            changed.append(f"--gpu {g} (the log's {logged[0]})" if gpu is not None and g != logged[0] else
                           f"--gpu-memory {gpu_memory} (the log's {logged[0]}, "
                           + (f"{logged[1]:,} B)" if isinstance(logged[1], int) else
                              f"{logged[1]})" if logged[1] else "the catalog's visible total)"))
            own_gpu = logged[:2]
    own_args = dict(base)
    for key, value in ({} if calibrate else given).items():
        stated = key in base and (key in log.flags or key == "weight_dtype") or (
            log.args_line is not None and key in _LAUNCH_FLAGS)
        if not stated:
            own_args[key] = value
            corrected.append(f"--{key.replace('_', '-')} {value}")
        elif base.get(key) != value:
            was = (f"the log's {base[key]}, from {_source(log, key)}" if key in base else
                   f"the log runs the engine's default: its argument line, line {log.args_line}, does not name it")
            changed.append(f"--{key.replace('_', '-')} {value} ({was})")
    if corrected:
        notes.append(f"{', '.join(corrected)}: the log does not state {'it' if len(corrected) == 1 else 'them'}; "
                     "taken as the log's deployment and scored against it.")
    if not changed:
        return None, []
    notes.append(f"{'; '.join(changed)}: the rows these change are another deployment than the log's and are not "
                 "scored (\"not comparable\"); --calibrate answers such what-ifs on the log's measured budget.")
    own = dict(gpu=own_gpu[0], gpu_memory=own_gpu[1], engine=own_spec, **own_args, **_platform_kw(log))
    return (own_card, own), changed


def _platform_kw(log: ParsedLog) -> dict:
    """--platform for the plans of ``log``: its stated OS where not Linux (the catalog's total)."""
    return {"platform": log.platform} if log.platform not in (None, "linux") else {}


def _quietly(run):
    """``run()``, or None where it fails: what the log alone names, when it names it."""
    try:
        return run()
    except KvplanError:
        return None


def _not_comparable(log: ParsedLog, rows: list[Row], own: tuple | None, plans: tuple) -> list[Row]:
    """Rows whose kvplan figure the command line's changes move (against the log's own deployment planned the same
    way): the verdict is "not comparable", no error; all rows where that deployment cannot be planned."""
    from kvplan.planning.capacity import plan

    flat, pooled = plans
    own_flat = own_pooled = None
    if own is not None:
        card, kw = own
        own_flat = _quietly(lambda: plan(card, **kw))
        pool_kw = None if own_flat is None else _pool_args(log, own_flat, kw)[0]
        own_pooled = None if pool_kw is None or pooled is None else _quietly(lambda: _pool_plan(card, pool_kw))

    def moved(name: str, now: PlanResult | None, then: PlanResult | None) -> bool:
        return now is not None and (then is None or value_of(name, now) != value_of(name, then))

    out = []
    for r in rows:
        update = {}
        if r.flags_verdict not in ("not predicted", "GPU unknown") and moved(r.figure, flat, own_flat):
            update.update(flags_verdict="not comparable", flags_error_pct=None)
        if r.pool_verdict is not None and moved(r.figure, pooled, own_pooled):
            update.update(pool_verdict="not comparable", pool_error_pct=None)
        out.append(r.model_copy(update=update) if update else r)
    return out


def _read_notes(log: ParsedLog) -> list[str]:
    """What of the file was read: its first MAX_LOG_BYTES, one start-up of several."""
    from kvplan.planning.capacity.logparse import MAX_LOG_BYTES

    out = []
    if log.size_bytes is not None:
        out.append(f"{log.path} has {log.size_bytes:,} bytes: its first {MAX_LOG_BYTES >> 20} MiB (lines 1-"
                   f"{log.last_line:,}) are read, where a server prints its start-up; a restart after them is not "
                   "seen (cut the file to it).")
    if log.unmodelled:
        from kvplan.planning.capacity.logparse import UNMODELLED_FLAGS

        said = "; ".join(f"--{k.replace('_', '-')} ({'the `# command:` header' if not n else f'line {n:,}'}): "
                         f"{UNMODELLED_FLAGS[k]}" for k, n in log.unmodelled.items())
        out.append(f"Launch flags kvplan does not model, which can move the memory left for the cache: {said}; the "
                   "figures from the flags alone leave them out.")
    if log.startups:
        lines = ", ".join(f"{n:,}" for n in log.startups)
        out.append(f"{log.path} holds {len(log.startups)} start-ups (from lines {lines}): the last that states a "
                   f"figure, from line {log.startup:,}, is read; cut the file to one start-up to read another.")
    return out


_FAILED_HINT = (" (--calibrate takes the logged pool as the measured budget: with --gpu-memory-utilization it says "
                "what would have fit)")


# ---- the inputs --------------------------------------------------------------------------------------------------

_QUANT_SUFFIX = re.compile(r"-(fp8(?:-dynamic)?|awq|gptq(?:-int[48])?|int[48]|w4a16|w8a8)$")
_VARIANT_SUFFIX = re.compile(r"-(instruct(?:-\d+)?|chat|it|base|hf|\d{4})$")
# --quantization / a checkpoint suffix -> the weight dtype kvplan sizes it in (cards without a quantization block)
_QUANT_DTYPES = {"fp8": "fp8_e4m3", "fp8-dynamic": "fp8_e4m3", "awq": "int4", "awq_marlin": "int4", "gptq": "int4",
                 "gptq_marlin": "int4", "gptq-int4": "int4", "int4": "int4", "w4a16": "int4", "gptq-int8": "int8",
                 "int8": "int8", "w8a8": "int8"}
_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}


def _card(log: ParsedLog, model):
    from kvplan.model.catalog import load_card
    from kvplan.model.card import ModelCard

    if isinstance(model, ModelCard):
        return model, "--model"
    if model:
        return load_card(model), "--model"
    if log.model_header:
        try:
            return _header_card(log), f"the `# model:` header ({log.model_header})"
        except KvplanError as exc:
            raise KvplanError(f"{log.path}:{log.header_lines.get('model', 1)}: `# model: {log.model_header}`: "
                              f"{exc}") from None
    if not log.model_id:
        raise KvplanError(f"{log.path}: no model found (no launch line, non-default args or V1 config line names "
                          "one); add a header line `# model: <bundled card name or card path>` or pass --model")
    from kvplan.planning.capacity.logparse import hub_id

    name = _bundled_by_source(hub_id(log.model_id))
    if name is None:
        raise KvplanError(f"{log.path}: model {log.model_id!r} is no bundled card (matched by the cards' source "
                          "Hub ids; `kvplan cards list`); add a header line `# model: <card name or path>` or pass "
                          "--model")
    return load_card(name), f"{log.model_id} -> {name} (the card's source Hub id)"


def _header_card(log: ParsedLog):
    """`# model:` as a bundled card name, a card or config path, or ``FILE.json#ORG/NAME``: one config of a file of
    vendored configs ({"configs": {id: config.json}}, as tests/data/hf_configs*.json)."""
    from kvplan.model.catalog import load_card

    text, _, key = log.model_header.partition("#")
    path = _near(log.path, text.strip())
    if not path.endswith(".json"):
        return load_card(path)
    from kvplan.model.hf.config import card_from_hf_config

    if not key:
        return card_from_hf_config(path)
    from kvplan.files import load_json

    data = load_json(path, what="configs")
    configs = data.get("configs", data) if isinstance(data, dict) else {}
    if key.strip() not in configs:
        raise KvplanError(f"{log.path}: `# model: {log.model_header}`: {text.strip()} holds no config {key.strip()!r}")
    return card_from_hf_config(configs[key.strip()])


def _near(log_path: str, text: str) -> str:
    """A relative `# model:` path as found beside the log, in a folder above it (docs/logs/x.log -> tests/data/...),
    in the working directory, or in kvplan's source tree (the bundled logs' configs, wherever the log was copied);
    a bare name (a bundled card) is kept unless a file beside the log has it."""
    from kvplan.files import is_dir, is_file

    p = Path(text)
    if p.is_absolute():
        return text
    here = Path(log_path).resolve().parent
    bases = [here] if "/" not in text else [here, *here.parents, Path.cwd(), Path(__file__).resolve().parents[3]]
    for base in bases:
        if is_file(base / p) or is_dir(base / p):
            return str(base / p)
    from kvplan.model.hf.checkpoint import parse_hub_id

    if "/" in text and p.suffix not in (".json", ".yaml", ".yml", ".gguf") and parse_hub_id(text) is not None:
        return text  # a Hugging Face Hub id (ORG/NAME)
    if "/" in text:
        raise KvplanError("no such card or config beside the log, in the folders above it, in the working directory "
                          "or in kvplan's source tree; allowed: a bundled card name (`kvplan cards list`), or a card "
                          "or config path (relative paths are read from the log's folder)")
    return text


def _stem(name: str) -> str:
    s = name.rstrip("/").split("/")[-1].lower().removeprefix("meta-")
    while (t := _VARIANT_SUFFIX.sub("", _QUANT_SUFFIX.sub("", s))) != s:
        s = t
    return s


def _bundled_by_source(model_id: str) -> str | None:
    """The bundled card whose source Hub id names ``model_id`` (a Hub id or a local folder named like one): the
    whole id first, then the name without its quantization and variant suffixes (-FP8, -AWQ, -Instruct, ...)."""
    from kvplan.model.catalog import bundled_names, load_card

    by_id, by_name, by_stem = {}, {}, {}
    for n in bundled_names():
        m = re.search(r"huggingface\.co/([^/\s]+/[^/\s]+)/", load_card(n).source or "")
        if m:
            by_id.setdefault(m.group(1).lower(), n)
            by_name.setdefault(m.group(1).split("/")[1].lower(), n)
            by_stem.setdefault(_stem(m.group(1)), n)
    key = model_id.lower().strip("/")
    return by_id.get(key) or by_name.get(key.split("/")[-1]) or by_stem.get(_stem(model_id))


def _log_engine(rt, spec: str, log: ParsedLog, notes: list[str]) -> str:
    """The engine spec to plan ``log`` with: ``spec``, or its V0 engine where the release had both and the log shows a
    line only V0 prints (vLLM 0.8 - 0.9.0: Runtime.log_engine), which a note names."""
    chosen = rt.log_engine(spec, log.v0_line is not None)
    if chosen != spec:
        notes.append(f"Line {log.v0_line} is printed by {log.engine}'s V0 engine: planned as --engine {chosen}.")
    return chosen


def _engine(log: ParsedLog, engine: str | None, notes: list[str]) -> tuple[str, bool]:
    """(``vllm==0.10`` from the version printed, whether that release is modelled); an unmodelled release runs on the
    oldest modelled range, and a log without a version on the newest, said so."""
    from kvplan.cost.runtimes import get_engine

    if engine:
        return _log_engine(get_engine(engine), engine, log, notes), True
    if log.version is None:
        notes.append(f"The log prints no {log.engine} version (add `# engine: {log.engine}==X.Y`): the newest "
                     "modelled rules are used.")
        return log.engine, False
    m = re.match(r"(\d+)\.(\d+)((?:\.\d+)?)", log.version)
    for spec in ([f"{log.engine}=={m.group(1)}.{m.group(2)}{m.group(3)}", f"{log.engine}=={m.group(1)}.{m.group(2)}"]
                 if m else [log.engine]):  # the release printed (SGLang's rules differ by patch), else its minor
        try:
            rt = get_engine(spec)
        except KvplanError:
            continue
        return _log_engine(rt, spec, log, notes), True
    else:
        oldest = get_engine(log.engine).versions[0]
        first = re.match(r"[\d.]+\d", oldest).group(0)
        notes.append(f"{log.engine} {log.version} is not modelled: the rules of {log.engine}=={oldest} (the oldest "
                     "modelled) are used; a figure whose rule changed between releases (vLLM V0's profile run over "
                     "max_model_len tokens, the printed token count, V0's 256-byte MLA entry padding) can differ "
                     "for that reason.")
        return f"{log.engine}=={first}", False


def _with_platform(log: ParsedLog, platform: str | None) -> ParsedLog:
    """--platform: the host OS of a log that states none (no `# platform:` header, no WSL line, no printed total),
    taken as the log's; refused where the log prints its total or states another OS."""
    from kvplan.cost.hardware import require_platform

    if platform is None:
        return log
    platform = require_platform(platform)
    if log.total_memory_gib is not None:
        raise KvplanError(f"--platform: {log.path} prints its GPU's total (line {log.total_memory_gib.line}), which "
                          "the plan starts from whatever the OS; allowed: no --platform with this log")
    if log.platform not in (None, platform):
        raise KvplanError(f"--platform {platform}: {log.path} states {log.platform} ({log.platform_how}); allowed: "
                          f"{log.platform}, or another log")
    return log.model_copy(update={"platform": platform, "platform_how": log.platform_how or "--platform"})


def _gpu(log: ParsedLog, gpu: str | None, gpu_memory) -> tuple[str, int | str | None, str]:
    """(catalog GPU, total per GPU, how): --gpu / `# gpu:`, else the catalog GPU whose visible total is the log's;
    the total is --gpu-memory / `# gpu-memory:`, else the one the log prints, else the catalog's for the log's
    platform (`# platform: windows` or vLLM's WSL line: ``GPU.on_platform``)."""
    from kvplan.cost.hardware import load_gpus

    logged = None if log.total_memory_gib is None else log.total_memory_gib.bytes
    total = gpu_memory or log.gpu_memory_header or logged
    how = ("--gpu-memory" if gpu_memory else "the `# gpu-memory:` header" if log.gpu_memory_header
           else f"the log's total ({log.total_memory_gib.text} GiB, line {log.total_memory_gib.line})" if logged
           else "the catalog's visible total")
    name = gpu or (log.gpu_header or "").split(" (stand-in")[0] or None
    if name and total is None and log.platform not in (None, "linux"):  # the catalog's total for that OS
        from kvplan.cost.hardware import load_gpu

        catalog = load_gpu(name)
        if catalog.windows_visible_memory_bytes is None:  # the log's GPU lacks one: its Linux total, said so
            total = catalog.engine_memory_bytes
            how = f"the catalog's visible total (Linux's: none is recorded for {log.platform}, {log.platform_how})"
        else:  # the plan takes it through --platform (PlanRequest.build: GPU.on_platform)
            how = f"the catalog's {log.platform} total ({log.platform_how})"
    if name:
        return name, total, f"{'--gpu' if gpu else 'the `# gpu:` header'}; total: {how}"
    if logged:
        # torch's totals of one model differ by a few MiB between boards (H200: 139.80 and 139.81 GiB logged): the
        # nearest catalog total within 0.1% names the GPU (H100 SXM and PCIe are 0.1% apart: a header decides)
        err, best = _nearest(load_gpus(), logged)
        if err <= 0.001:
            return best, total, f"the log's total matches {best}'s visible total; total: {how}"
    if log.gpu_memory_header:
        # a GPU the catalog lacks (the format's `# gpu-memory:` alone): the plan starts from that total; the catalog
        # GPU nearest in memory lends only what the total does not say (its name for the scheduler defaults, its
        # compute capability for the block size), said so
        from kvplan.units import parse_size

        best = _nearest(load_gpus(), parse_size("# gpu-memory", log.gpu_memory_header))[1]
        return best, total, f"not in the catalog: {best} (nearest in memory) stands in; total: {how}"
    raise KvplanError(f"{log.path}: no GPU: the log prints no total that matches a catalog GPU (`kvplan gpus list`); "
                      "add a header line `# gpu: <catalog GPU>` (and `# gpu-memory: <the total the log prints>` for "
                      "a GPU the catalog lacks) or pass --gpu")


def _nearest(gpus: dict, total: int) -> tuple[float, str]:
    """(relative distance, name) of the catalog GPU whose visible total is nearest ``total``."""
    return min((abs(g.engine_memory_bytes - total) / total, n) for n, g in gpus.items())


def _from_the_log(log: ParsedLog, given: dict, run):
    """``run()``; a value the log gave (not the command line) that the planner refuses is named with the log's path
    and where in it the value was read, so the reader knows which line to look at (the refusals otherwise name a
    flag nobody typed)."""
    try:
        return run()
    except KvplanError as exc:
        text = str(exc)
        flag = text.split(":", 1)[0]
        key = flag.lstrip("-").replace("-", "_")
        if flag.startswith("--") and key not in given and text.startswith(f"{flag}:"):
            raise type(exc)(f"{log.path}: {flag} (from {_source(log, key)}){text[len(flag):]}") from None
        raise


def _source(log: ParsedLog, key: str) -> str:
    """Where in the log a plan input was read: a `# ` header, a line, or a default the log does not state."""
    headers = {"gpu": "gpu", "engine": "engine", "gpu_memory": "gpu-memory", "model": "model"}
    if key in headers and headers[key] in log.header_lines:
        return f"the `# {headers[key]}:` header, line {log.header_lines[headers[key]]}"
    if key == "gpu_memory" and log.total_memory_gib is not None:
        return f"the total the log prints, line {log.total_memory_gib.line}"
    if key in log.flag_sources:
        line = log.flag_lines.get(key)
        if log.flag_sources[key] == "launch line" and line and line == log.header_lines.get("command"):
            return f"the `# command:` header, line {line}"
        return f"the log's {log.flag_sources[key]}" + (f", line {line}" if line else "")
    if key == "max_model_len":
        return "the model's max_position_embeddings: the log states no max_model_len"
    if key == "weight_dtype":
        return "the log's dtype or quantization"
    if key == "kv_dtype":
        return "the log's dtype (kv_cache_dtype auto follows it)"
    return "the log"


def _plan_args(log: ParsedLog, card, notes: list[str], say_length: bool) -> dict:
    f = dict(log.flags)
    if "max_model_len" not in f:
        # vLLM's and SGLang's default: the model's own length (vllm config _get_and_verify_max_len; SGLang
        # model_config.context_len from max_position_embeddings), rope scaling aside
        f["max_model_len"] = card.max_position_embeddings
        if say_length:
            notes.append(f"No max_model_len in the log: the engines' default, the model's max_position_embeddings "
                         f"({card.max_position_embeddings:,}), is used (--max-model-len to override).")
    dtype = f.pop("dtype", None)
    eager = f.pop("enforce_eager", False)
    quant = (log.quantization or "").lower() or _quant_suffix(log.model_id)
    weight = None
    if quant and card.quantization is None:
        weight = _QUANT_DTYPES.get(quant)
        if weight is None:
            notes.append(f"quantization {quant!r}: not modelled from a log; the card's dtype is used "
                         "(--weight-dtype to override).")
    elif dtype is not None and card.quantization is None:
        weight = _DTYPES.get(str(dtype).lower(), str(dtype))
    out = {k: v for k, v in f.items() if k != "dtype"}
    if dtype is not None and (weight is None or weight not in _DTYPES.values()) and "kv_dtype" not in f:
        # quantized weights: --dtype still sets the model's dtype, and kv_cache_dtype "auto" follows it (vLLM 0.11.0
        # v1/worker/gpu_model_runner.py GPUModelRunner.__init__: cache_dtype "auto" -> model_config.dtype;
        # SGLang 0.5.10 model_runner.py ModelRunner.configure_kv_cache_dtype: "auto" -> self.dtype), so the K/V are planned in
        # the log's dtype and the launch line carries it (--dtype float16 on a bf16 checkpoint's FP8 copy)
        out["kv_dtype"] = _DTYPES.get(str(dtype).lower(), str(dtype))
    if eager:  # --enforce-eager: no CUDA graphs captured, none charged
        out["cuda_graph_memory"] = 0
    if weight:
        out["weight_dtype"] = weight
    return out


def _quant_suffix(model_id: str | None) -> str | None:
    m = _QUANT_SUFFIX.search((model_id or "").rstrip("/").lower())
    return m.group(1) if m else None


# ---- the logged pool ---------------------------------------------------------------------------------------------

def _pool_args(log: ParsedLog, flat: PlanResult, kw: dict) -> tuple[dict | None, int | None, float]:
    """(plan arguments giving kvplan the logged pool, the pool in bytes, its printed rounding in GiB).

    vLLM: the logged available memory as ``kv_cache_memory`` (to the byte where the log prints
    "kv cache memory in use is N bytes"). SGLang, whose pool is measured free memory x mem_fraction_static less what
    the load took: the logged free memory at start as the GPU total (no context: it is after it) and the logged load
    usage beyond kvplan's weights as the load's overhead, so the pool is SGLang's own from its own figures."""
    avail = log.figure("available")
    weights = log.figure("load_usage")
    if log.free_at_start_gib is not None and weights is not None:
        usage = weights.bytes
        beyond = usage - flat.per_gpu.weights_bytes
        if beyond < 0:
            return None, None, 0.0
        # the fraction the flags resolved to stays: SGLang's default is a function of the GPU's total, not of the free
        # memory this column hands kvplan as the total
        args = {**kw, "gpu_memory": log.free_at_start_gib.bytes, "context_memory": 0,
                "non_torch_memory": beyond, "mem_fraction_static": flat.inputs.mem_fraction_static}
        return args, None, log.free_at_start_gib.rounding + weights.rounding
    if avail is None:
        return None, None, 0.0
    if avail.value <= 0:  # a failed start-up: the measured budget, no pool to plan from
        return None, avail.bytes, 0.0
    exact = log.exact_available_bytes
    if exact is not None and abs(exact / GIB - avail.value) > avail.rounding:  # another worker's: not this figure's
        exact = None
    pool = exact if exact is not None else avail.bytes
    spread = 0.0 if exact is not None else avail.rounding
    if flat.inputs.mem_fraction_static is not None:
        # a pool sized as (free x mem_fraction_static) - weights - the load's rest: the logged pool given as that rest
        rest = flat.per_gpu.requested_bytes - flat.per_gpu.weights_bytes - pool
        return ({**kw, "non_torch_memory": rest}, pool, spread) if rest >= 0 else (None, None, 0.0)
    return {**kw, "kv_cache_memory": pool}, pool, spread


def _pool_plan(card, kw: dict) -> PlanResult:
    """``plan(card, **kw)`` where ``kw``'s ``kv_cache_memory`` is kvplan's what-if (the log's pool, or a nominal one),
    not a launch flag: a release without vLLM's --kv-cache-memory-bytes (before 0.10.2) takes it too, and its plan
    then prints no launch command (plan's ``kv_cache_memory_what_if``)."""
    from kvplan.planning.capacity import plan

    return plan(card, **kw, kv_cache_memory_what_if="kv_cache_memory" in kw)


def _shift(pool_kw: dict, gib: float) -> dict:
    """The logged pool moved by ``gib``: the end of its printed rounding."""
    d = round(gib * GIB)
    if "kv_cache_memory" in pool_kw:
        return {"kv_cache_memory": pool_kw["kv_cache_memory"] + d}
    if "context_memory" in pool_kw:  # SGLang from its free memory at start
        return {"gpu_memory": pool_kw["gpu_memory"] + d}
    return {"non_torch_memory": max(0, pool_kw["non_torch_memory"] - d)}


# ---- the verdicts ------------------------------------------------------------------------------------------------

def _stated(log: ParsedLog) -> list[Figure]:
    seen, out = set(), []
    for f in log.figures:
        if f.name not in seen:
            seen.add(f.name)
            out.append(f)
    return out


def _row(f: Figure, flat: PlanResult, pooled: PlanResult | None, ends: list[PlanResult], pool_given: bool,
         summed: bool = False) -> Row:
    """``summed``: ``f`` is a summary peak holding the charged graph estimate (summary_peak_holds_graphs), compared
    with kvplan's peak + graphs."""
    what, unit = FIGURES[f.name]
    ours = value_of(f.name, flat)  # of a per-worker figure, the limiting rank's beside the log's smallest statement
    if summed:
        what, ours = f"{what} + the charged CUDA-graph estimate", ours + value_of("cuda_graph", flat)
    if f.kind == "utilization":
        what = f"{what} (the estimate charged: utilization advisory x total)"
    verdict, err = judge(f, ours)
    if f.name in ("cuda_graph", "cuda_graph_capture") and ours == 0 and f.value > 0:
        verdict, err = "outside the budget", None  # vLLM before 0.20 sizes the pool before capturing graphs
    pool_value = low = high = None
    pv = pe = None
    # the pool given to the second column is the logged one: its own row (and the overheads, not re-predicted
    # from it) compare nothing new, except SGLang's, whose pool the second column computes from free memory
    if pooled is not None and f.name not in ("weights", "load_usage", "activation", "non_torch", "cuda_graph",
                                             "cuda_graph_capture") and not (
            f.name == "available" and pool_given):
        pool_value = value_of(f.name, pooled)
        vals = [value_of(f.name, e) for e in ends]
        if vals and None not in vals and pool_value is not None:
            low, high = min(vals), max(vals)
        pv, pe = judge(f, pool_value, low, high)
    return Row(figure=f.name, what=what, unit=unit, logged=f, flags_alone=ours, flags_verdict=verdict,
               flags_error_pct=err, logged_pool=pool_value, pool_low=low, pool_high=high, pool_verdict=pv,
               pool_error_pct=pe)
