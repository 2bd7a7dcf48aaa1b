"""Tiny random-weight transformers models, what their caches hold and the FLOPs torch counts in them, shared by the
cache and FLOP test files (their case tables: tests/cases.py).

Import it only after ``pytest.importorskip("torch")`` and ``pytest.importorskip("transformers")``."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.minimax.modeling_minimax import MiniMaxCache

from kvplan import count_params, estimate
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes import get_engine
from kvplan.cost.flops import decode_step_flops, prefill_flops
from kvplan.cost.kvspec import layer_specs, state_specs
from kvplan.model.dtypes import parse_dtype
from kvplan.model.hf.config import card_from_hf_config

# (batch, prompt, decode steps): shorter and longer than d_conv; RecurrentGemma's window 3 at W-1, W, W+1 and beyond
HYBRID_LENGTHS = [(1, 2, 1), (2, 3, 1), (2, 4, 1), (1, 5, 4), (2, 2, 6)]
MAMBA_ONLY = {"mamba", "falcon_mamba", "mamba2"}  # these take the cache as cache_params


def case(cases: list, name: str) -> tuple[str, dict]:
    """(model_type, config kwargs) of the case named ``name`` in a list of (name, model_type, kwargs)."""
    return next(c[1:] for c in cases if c[0] == name)


def case_card(cases: list, name: str, **extra):
    """kvplan's card of a named case, from its transformers config (no model built)."""
    model_type, kwargs = case(cases, name)
    return card_from_hf_config(transformers.AutoConfig.for_model(model_type, **kwargs, **extra).to_dict())


def build_model(model_type: str, kwargs: dict, dtype=torch.float32):
    """(config, eval model) with seeded random weights and eager attention."""
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    cfg._attn_implementation = "eager"
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()


def new_cache(cfg):
    """The cache the model runs with: MiniMax refuses any but its own MiniMaxCache."""
    return MiniMaxCache() if cfg.model_type == "minimax" else transformers.DynamicCache(config=cfg)


def generate(model, cache, batch: int, prompt: int, steps: int):
    """A random prompt, then ``steps - 1`` greedy decode steps, all through ``cache``; returns the cache."""
    key = "cache_params" if model.config.model_type in MAMBA_ONLY else "past_key_values"
    ids = torch.randint(0, 128, (batch, prompt))
    with torch.no_grad():
        out = model(ids, **{key: cache}, use_cache=True)
        for _ in range(steps - 1):
            out = model(out.logits[:, -1:].argmax(-1), **{key: cache}, use_cache=True)
    return cache


def tensor_bytes(obj, seen: set) -> int:
    """Bytes of every distinct tensor storage reachable from ``obj`` (attributes, dicts, lists, tuples)."""
    if isinstance(obj, torch.Tensor):
        ptr = obj.untyped_storage().data_ptr()
        if ptr in seen:
            return 0
        seen.add(ptr)
        return obj.untyped_storage().nbytes()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return sum(tensor_bytes(v, seen) for v in vars(obj).values())
    return 0


def measured(cache) -> tuple[list[int], int]:
    """(bytes each cache layer holds, bytes the whole cache object holds)."""
    return [tensor_bytes(layer, set()) for layer in cache.layers], tensor_bytes(cache, set())


def _recurrent_gemma_layers(cache, model) -> list[int]:
    # its local-attention layers as the project counts a sliding DynamicCache layer (tests/test_hf_import.py):
    # the W-1 positions kept, not the W-position storage their view pins, nor the int64 window scalar
    held = [sum(t.numel() * t.element_size() for t in (layer.keys, layer.values))
            if hasattr(layer, "_sliding_window_tensor") else tensor_bytes(layer, set()) for layer in cache.layers]
    on_model = [tensor_bytes([getattr(b, "conv1d_state", None),
                              getattr(getattr(b, "rg_lru", None), "recurrent_states", None)], set())
                for b in (layer.temporal_block for layer in model.model.layers)]
    return [a + b for a, b in zip(held, on_model)]


def measured_layers(cache, layers: int, model=None) -> tuple[list[int], int]:
    """(bytes per decoder layer, bytes of the whole cache object and of the states held outside it). MiniMaxCache
    keeps each lightning layer's state in ``linear_cache[i]``, beside ``layers`` (which then holds only the attention
    layers' K/V, lazily); RecurrentGemma keeps its RG-LRU states on the model's modules."""
    if model is not None and model.config.model_type == "recurrent_gemma":
        per_layer = _recurrent_gemma_layers(cache, model)
        return per_layer, sum(per_layer)
    if not hasattr(cache, "linear_cache"):
        return measured(cache)
    per_layer = [(tensor_bytes(cache.layers[i], set()) if i < len(cache.layers) else 0)
                 + (tensor_bytes(cache.linear_cache[i], set()) if i < len(cache.linear_cache) else 0)
                 for i in range(layers)]
    return per_layer, tensor_bytes(cache, set())


