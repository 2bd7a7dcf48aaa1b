"""The figures `kvplan check` computes for one scenario: from ``estimate`` (KV, weights, roofline) and, for the
capacity keys, from the capacity planner ``kvplan.planning.capacity.plan`` (``kvplan plan``) when this kvplan has it."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvplan.errors import DoesNotFit, KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card
from kvplan.planning.check.config import (BUDGET_KEYS, DISAGG_KEYS, ESTIMATE_KEYS, PLAN_KEYS, LoadedConfig,
                                          Scenario)

Value = int | float | bool
_CARD_SKIP = {"name", "source", "published_params"}


@dataclass(frozen=True)
class Figure:
    name: str
    unit: Literal["bytes", "ms", "count", "bool"]
    budget: str | None  # the scenario key that bounds it
    higher_is_better: bool = False
    kv: bool = False  # set by the card's KV layout: a budget failure points at num_kv_heads / num_layers


FIGURES = {f.name: f for f in (
    Figure("kv_bytes_per_token", "bytes", None, kv=True),
    Figure("kv_bytes", "bytes", "max_kv_bytes", kv=True),
    Figure("weights_bytes", "bytes", None),
    Figure("total_bytes", "bytes", "max_total_bytes"),
    Figure("ttft_ms", "ms", "max_ttft_ms"),
    Figure("tpot_ms", "ms", "max_tpot_ms"),
    Figure("gpu_bytes", "bytes", "max_gpu_bytes"),
    Figure("concurrency", "count", "min_concurrency", higher_is_better=True),
    Figure("fits", "bool", "fits", higher_is_better=True),
    Figure("kv_transfer_bytes", "bytes", "max_kv_transfer_bytes", kv=True),
    Figure("link_gb_per_s", "count", "max_link_gb_per_s"),
    Figure("disagg_gpus", "count", "max_gpus"),
)}
PLAN_FIGURES = ("gpu_bytes", "concurrency", "fits")  # from the capacity planner


@dataclass(frozen=True)
class Evaluated:
    """One scenario's figures, and what produced them: the options it set and the card's fields."""

    index: int
    scenario: Scenario
    figures: dict[str, Value]
    inputs: dict[str, object]
    card: dict[str, object]
    card_file: Path | None  # None for a bundled card or an hf_config: nothing in the project to point at
    unfit: str | None = None  # why the capacity plan does not fit in memory (the planner's refusal), if it does not


def evaluate(loaded: LoadedConfig, index: int) -> Evaluated:
    s = loaded.config.scenarios[index]
    where = f"{loaded.path}:{loaded.line(index)}: scenario {s.name!r}"
    try:
        card, card_file = _card(s, loaded.root)
        figures = _estimate_figures(s, card, loaded.root) if s.seq_len is not None else {}
        unfit = None
        if s.uses_plan:
            planned, unfit = _plan_figures(s, card, loaded.root)
            figures.update(planned)
        if s.uses_disagg:
            figures.update(_disagg_figures(s, card, loaded.root))
    except KvplanError as exc:
        message = _as_keys(str(exc))
        key = message.partition(":")[0].split("/")[0]  # a --flag/--no-flag pair: its key
        line = loaded.line(index, key if key in Scenario.model_fields else None)
        raise KvplanError(f"{loaded.path}:{line}: scenario {s.name!r}: {message}") from None
    if not figures:
        raise KvplanError(f"{where}: seq_len: required (the tokens each sequence holds), or the capacity keys "
                          f"({', '.join(PLAN_KEYS[:4])}, ...)")
    inputs = s.model_dump(exclude_none=True, exclude={"name", *BUDGET_KEYS})  # what sets the figures
    return Evaluated(index, s, figures, inputs, _card_fields(card), card_file, unfit)


def _options(s: Scenario, keys: tuple[str, ...], root: Path) -> dict[str, object]:
    """The scenario's options among ``keys``, a gpu_file made relative to the config (as a card path is)."""
    opts = s.options(keys)
    if "gpu_file" in opts:
        opts["gpu_file"] = str(root / opts["gpu_file"])
    return opts


def _as_keys(message: str) -> str:
    """Estimate's messages name flags (--kv-dtype); a config names keys (kv_dtype)."""
    return re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), message)


def _card(s: Scenario, root: Path) -> tuple[ModelCard, Path | None]:
    """The scenario's card; a file that cannot be read is named by its key (model, hf_config, and gpu_file, read
    here too), so the error points at that key's line, not at the scenario's header."""
    if s.gpu_file is not None:
        from kvplan.cost.hardware import load_gpus

        _keyed("gpu_file", load_gpus, str(root / s.gpu_file))
    if s.hf_config is not None:
        from kvplan.model.hf.config import card_from_hf_config

        return _keyed("hf_config", card_from_hf_config, str(root / s.hf_config)), None
    local = root / s.model
    if s.model.endswith((".yaml", ".yml")) or local.is_file():
        return _keyed("model", load_card, local), local
    return _keyed("model", load_card, s.model), None


