"""The strings a plan carries: the engine's launch command, the pasteable verdict line, and the notes."""

from __future__ import annotations

import re

from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.planning.capacity_engines import Pool, Setup, hybrid_alignment
from kvplan.model.card import ModelCard
from kvplan.units import fmt_bytes, fmt_int

_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "hf-static": "transformers StaticCache",
                 "hf-dynamic": "transformers DynamicCache", "ideal": "ideal"}
_KV_DTYPE_FLAG = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def launch_command(s: Setup) -> str:

    repo, lay = hf_repo(s.card), s.layout
    if s.engine.name == "vllm":
        cmd = [f"vllm serve {repo}", *_revision(s.card), f"--tensor-parallel-size {lay.tp}"]
        cmd += [f"--pipeline-parallel-size {lay.pp}"] if lay.pp > 1 else []
        cmd += [f"--data-parallel-size {lay.dp}"] if lay.dp > 1 else []
        cmd += ["--enable-expert-parallel"] if lay.expert_parallel else []
        cmd += [f"--max-model-len {s.max_model_len}"]
        cmd += ([f"--kv-cache-memory-bytes {s.kv_cache_memory}"] if s.kv_cache_memory is not None
                else [f"--gpu-memory-utilization {s.util}"])
        if s.block_size != vl.default_block_size(s.card, s.gpu.compute_capability) and not s.unified_block:
            cmd.append(f"--block-size {s.block_size}")
        cmd += _common_dtype_flags(s, "--kv-cache-dtype")
        return " ".join(cmd)
    if s.engine.name == "sglang":
        cmd = [f"python -m sglang.launch_server --model-path {repo}", *_revision(s.card), f"--tp-size {lay.tp}"]
        cmd += [f"--pp-size {lay.pp}"] if lay.pp > 1 else []
        cmd += [f"--dp-size {lay.dp}"] if lay.dp > 1 else []
        cmd += [f"--context-length {s.max_model_len}", f"--mem-fraction-static {s.mfs}"]
        cmd += [f"--page-size {s.block_size}"] if s.block_size != 1 else []
        cmd += _common_dtype_flags(s, "--kv-cache-dtype")
        return " ".join(cmd)
    if s.engine.name == "ideal":
        return "(ideal: no engine to launch; the lower bound any engine can reach)"
    impl = "static" if s.engine.static else "dynamic"
    return (f'AutoModelForCausalLM.from_pretrained("{repo}", dtype="auto", device_map="cuda").generate(..., '
            f'max_length={s.max_model_len}, cache_implementation="{impl}")')


def _common_dtype_flags(s: Setup, kv_flag: str) -> list[str]:
    flags = [f"{kv_flag} {_KV_DTYPE_FLAG[s.kv_t.name]}"] if s.kv_t.name in _KV_DTYPE_FLAG else []
    if s.w_t.name.startswith("fp8"):  # online fp8 for a 16-bit checkpoint; consistent with an fp8 checkpoint's config
        flags.append("--quantization fp8")
    if s.w_t.name in ("fp16", "fp32") and s.w_t.name != {"float16": "fp16", "float32": "fp32"}.get(s.card.dtype):
        flags.append(f"--dtype {'float16' if s.w_t.name == 'fp16' else 'float32'}")
    return flags


def verdict(s: Setup, p: Pool, concurrency: int | None = None) -> str:
    lay, L = s.layout, s.max_model_len
    where = f"{s.card.name} on {lay.gpus}x {s.gpu.name}, {_ENGINE_NAMES[s.engine.name]} TP {lay.tp}"
    where += f" PP {lay.pp}" if lay.pp > 1 else ""
    where += f" DP {lay.dp}" if lay.dp > 1 else ""
    where += f" EP {lay.tp * lay.dp}" if lay.expert_parallel else ""
    pool = f"KV pool {fmt_bytes(p.pool.available_bytes)} per GPU"
    if s.engine.name == "vllm":
        pool += f" ({fmt_int(p.pool.num_blocks)} blocks of {s.block_size})"
    elif s.engine.name == "sglang":
        pool += f" ({fmt_int(p.pool.tokens)} tokens)"
    total = p.concurrency * lay.dp
    if not p.fits:
        longest = f"the longest that fits is {fmt_int(p.max_model_len_fit)}" if p.max_model_len_fit else "none fits"
        return f"{where}: one {fmt_int(L)}-token request does NOT fit; {longest}; {pool}"
    target = ""
    if concurrency is not None:
        target = f"; target {fmt_int(concurrency)}: {'met' if total >= concurrency else 'NOT met'}"
    return f"{where}: {total:,.1f} concurrent {fmt_int(L)}-token requests; {pool}{target}"