def predicted(card, engine: str, kv: str, batch: int, seq_len: int, max_cache_len: int | None = None) -> list[int]:
    """kvplan's bytes per decoder layer: K/V; the states (2; 1 for a short conv); both (hybrid); nothing (mlp)."""
    eng, run = get_engine(engine), CacheRun(seq_len, 0, max_cache_len)
    specs = iter(layer_specs(card, parse_dtype(kv), eng))
    states = len(state_specs(card, parse_dtype(kv), eng.transformers)) if card.ssm else 0
    per_layer = []
    for i in range(card.num_layers):
        count = {"attention": 1, "mamba": states, "hybrid": 1 + states, None: 0}[card.mixer(i)]
        layer = [next(specs) for _ in range(count)]
        per_layer.append(sum(batch * s.positions_held(eng, run) * s.bytes_per_token for s in layer))
    assert next(specs, None) is None
    return per_layer


def check_dynamic_cache(model_type: str, kwargs: dict, lengths: list) -> None:
    """Exact parameter count of the built model, and per-layer and whole DynamicCache bytes after each (batch,
    prompt, decode steps) in ``lengths``, against kvplan's hf-dynamic estimate in fp32."""
    cfg, model = build_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    assert count_params(card).total == sum(p.numel() for p in model.parameters())  # tied shared blocks once
    for batch, prompt, steps in lengths:
        cache = generate(model, new_cache(cfg), batch, prompt, steps)
        layers, whole = measured_layers(cache, card.num_layers, model)
        seq_len = prompt + steps - 1
        if model_type == "recurrent_gemma" and steps == 1:  # before the first decode step its conv state is a
            short = [batch * card.ssm.conv_dim * 4 * (card.mixer(i) == "mamba") for i in range(card.num_layers)]
            layers, whole = [n + s for n, s in zip(layers, short)], whole + sum(short)  # tensor of d_conv - 1
        assert layers == predicted(card, "hf-dynamic", "fp32", batch, seq_len), (batch, prompt, steps)
        est = estimate(card, batch=batch, seq_len=seq_len, engine="hf-dynamic", kv_dtype="fp32")
        assert est.kv_cache.total_bytes == whole == sum(layers)


def check_bf16_cache(model_type: str, kwargs: dict, prompt: int, steps: int):
    """A bf16 model's DynamicCache bytes, per layer and whole, against kvplan's hf-dynamic estimate (batch 2);
    returns (card, cache) for dtype checks."""
    cfg, model = build_model(model_type, kwargs, torch.bfloat16)
    card = card_from_hf_config({**cfg.to_dict(), "dtype": "bfloat16"})
    cache = generate(model, new_cache(cfg), 2, prompt, steps)
    seq_len = prompt + steps - 1
    layers, whole = measured_layers(cache, card.num_layers, model)
    assert layers == predicted(card, "hf-dynamic", "bf16", 2, seq_len)
    assert estimate(card, batch=2, seq_len=seq_len, engine="hf-dynamic").kv_cache.total_bytes == whole
    return card, cache


def check_static_cache(model_type: str, kwargs: dict, decode_steps: int = 0) -> None:
    """A StaticCache of 16 positions after a batch-2 prompt of 5 (and ``decode_steps`` one-token steps): per-layer
    and whole bytes against kvplan's hf-static estimate in fp32."""
    cfg, model = build_model(model_type, kwargs)
    card = card_from_hf_config(cfg.to_dict())
    cache = transformers.StaticCache(config=cfg, max_cache_len=16)
    with torch.no_grad():
        model(torch.randint(0, 128, (2, 5)), past_key_values=cache, use_cache=True, cache_position=torch.arange(5))
        for t in range(5, 5 + decode_steps):
            model(torch.randint(0, 128, (2, 1)), past_key_values=cache, use_cache=True,
                  cache_position=torch.arange(t, t + 1))
    layers, whole = measured(cache)
    # each static attention layer also keeps an int64 scalar, its cumulative_length counter: bookkeeping, not cache
    counters = [8 * (card.mixer(i) in ("attention", "hybrid")) for i in range(card.num_layers)]
    seq_len = 5 + decode_steps
    assert layers == [p + c for p, c in zip(predicted(card, "hf-static", "fp32", 2, seq_len, 16), counters)]
    est = estimate(card, batch=2, seq_len=seq_len, engine="hf-static", max_cache_len=16, kv_dtype="fp32")
    assert est.kv_cache.total_bytes == whole - sum(counters)


def dynamic_cache_test(cases: list, lengths: list):
    """A test, parametrized by case name, that runs check_dynamic_cache on every case; assign it to a test_* name."""

    @pytest.mark.parametrize(("model_type", "kwargs"), [c[1:] for c in cases], ids=[c[0] for c in cases])
    def test(model_type, kwargs):
        check_dynamic_cache(model_type, kwargs, lengths)

    return test