def _keyed(key: str, read, *args):
    try:
        return read(*args)
    except KvplanError as exc:
        raise KvplanError(f"{key}: {exc}") from None


def _card_fields(card: ModelCard) -> dict[str, object]:
    """The fields the card sets, nested ones flattened by their own name (mla.kv_lora_rank -> kv_lora_rank)."""
    out: dict[str, object] = {}
    for key, value in card.model_dump(mode="json", exclude_unset=True, exclude=_CARD_SKIP).items():
        out.update(value if isinstance(value, dict) else {key: value})
    return out


def _estimate_figures(s: Scenario, card: ModelCard, root: Path) -> dict[str, Value]:
    from kvplan.planning.estimate import estimate

    opts = _options(s, ESTIMATE_KEYS, root)
    for key in ("max_ttft_ms", "max_tpot_ms"):
        if getattr(s, key) is not None and s.gpu is None:
            raise KvplanError(f"{key}: needs gpu = NAME (the roofline bounds run on a GPU of `kvplan gpus list`)")
    r = estimate(card, **opts)
    figures: dict[str, Value] = {"kv_bytes_per_token": r.kv_cache.bytes_per_token, "kv_bytes": r.kv_cache.total_bytes,
                                 "weights_bytes": r.weights.bytes, "total_bytes": r.total_bytes}
    if r.roofline is not None:
        figures["ttft_ms"] = r.roofline.time_to_first_token_one_request_s * 1e3
        figures["tpot_ms"] = r.roofline.time_per_output_token_s * 1e3
    return figures


def _plan_figures(s: Scenario, card: ModelCard, root: Path) -> tuple[dict[str, Value], str | None]:
    """The capacity figures of ``kvplan.planning.capacity.plan`` for the scenario's layout, and why it does not fit
    where the planner refuses the memory (``DoesNotFit``: fits false, no request served). A layout the engine
    refuses for another reason (a head count TP does not divide, an unknown GPU) stays bad input."""
    from kvplan.planning.capacity import plan

    opts = _options(s, ESTIMATE_KEYS + PLAN_KEYS, root)
    from kvplan.cost.runtimes.setup import EXTRA_FLAGS  # the engines' own flags plan() takes as keywords

    accepted = set(inspect.signature(plan).parameters) | set(EXTRA_FLAGS)
    refused = [k for k in opts if k not in accepted]
    if refused:
        raise KvplanError(f"{refused[0]}: not an option of the capacity planner; allowed with tp/pp/max_model_len: "
                          f"{', '.join(k for k in ESTIMATE_KEYS + PLAN_KEYS if k in accepted)}")
    try:
        result = plan(card, **opts)
    except DoesNotFit as exc:  # the memory leaves nothing for the cache: the plan does not fit (a failed check)
        held = {} if exc.gpu_bytes is None else {"gpu_bytes": exc.gpu_bytes}
        return {**held, "concurrency": 0, "fits": False}, _as_keys(str(exc))
    return {"gpu_bytes": gpu_bytes(result.per_gpu), "concurrency": result.max_concurrency,
            "fits": bool(result.fits)}, None


def _disagg_figures(s: Scenario, card: ModelCard, root: Path) -> dict[str, Value]:
    """The hand-over, the link it needs and the GPUs of both pools, from ``kvplan.planning.disagg.disagg``."""
    from kvplan.planning.disagg import disagg

    missing = [k for k in (*DISAGG_KEYS, "gpu") if getattr(s, k) is None]
    if missing:
        raise KvplanError(f"{missing[0]}: required by a disagg scenario (rate, isl, osl, ttft_ms, tpot_ms, gpu)")
    opts = _options(s, ("engine", "kv_dtype", "weight_dtype", "gpu_file"), root)
    r = disagg(card, gpu=s.gpu, **s.options(DISAGG_KEYS), **opts)
    return {"kv_transfer_bytes": r.kv_transfer_bytes_per_request, "link_gb_per_s": r.link_bytes_per_s_needed / 1e9,
            "disagg_gpus": r.total_gpus}


def gpu_bytes(g) -> int:
    """What one GPU holds besides its KV pool (which the engine sizes to fill the rest): weights, the activation
    peak, non-torch and CUDA-graph overheads, and the CUDA context."""
    return g.weights_bytes + g.activation_bytes + g.overhead_bytes + g.context_bytes