def notes(s: Setup, p: Pool) -> list[str]:
    out = []
    if s.engine.name == "vllm":
        out.append(_vllm_budget_note(s))
        if p.pool.padding_layers:
            out.append(f"vLLM hybrid KV cache: {p.pool.groups} groups share one block pool; 'Add "
                       f"{p.pool.padding_layers} padding layers' (kv_cache_utils.py); a request takes "
                       f"{p.pool.blocks_per_request} blocks (sliding layers: the window plus the in-flight tokens).")
        if s.max_num_seqs is not None and p.concurrency > s.max_num_seqs:
            out.append(f"The scheduler runs at most --max-num-seqs {s.max_num_seqs} requests at once per replica; "
                       f"the pool would hold {p.concurrency:,.1f}.")
    out += state_notes(s, p)
    out += s.card_notes
    if s.engine.name == "sglang":
        reqs = sg.max_running_requests(p.pool.tokens, s.max_model_len) if p.pool.tokens >= 2 else 0
        out.append(f"SGLang admits at most max_running_requests = {reqs:,} requests at once (resolve_max_num_reqs: "
                   "min(clamp(tokens / context_len x 512, 2048, 4096), tokens // 2)).")
        out.append(f"SGLang: pool = (free memory at start x mem_fraction_static {s.mfs}) - weights; free memory = "
                   f"total - {fmt_bytes(s.context)} CUDA context (--context-memory). Activations and CUDA graphs use "
                   "the remaining (1 - mem_fraction_static); the pool's 'fixed overhead' term is not modelled.")
    if s.w_t.name.startswith("fp8"):
        out.append("fp8 weights: the values only; block-wise fp32 scales (one per 128x128 block, +0.02%) are not "
                   "counted." + (" MLA: vLLM's bf16 W_UK/W_UV copies of kv_b_proj are." if s.card.mla else ""))
    if s.kv_t.name.startswith("fp8"):
        out.append("fp8 KV: per-layer fp32 k_scale and v_scale are parameters, counted with the weights.")
    if s.total == s.gpu.memory_bytes:
        out.append(f"GPU memory: the catalog's {fmt_bytes(s.total)} (vendor-stated); the engine sees "
                   "cudaMemGetInfo's total, which differs: pass --gpu-memory with nvidia-smi's figure (e.g. 81559MiB "
                   "on an H100 80GB).")
    if s.engine.name in ("hf-static", "hf-dynamic", "ideal") and s.activation is None:
        out.append(f"{s.engine.name}: no activation peak is charged (pass --activation-memory for generate()'s "
                   "transient memory); memory = requested - weights - the CUDA context (--non-torch-memory).")
    if s.max_model_len > s.card.max_position_embeddings:
        out.append(f"--max-model-len {s.max_model_len} exceeds the model's max_position_embeddings "
                   f"({s.card.max_position_embeddings}); vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")
    return out