def check_config_defaults(defaults_by_type: dict) -> None:
    """Every default kvplan assumes for a model type is transformers' own: the config class field's default or the
    value a config built with no arguments holds (a __post_init__ default)."""
    for model_type, defaults in defaults_by_type.items():
        cls = transformers.CONFIG_MAPPING[model_type]
        fields, built = {f.name: f.default for f in dataclasses.fields(cls)}, cls()
        for key, value in defaults.items():
            assert value in (fields[key], getattr(built, key)), (model_type, key)


def full_size_card(config: dict):
    """kvplan's card of a checkpoint's config.json, after checking that the transformers config built from that
    config.json imports to the same card."""
    card = card_from_hf_config(config)
    built = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "_name_or_path"}).to_dict()
    skip = {"name", "source"}
    assert card_from_hf_config(built).model_dump(exclude=skip) == card.model_dump(exclude=skip)
    return card


# K/V caches of attention models (tests/test_hf_import*.py)
KV_BATCH = 2


def build_kv_model(model_type: str, kwargs: dict):
    """(config, eval model) with seeded random weights and eager attention; T5 as T5ForConditionalGeneration."""
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    cfg._attn_implementation = "eager"
    if model_type == "t5":
        return cfg, transformers.T5ForConditionalGeneration(cfg).eval()
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg).eval()


def kv_layer_bytes(cache) -> list[int]:
    """Bytes of the K and V tensors each layer of a transformers cache holds (T5: self layers, then cross)."""
    if hasattr(cache, "self_attention_cache"):
        return kv_layer_bytes(cache.self_attention_cache) + kv_layer_bytes(cache.cross_attention_cache)
    return [sum(t.numel() * t.element_size() for t in (layer.keys, layer.values)) for layer in cache.layers]


def predicted_kv_layer_bytes(card, engine: str, seq_len: int, max_cache_len: int = 0,
                             encoder_len: int = 0) -> list[int]:
    """kvplan's fp32 bytes per cache layer for KV_BATCH sequences."""
    run, eng = CacheRun(seq_len, encoder_len, max_cache_len), get_engine(engine)
    specs = layer_specs(card, parse_dtype("fp32"), eng)
    return [KV_BATCH * s.positions_held(eng, run) * s.bytes_per_token for s in specs]


# FLOPs as torch's FlopCounterMode counts them (tests/test_flops*.py)
FLOP_BATCH = 2  # batch of the state-layer FLOP checks
MIXER_MODULE = re.compile(r"layers\.(\d+)\.(mixer|mamba|linear_attn|conv|self_attn|temporal_block)$")


def count_flops(fn) -> tuple[int, int, int]:
    """(all matmul FLOPs, bmm FLOPs = attention core, LM head FLOPs) of fn() as FlopCounterMode sees them."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    counts = counter.get_flop_counts()
    lm_head = sum(v for k, ops in counts.items() if k.endswith(".lm_head") for v in ops.values())
    return counter.get_total_flops(), counts["Global"].get(torch.ops.aten.bmm, 0), lm_head


def build_flop_model(model_type: str, kwargs: dict):
    """(config, eval model) with seeded random weights, eager attention and eager experts."""
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    # eager experts: the grouped_mm default is not counted by FlopCounterMode (tests/test_flops.py)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                          experts_implementation="eager").eval()
    return cfg, model


def count_state_flops(fn, card) -> tuple[int, int]:
    """(all FLOPs, FLOPs inside the state layers' mixer modules) of fn() as FlopCounterMode sees them."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    mixers = 0
    for name, ops in counter.get_flop_counts().items():
        m = MIXER_MODULE.search(name)
        if m and card.mixer(int(m.group(1))) in ("mamba", "hybrid") and (m.group(2) != "self_attn"
                                                                        or card.ssm.kind in ("lightning", "kda")):
            mixers += sum(ops.values())
    return counter.get_total_flops(), mixers


def measure_state_flops(model_type: str, cfg, model, card, prompt: int):
    """count_state_flops of a FLOP_BATCH prefill of ``prompt`` tokens into a fresh cache, then of one decode step."""
    key = "cache_params" if model_type in MAMBA_ONLY else "past_key_values"
    cache = new_cache(cfg)
    ids = torch.randint(0, 128, (FLOP_BATCH, prompt + 1))
    pre = count_state_flops(lambda: model(ids[:, :prompt], **{key: cache}, use_cache=True), card)
    dec = count_state_flops(lambda: model(ids[:, prompt:], **{key: cache}, use_cache=True), card)
    return pre, dec


def predicted_state_flops(card, prompt: int):
    """kvplan's (total, state mixer) FLOPs of the same prefill and decode step on hf-dynamic."""
    pre = prefill_flops(card, batch=FLOP_BATCH, prompt_len=prompt, engine=get_engine("hf-dynamic"))
    dec = decode_step_flops(card, batch=FLOP_BATCH, cache_len=prompt, engine=get_engine("hf-dynamic"))
    return (pre.total, pre.state_mixer), (dec.total, dec.state_mixer)
