"""vLLM's serving features applied to a plan: speculative decoding (``--speculative-config``), prefix caching
(``--shared-prefix-len``) and LoRA slots (``--enable-lora --max-loras --max-lora-rank``). The arithmetic is in
``kvplan.cost.features``; this module is what ``kvplan.cost.runtimes.vllm`` calls at each step of a plan.

- Draft layers share the target's pool: v1/spec_decode/llm_base_proposer.py loads the draft into the same
  vllm_config, get_kv_cache_spec returns target + draft layers and they are grouped together ("All drafting layers
  should belong to the same kv cache group"), so bytes per block = (target + draft layers) x page.
- Draft weights load inside the same DeviceMemoryProfiler as the target's (gpu_model_runner.py load_model).
- LoRA slots are allocated at load (vllm/lora/model_manager.py _create_lora_modules), in "Model loading took".
- Prefix caching allocates nothing: hashed full blocks are shared (v1/core/kv_cache_manager.py).
"""

from __future__ import annotations

from kvplan.cost import features as ft
from kvplan.cost.runtimes.setup import ServingFlags, Setup, Stage
from kvplan.errors import KvplanError
from kvplan.units import fmt_bytes, fmt_int


def resolve_features(flags: ServingFlags, card, layout) -> dict:
    """The Options fields of vLLM's features, checked by flag."""
    spec = None
    if flags.speculative_config is not None:
        spec = ft.parse_speculative(flags.speculative_config, card)
        if layout.pp > 1 and spec.draft_layers:
            raise KvplanError("--speculative-config: with --pp > 1 the proposer's layers sit on the last stage; "
                              "not modelled (use --tp)")
    prefix = ft.shared_prefix(flags)
    return dict(speculative=spec, shared_prefix_len=prefix,
                lora=ft.resolve_lora(flags.enable_lora, flags.max_loras, flags.max_lora_rank))


def draft_layer_specs(s: Setup) -> list:
    """(layer index, specs) of the proposer's attention layers on one rank, numbered after the target's."""
    spec = s.opts.speculative
    if spec is None or not spec.draft_layers:
        return []
    from kvplan.cost.parallel import Layout, rank_layer_specs

    if spec.draft_card is not None:
        draft = [specs for _, specs in rank_layer_specs(spec.draft_card, s.kv_t, s.engine, Layout(tp=s.layout.tp), 0)
                 if specs]
    else:  # an EAGLE head or MTP module: full-attention layers with the target's K/V geometry
        target = [sp for _, specs in rank_layer_specs(s.card, s.kv_t, s.engine, Layout(tp=s.layout.tp), 0)
                  for sp in specs if not sp.per_sequence]
        full = next((sp for sp in target if sp.window is None), target[0])
        draft = [(full,)] * spec.draft_layers
    pages = {sp.page_size_bytes(s.block_size) for specs in draft for sp in specs}
    own = {sp.page_size_bytes(s.block_size) for _, specs in rank_layer_specs(
        s.card, s.kv_t, s.engine, type(s.layout)(tp=s.layout.tp), 0) for sp in specs if not sp.per_sequence}
    if pages - own:
        raise KvplanError("--speculative-config: the draft model's K/V page differs from the target's; vLLM then "
                          "uses UniformTypeKVCacheSpecs (num_blocks = available // the sum of per-layer pages), "
                          "not modelled yet")
    return [(s.card.num_layers + j, specs) for j, specs in enumerate(draft)]


def draft_weight_bytes(s: Setup) -> int:
    spec = s.opts.speculative
    if spec is None or not spec.draft_layers:
        return 0
    if spec.draft_card is not None:
        return ft.draft_model_weight_bytes(spec, s.w_t, s.layout)
    return ft.draft_head_weight_bytes(s.card, s.w_t, s.layout, spec)


def lora_bytes(s: Setup) -> int:
    """max_loras slots of max_lora_rank, A and B per wrapped layer and slice, in the model dtype (lora_dtype auto)."""
    if s.opts.lora is None:
        return 0
    per_slot = ft.lora_slot_elements(s.card, s.layout.tp, s.opts.lora.max_lora_rank)
    return s.opts.lora.max_loras * s.w_t.data_bytes(per_slot)


def with_features(s: Setup, st: Stage) -> Stage:
    """The stage with the draft's weights and K/V layers, and the LoRA slots, charged as vLLM loads them."""
    extra = draft_weight_bytes(s) + lora_bytes(s)
    draft = [sp for _, specs in draft_layer_specs(s) for sp in specs]
    if not extra and not draft:
        return st
    return s.charged(st, extra, weights=st.weights + extra, specs=[*st.specs, *draft])


def prefix_concurrency(s: Setup, blocks: int, per_request: int, groups: int) -> float:
    """Requests the pool holds, a shared prefix's full blocks held once (one KV cache group only)."""
    if not s.opts.shared_prefix_len:
        return blocks / per_request
    if groups > 1:
        raise KvplanError("--shared-prefix-len: prefix sharing over several KV cache groups (hybrid and sliding "
                          "models) is not modelled")
    return ft.concurrency_with_prefix(blocks, per_request,
                                      ft.shared_blocks(s.opts.shared_prefix_len, s.max_model_len, s.block_size))


def launch_flags(s: Setup) -> list[str]:
    out = []
    spec = s.opts.speculative
    if spec is not None:  # the JSON as given: every key, the ones kvplan does not model too
        import json
        import shlex

        config = spec.config or json.dumps({"method": spec.method, **({"model": spec.model} if spec.model else {}),
                                            "num_speculative_tokens": spec.k})
        out.append(f"--speculative-config {shlex.quote(config)}")
    if s.opts.lora is not None:
        out += ["--enable-lora", f"--max-loras {s.opts.lora.max_loras}", f"--max-lora-rank {s.opts.lora.max_lora_rank}"]
    return out


def notes(s: Setup, p) -> list[str]:
    out = []
    spec = s.opts.speculative
    if spec is not None:
        out.append(f"Speculative decoding ({spec}): {spec.draft_layers} draft attention layer(s) share the target's "
                   f"KV pool (one KV cache group, bytes per block {fmt_int(p.pool.bytes_per_block)}); draft weights "
                   f"{fmt_bytes(draft_weight_bytes(s))} per GPU"
                   + (" ESTIMATED from the target's layer shapes (the head's checkpoint is not read)"
                      if spec.draft_card is None and spec.draft_layers else "")
                   + f". Each running request holds up to {spec.k} lookahead slots: cdiv(min(L + {spec.k}, "
                   "max_model_len), block) blocks, so the concurrency at max_model_len is unchanged.")
    if s.opts.lora is not None:
        out.append(f"LoRA: {s.opts.lora.max_loras} slot(s) of rank {s.opts.lora.max_lora_rank} = "
                   f"{fmt_bytes(lora_bytes(s))} per GPU, allocated at load (counted with the weights): A and B per "
                   "wrapped q/k/v, o, gate/up and down projection (vllm/lora/layers create_lora_weights).")
    if s.opts.shared_prefix_len:
        shared = ft.shared_blocks(s.opts.shared_prefix_len, s.max_model_len, s.block_size)
        out.append(f"Prefix caching: a shared {fmt_int(s.opts.shared_prefix_len)}-token prefix is {fmt_int(shared)} "
                   f"full blocks held once (only full blocks are shared; a hit covers at most L - 1 tokens): "
                   f"concurrency = (blocks - {shared}) / (blocks per request - {shared}).")
    return out