def state_notes(s: Setup, p: Pool) -> list[str]:
    """What a plan chose for state layers (conv and SSM states of fixed size per request), and why."""
    if s.card.ssm is None:
        return []
    states = fmt_bytes(p.pool.state_bytes_per_request)
    if s.engine.name == "sglang":
        return [f"SGLang hybrid: the pool is split by mamba_full_memory_ratio {sg.DEFAULT_MAMBA_FULL_MEMORY_RATIO} "
                f"(state pool = pool x r / (1 + r), kv_cache_configurator.py _handle_max_mamba_cache): "
                f"max_mamba_cache_size = {fmt_int(p.pool.state_slots or 0)} requests of {states} of states "
                "(conv bfloat16, SSM float32: SGLang's mamba2_state_dtype defaults); the K/V token pool gets the rest "
                "and a running request holds one state slot."]
    if s.engine.name != "vllm":
        return [f"State layers: one request holds {states} of conv and SSM states on this GPU, whatever its length."]
    out = [f"vLLM state layers ({s.card.state_layers} of {s.card.num_layers}): each keeps one page per request "
           f"(MambaSpec with mamba_cache_mode 'none': vLLM turns prefix caching off by default for hybrid models, "
           f"engine/arg_utils.py); states {fmt_bytes(s.state_page_bytes)} per layer and request on this GPU, "
           f"{states} for all its state layers. A request takes {fmt_int(p.pool.blocks_per_request)} blocks over "
           f"{p.pool.groups} KV cache groups: cdiv(max_model_len, block) per attention group, 1 per state group."]
    if s.unified_block or s.state_page_padded:
        attn_page = s.block_size * (p.limiting.kv_bytes_per_token // max(1, _attention_layers(p)))
        pct = 100 * (attn_page - s.state_page_bytes) / s.state_page_bytes
        out.append(f"vLLM hybrid page unification (platforms/interface.py _align_hybrid_block_size): attention block "
                   f"size {fmt_int(s.block_size)} tokens, the smallest multiple of {fmt_int(_alignment(s))} whose attention page "
                   f"({fmt_int(attn_page)} B) holds one layer's states ({fmt_int(s.state_page_bytes)} B) "
                   f"('Setting attention block size to {s.block_size} tokens'); "
                   + (f"the state page is padded by {pct:.2f}% to equal it ('Padding mamba page size by {pct:.2f}%')."
                      if s.state_page_padded else "the pages are equal: no padding."))
    return out


def _alignment(s: Setup) -> int:
    """The multiple the unified block is taken of: max(the kernel alignment, the block size asked for)."""
    return max(hybrid_alignment(s.card), s.block_size_asked or s.block_size)


def _attention_layers(p: Pool) -> int:
    return sum(1 for sp in p.limiting.specs if not sp.per_sequence)


def _vllm_budget_note(s: Setup) -> str:
    if s.kv_cache_memory is not None:
        return ("--kv-cache-memory: the KV pool is fixed (vLLM kv_cache_memory_bytes skips memory profiling and "
                "ignores --gpu-memory-utilization); the per-GPU figures above are shown for reference.")
    act = "given (--activation-memory)" if s.activation is not None else (
        "kvplan's APPROXIMATION of vLLM's profile run (forward of max_num_batched_tokens tokens, sampler on "
        "max_num_seqs rows); vLLM measures it, so pass --activation-memory with the logged figure")
    return (f"{vl.RULES}: available = ceil(total x {s.util}) - weights - activation peak - non-torch "
            f"({fmt_bytes(s.non_torch)}) - CUDA graphs ({fmt_bytes(s.cuda_graph)}); activation peak: {act}. "
            "Non-torch and CUDA-graph figures are documented defaults (--non-torch-memory, --cuda-graph-memory).")


_PINNED = re.compile(r"/(?P<repo>[\w.-]+/[\w.-]+)/blob/(?P<commit>[0-9a-f]{40})/config\.json$")


def hf_repo(card: ModelCard) -> str:
    """The Hugging Face repository named in the card's source, else the card name. A card read from the Hub names
    ``ENDPOINT/ORG/NAME/blob/COMMIT/config.json`` (kvplan.model.hf.hub), whatever HF_ENDPOINT is."""
    m = re.search(r"huggingface\.co/([\w.-]+/[\w.-]+)", card.source) or _PINNED.search(card.source)
    return m.group(1) if m else card.name


def _revision(card: ModelCard) -> list[str]:
    """``--revision COMMIT`` (vllm serve and sglang.launch_server both take it) for a card read at a commit: the
    engine then loads the config kvplan sized."""
    m = _PINNED.search(card.source)
    return [f"--revision {m['commit']}"] if m else []
