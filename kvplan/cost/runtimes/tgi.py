"""Hugging Face TGI (text-generation-inference, ``text-generation-launcher``): after a warm-up prefill of
``max_batch_prefill_tokens`` tokens, 90% of the memory left (less what ``--cuda-memory-fraction`` keeps back) becomes
KV blocks; ``max_batch_total_tokens`` = blocks x BLOCK_SIZE, the block size set by the attention backend.

Read from TGI at ``db931fcf`` (2026-01-08; /work/shared/reference/serving-features.md section 4.2):

- ``server/text_generation_server/models/flash_causal_lm.py`` ``FlashCausalLM.warmup``: ``total_cache_size =
  num_layers x BLOCK_SIZE x num_kv_heads x head_size x 2 x dtype_size``; ``free_memory =
  get_free_memory(device, MEMORY_FRACTION)``; ``num_blocks = int((free_memory x TGI_WIGGLE_ROOM) //
  total_cache_size) + batch_num_blocks`` ('KV-cache blocks: {num_blocks}, size: {BLOCK_SIZE}').
- ``utils/import_utils.py`` ``get_cuda_free_memory``: ``free - (1 - fraction) x total`` (cudaMemGetInfo);
  ``models/globals.py``: ``TGI_WIGGLE_ROOM`` 0.90, ``CUDA_MEMORY_FRACTION`` 1.0.
- ``launcher/src/main.rs`` ``resolve_attention`` (kvplan.cost.runtimes.tgi.resolve_attention): flashinfer
  (BLOCK_SIZE 1) by default; the fallback, ``paged`` (16) below compute capability 8 or when it is unknown and
  ``flashdecoding`` (256) otherwise, for model_type falcon / deepseek_v2 and for head dims flashinfer lacks (not 64,
  128, 256); ``ATTENTION=...`` on request. Prefix caching is off for a config with ``vision_config`` or
  ``is_encoder_decoder``, a head dim flashinfer lacks, and paged attention, so ``--shared-prefix-len`` is refused there.
- ``server/text_generation_server/models/model.py``: prefill chunking only with flashinfer / flashdecoding;
  ``backends/v3/src/main.rs`` refuses ``max_input_tokens > max_batch_prefill_tokens`` without it, so under paged
  attention the launch line's prefill budget is at least max_input_tokens.
- ``max_batch_prefill_tokens``: TGI's own default (main.rs, no flag) is ``compute_optimal`` = the GPU's f16 FLOP/s
  (its own table, by nvidia-smi name) x shards / ``Config::flop`` when that is > 100, else ``default_optimal`` (10,000
  qwen2_vl / qwen2_5_vl, 8,000 gemma3, else 4,096), capped at max_position_embeddings and ``vram_maximum``
  ((nvidia-smi memory.total x shards x fraction x 0.95 - ``model_vram``) // ``token_vram``, none for a quantized
  config or one that does not fit). kvplan models it (``default_prefill_tokens``): TGI's FLOP/s table and the
  nvidia-smi name of each catalog GPU (``TGI_GPU_FLOPS``), the config terms from the card; the launch line prints the
  value, and the plan's warm-up is sized by it.
"""

from __future__ import annotations

from kvplan.cost.runtimes.setup import Options, ServingFlags, Setup, Stage
from kvplan.cost.features import shared_prefix as _prefix
from kvplan.cost.runtimes.tokenpool import TokenPool, unverified
from kvplan.errors import KvplanError, Refused
from kvplan.units import cdiv, f32, fmt_bytes, fmt_int, require_fraction, require_positive

RULES = "TGI 3.3 (text-generation-inference db931fcf, 2026-01)"
WIGGLE_ROOM = 0.90  # models/globals.py TGI_WIGGLE_ROOM
DEFAULT_CUDA_MEMORY_FRACTION = 1.0  # launcher --cuda-memory-fraction
# launcher/src/main.rs (db931fcf) ComputeType::f16_flop, by the card From<&str> matches: nvidia-smi gpu_name with ' '
# -> '-' lowercased. Catalog GPUs whose nvidia-smi name TGI's table matches; every other GPU is Gpu::Unknown (no
# compute_optimal: 'Unkown compute for card'), e.g. H100 PCIe ('nvidia-h100-pcie'), RTX 4090 ('nvidia-geforce-rtx-4090',
# the table has 'nvidia-4090'), T4 ('tesla-t4'), A10 ('nvidia-a10').
TGI_GPU_FLOPS = {"H100-SXM": 900 * 10**12, "H100-NVL": 900 * 10**12, "A100-80GB": 312 * 10**12,
                 "A100-40GB": 312 * 10**12, "H200": 989 * 10**12, "L4": 121 * 10**12, "L40S": 363 * 10**12,
                 "A10G": 125 * 10**12, "A40": 149 * 10**12}
# the architectures whose config.json names the expert count num_local_experts, which TGI's Config reads (the
# transformers configuration classes that set self.num_local_experts, read in 5.24: mixtral, phimoe, granitemoe,
# granitemoeshared, granitemoehybrid, jetmoe, llama4, gpt_oss, minimax, kimi_linear); other MoE configs
# (num_experts, n_routed_experts) leave TGI's 1
NUM_LOCAL_EXPERTS_ARCHITECTURES = frozenset({
    "MixtralForCausalLM", "PhimoeForCausalLM", "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM",
    "GraniteMoeHybridForCausalLM", "JetMoeForCausalLM", "Llama4ForConditionalGeneration", "Llama4ForCausalLM",
    "GptOssForCausalLM", "MiniMaxForCausalLM", "KimiLinearForCausalLM"})
VRAM_WIGGLE_ROOM = 0.95  # main.rs ComputeType::vram: TGI_WIGGLE_ROOM unset -> 0.95
DEFAULT_OPTIMAL = {"Qwen2VLForConditionalGeneration": 10_000, "Qwen2_5_VLForConditionalGeneration": 10_000,
                   "Gemma3ForConditionalGeneration": 8000}  # main.rs default_optimal by model_type; else 4096
FALLBACK_OPTIMAL = 4096


def config_flop(card) -> int | None:
    """main.rs Config::flop (db931fcf): None with a vision_config; else per layer 2 x hidden x head_dim x (3 heads +
    2 kv heads) + 2 x 3 x hidden x intermediate x (experts per token + shared experts), times the layers."""
    if card.vision is not None:
        return None
    inter = card.ffn_size
    per_tok = 1
    if card.moe is not None:
        inter = card.moe.expert_ffn_size or inter  # estimated: TGI reads the config's intermediate_size
        per_tok = card.moe.experts_per_token + card.moe.num_shared_experts
    kv = card.hf_kv_heads or card.num_kv_heads
    attn = 2 * card.num_heads * card.head_dim * card.hidden_size * 3 + 2 * kv * card.head_dim * card.hidden_size * 2
    return (attn + 2 * 3 * card.hidden_size * inter * per_tok) * card.num_layers


def vram_maximum(card, gpu, shards: int, fraction: float) -> tuple[int | None, bool]:
    """main.rs vram_maximum (db931fcf): (tokens allowed or None, whether memory.total is estimated).
    available = int(f32(memory.total MiB x 2^20 x shards) x fraction x 0.95); model_vram = 2 B x (layers x (3 x
    intermediate x experts x hidden + (heads + 2 kv heads) x head_dim [no x hidden in TGI] + heads x head_dim x hidden)
    + 2 x hidden x vocab); token_vram = kv heads x 2 x head_dim x 2 x layers + (inter + inter // 2) x experts x 2 x 3."""
    if card.quantization is not None or gpu.name not in TGI_GPU_FLOPS:
        return None, False  # quantize is Some: model_vram None; an Unknown card: compute_type's vram is still read,
        # but kvplan keeps to the GPUs TGI names (an unknown card's vram is read all the same: estimated below)
    estimated = gpu.nvidia_smi_memory_mib is None
    mib = gpu.nvidia_smi_memory_mib or (gpu.visible_memory_bytes or gpu.memory_bytes) // 2**20
    available = int(f32(f32(f32(mib * 2**20 * shards) * f32(fraction)) * f32(VRAM_WIGGLE_ROOM)))
    inter = card.ffn_size
    experts = 1
    if card.moe is not None:
        inter = card.moe.expert_ffn_size or inter
        # Config's num_local_experts (serde default 1): only the configs whose key has that name set it
        experts = card.moe.num_experts if card.hf_architecture in NUM_LOCAL_EXPERTS_ARCHITECTURES else 1
    kv = card.hf_kv_heads or card.num_kv_heads
    layer = (3 * inter * experts * card.hidden_size + (card.num_heads + 2 * kv) * card.head_dim
             + card.num_heads * card.head_dim * card.hidden_size)
    model = (layer * card.num_layers + 2 * card.hidden_size * card.vocab_size) * 2
    token = kv * 2 * card.head_dim * 2 * card.num_layers + (inter + inter // 2) * experts * 2 * 3
    if available < model:
        return None, estimated
    return (available - model) // token, estimated


def default_prefill_tokens(card, gpu, shards: int, fraction: float) -> tuple[int, str]:
    """main.rs max_batch_prefill_tokens with no flag (db931fcf): min(compute_optimal or default_optimal,
    max_position_embeddings, vram_maximum); (value, how it was reached)."""
    flop, model_flop = TGI_GPU_FLOPS.get(gpu.name), config_flop(card)
    optimal = None
    if flop is not None and model_flop:
        optimal = flop * shards // model_flop
        optimal = optimal if optimal > 100 else None
    if optimal is not None:
        how = (f"compute_optimal = {fmt_int(flop * shards)} FLOP/s (TGI's table for {gpu.name} x {shards}) // "
               f"{fmt_int(model_flop)} FLOP/token (Config::flop) = {fmt_int(optimal)}")
        default = optimal
    else:
        default = DEFAULT_OPTIMAL.get(card.hf_architecture or "", FALLBACK_OPTIMAL)
        why = ("TGI's FLOP/s table does not know " + gpu.name) if flop is None else "Config::flop is None (VLM)"
        how = f"default_optimal {fmt_int(default)} ({why})"
    value = min(default, card.max_position_embeddings)
    if value < default:
        how += f", capped at max_position_embeddings {fmt_int(value)}"
    cap, estimated = vram_maximum(card, gpu, shards, fraction)
    if cap is not None and cap < value:
        value = cap
        how += (f", reduced to vram_maximum {fmt_int(cap)}"
                + (" (ESTIMATED: nvidia-smi memory.total taken from the catalog's visible memory)" if estimated else ""))
    if card.moe is not None and optimal is not None:
        how += " (MoE: intermediate_size ESTIMATED as the expert FFN size)"
    return value, how
BLOCK_SIZES = {"flashinfer": 1, "paged": 16, "flashdecoding": 256}  # models/globals.py BLOCK_SIZE by ATTENTION
FLASHINFER_HEAD_DIMS = (64, 128, 256)
# launcher/src/main.rs (struct Args): --kv-cache-dtype takes the clap names of enum KVCacheDtype, fp8_e4m3fn and
# fp8_e5m2 (kvplan's fp8_e4m3 is the former); --quantize takes enum Quantization, whose Fp8 is "fp8" (not needed for a
# pre-quantized checkpoint, whose config names its method)
KV_CACHE_DTYPES = {"fp8_e4m3": "fp8_e4m3fn", "fp8_e5m2": "fp8_e5m2"}
FALLBACK_MODEL_TYPES = {"FalconForCausalLM": "falcon", "DeepseekV2ForCausalLM": "deepseek_v2"}  # by architectures[0]


def resolve_attention(card, gpu, attention: str | None = None) -> tuple[str, str | None]:
    """launcher/src/main.rs resolve_attention (db931fcf): (ATTENTION, why prefix caching is off, or None when on).
    ``attention``: an ATTENTION the user set (kvplan's --block-size), which TGI does not override."""
    off = None
    if card.vision is not None or (card.hf_architecture or "").endswith("ForConditionalGeneration"):
        off = "the model's config has a vision_config ('Disabling prefix caching because of VLM model')"
    elif card.architecture == "encoder-decoder":
        off = "the model is encoder-decoder ('Disabling prefix caching because of seq2seq model')"
    cc = gpu.compute_capability
    fallback = "paged" if cc is None or cc < 8 else "flashdecoding"
    model_type = FALLBACK_MODEL_TYPES.get(card.hf_architecture or "")
    if card.head_dim in FLASHINFER_HEAD_DIMS:
        if model_type is not None:
            attention = attention or fallback  # 'Forcing attention to ... because model ... requires it'
            if fallback == "paged" and off is None:
                off = "paged attention does not support it"
    else:
        attention = attention or fallback
        off = off or f"head dim {card.head_dim} is not supported by flashinfer"
    attention = attention or "flashinfer"
    if attention == "paged" and off is None:
        off = "paged attention does not support it ('Disabling prefix caching on paged attention')"
    return attention, off


def default_attention(card, gpu) -> str:
    """The ATTENTION TGI picks with none set (resolve_attention)."""
    return resolve_attention(card, gpu)[0]


def attention_reason(card, gpu) -> str:
    """Why resolve_attention picked its backend, for the note."""
    cc = gpu.compute_capability
    fallback = "paged" if cc is None or cc < 8 else "flashdecoding"
    why = (f"compute capability {cc}" if cc is not None else "compute capability unknown") + f": fallback {fallback}"
    if card.head_dim not in FLASHINFER_HEAD_DIMS:
        return f"head dim {card.head_dim} not flashinfer's, {why}"
    model_type = FALLBACK_MODEL_TYPES.get(card.hf_architecture or "")
    if model_type:
        return f"model_type {model_type} is forced to the fallback, {why}"
    return f"head dim {card.head_dim}"


def warmup_blocks(prefill: int, max_total: int | None, block_size: int) -> int:
    """The warm-up batch's KV blocks (TGI.warmup_blocks): with --max-total-tokens L (and --max-input-tokens L - 1),
    ceil(prefill / (L - 1)) requests of ceil((L - 1) / BLOCK_SIZE) blocks each; without them (``max_total`` None) one
    request of ``prefill`` tokens and max_new_tokens 1, ceil(prefill / BLOCK_SIZE) blocks."""
    if max_total is None:
        return cdiv(prefill, block_size)
    return cdiv(prefill, max_total - 1) * cdiv(max_total - 1, block_size)


def num_blocks(free_bytes: int, total_bytes: int, fraction: float, block_bytes: int, warmup_blocks: int) -> int:
    """flash_causal_lm.py warmup: int(max(0, free - (1 - fraction) x total) x 0.90) // block bytes + the warm-up
    batch's blocks (allocated during the warm-up, so outside ``free``)."""
    usable = max(0, free_bytes - (1 - fraction) * total_bytes)
    return int(usable * WIGGLE_ROOM) // block_bytes + warmup_blocks


class TGI(TokenPool):
    name = "tgi"
    display_name = "TGI"
    rules = RULES
    budget_flag = "--cuda-memory-fraction"
    online_fp8_flag = "--quantize fp8"  # KV_CACHE_DTYPES' source
    description = ("TGI paged cache: blocks of BLOCK_SIZE tokens (flashinfer 1, paged 16, flashdecoding 256), every "
                   "layer in full")
    flops_rule = "TGI: logits for the last position of each sequence; flashinfer/flashdecoding over the cache"
    kv_dtypes = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
    extra_flags = frozenset({"cuda_memory_fraction", "max_batch_prefill_tokens", "shared_prefix_len"})
    _dtype_hint = " (TGI --kv-cache-dtype: fp8_e4m3fn, fp8_e5m2)"

    def loaded_card(self, card, w_t, model_t):
        """--weight-dtype fp32 is refused: the launcher's --dtype takes float16 or bfloat16 only (launcher/src/main.rs
        ``enum Dtype { Float16, BFloat16 }``, text-generation-inference 3.x), so TGI cannot serve float32 weights."""
        if w_t.name == "fp32":
            raise KvplanError("--weight-dtype: fp32: TGI serves float16 or bfloat16 only (text-generation-launcher "
                              "--dtype: float16, bfloat16); allowed here: fp16, bf16, fp8")
        return super().loaded_card(card, w_t, model_t)

    def served_dtypes(self, card, gpu, w_t, kv_t, weight_given, kv_given):
        """An AWQ or GPTQ checkpoint as TGI (db931fcf) takes it. server/text_generation_server/models/__init__.py
        get_model reads quantize from the config's quant_method ("Auto selecting quantization method awq") and, with
        no --dtype, serves it in float16 whatever its torch_dtype ("These quantizers only work with float16 params"):
        a defaulted model dtype is float16, and so are the K/V (flash_causal_lm.py: kv_cache_dtype = dtype when none
        is given). On ROCm an AWQ checkpoint is refused: utils/quantization.py get_loader takes GPTQ-Marlin on CUDA
        only (layers/marlin/gptq.py can_use_gptq_marlin: SYSTEM == "cuda"), and layers/gptq/__init__.py
        GPTQWeight.get_linear raises "AWQ GEMM kernel can't be used on ROCm systems" for the AWQ kernel. A --dtype
        bfloat16 asked for runs on GPTQ-Marlin (compute capability 8.0+, group -1/32/64/128: layers/marlin/gptq.py
        GPTQMarlinWeight asserts scales float16 or bfloat16); the AWQ GEMM kernel TGI falls back to otherwise
        (layers/awq/quantize/cuda.py WQLinear, llm-awq's gemm_forward_cuda) is not checked here."""
        q = card.quantization
        if not _forces_float16(card):
            return w_t, kv_t, ()
        if q.method == "awq" and str(gpu.vendor).lower() == "amd":
            raise Refused(f"--engine tgi: {card.name}'s AWQ checkpoint on {gpu.name}: TGI's AWQ kernel refuses ROCm "
                          "(layers/gptq/__init__.py GPTQWeight.get_linear, db931fcf: NotImplementedError) and "
                          "GPTQ-Marlin runs on CUDA only; use --engine vllm or sglang, or an NVIDIA --gpu")
        if weight_given or w_t.name == "fp16":
            return w_t, kv_t, ()
        from kvplan.model.dtypes import parse_dtype

        fp16 = parse_dtype("fp16")
        return fp16, fp16 if not kv_given and kv_t.bits >= 16 else kv_t, (
            f"TGI serves {card.name}'s {q.method.upper()} checkpoint in float16 without --dtype, whatever its "
            f"torch_dtype ({card.dtype}) says (models/__init__.py get_model: \"These quantizers only work with float16 "
            "params\"); the plan does too (fp16 weights, activations and K/V); --weight-dtype bf16 asks for "
            "--dtype bfloat16.",)

    def positions_held(self, window, run):
        """Every position of every layer (flashinfer, BLOCK_SIZE 1 by default; a plan's --block-size rounds up)."""
        return run.seq_len

    def check_servable(self, card, layout) -> None:
        super().check_servable(card, layout)
        if layout.pp > 1:
            raise Refused(f"--pp: TGI shards a model over --num-shard GPUs (tensor parallel) only; got --pp {layout.pp}")
        if card.mla is not None:
            raise KvplanError(f"--engine tgi: {card.name}'s MLA cache (TGI stores it expanded per head with "
                              "flashdecoding) is not modelled; use --engine vllm or sglang")

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        for flag, value in (("--gpu-memory-utilization", flags.gpu_memory_utilization),
                            ("--mem-fraction-static", flags.mem_fraction_static),
                            ("--kv-cache-memory", flags.kv_cache_memory),
                            ("--max-num-batched-tokens", flags.max_num_batched_tokens),
                            ("--max-num-seqs", flags.max_num_seqs)):
            if value is not None:
                raise KvplanError(f"{flag}: not a TGI flag; TGI takes --cuda-memory-fraction and "
                                  "--max-batch-prefill-tokens")
        fraction = DEFAULT_CUDA_MEMORY_FRACTION
        if flags.cuda_memory_fraction is not None:
            fraction = require_fraction("--cuda-memory-fraction", flags.cuda_memory_fraction)
        if flags.block_size is None:
            chosen = None
        elif flags.block_size in BLOCK_SIZES.values():
            chosen = next(k for k, v in BLOCK_SIZES.items() if v == flags.block_size)
        else:
            raise KvplanError(f"--block-size: TGI's BLOCK_SIZE is set by its attention backend: "
                              f"{', '.join(f'{v} ({k})' for k, v in BLOCK_SIZES.items())}; got {flags.block_size}")
        attention, prefix_off = resolve_attention(card, gpu, chosen)
        shared = _prefix(flags)
        if shared and prefix_off:
            raise Refused(f"--shared-prefix-len: TGI turns prefix caching off here ({prefix_off}; launcher/src/main.rs "
                          f"resolve_attention, attention {attention} on {gpu.name}), so no prefix is shared")
        max_input = max_model_len - 1
        chunking = attention != "paged"  # models/model.py: prefill chunking only with flashinfer / flashdecoding
        if flags.max_batch_prefill_tokens is None:
            prefill = default_prefill_tokens(card, gpu, layout.tp, fraction)[0]
            prefill = prefill if chunking else max(prefill, max_input)
        else:
            prefill = require_positive("--max-batch-prefill-tokens", flags.max_batch_prefill_tokens)
            if not chunking and prefill < max_input:
                raise Refused(f"--max-batch-prefill-tokens {prefill}: TGI with paged attention (no prefill chunking) "
                              f"needs it >= max_input_tokens {max_input} (backends/v3/src/main.rs refuses to start)")
        return Options(block_size=BLOCK_SIZES[attention], mnbt=prefill, cuda_memory_fraction=fraction,
                       shared_prefix_len=shared)

    def attention(self, s: Setup) -> str:
        return next(k for k, v in BLOCK_SIZES.items() if v == s.block_size)

    # -- the budget --

    def warmup_blocks(self, s: Setup) -> int:
        """The warm-up batch's blocks for the launch line (--max-input-tokens L - 1 --max-total-tokens L), db931fcf:
        ``backends/v3/src/client/grpc_client.rs`` ``warmup`` sends requests of ``truncate = min(max_input_tokens,
        max_prefill_tokens - n_tokens)`` tokens until max_batch_prefill_tokens, each with ``max_new_tokens =
        max_total_tokens - truncate``; ``flash_causal_lm.py`` ``FlashCausalLMBatch.from_tokenized`` gives a request
        ``ceil((prompt_length + max_new_tokens - 1) / BLOCK_SIZE)`` blocks, so every request holds L - 1 tokens."""
        return warmup_blocks(s.mnbt, s.max_model_len, s.block_size)

    def budget(self, s: Setup, st: Stage) -> int:
        block_bytes = self.token_bytes(s, st) * s.block_size
        warm = self.warmup_blocks(s)
        free = st.available - warm * block_bytes  # the warm-up batch's blocks are allocated when TGI measures
        return num_blocks(free, s.total, s.opts.cuda_memory_fraction, block_bytes, warm) * block_bytes

    def requested_rule(self, s: Setup) -> str:
        return (f"total - CUDA context; the pool: (free after the warm-up - (1 - cuda_memory_fraction "
                f"{s.opts.cuda_memory_fraction}) x total) x 0.90")

    def activation_rule(self, s: Setup) -> str:
        if s.activation is None:
            return "warm-up prefill peak over max_batch_prefill_tokens, ESTIMATED (--activation-memory)"
        return super().activation_rule(s)

    # -- what a plan prints --

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        attention = self.attention(s)
        env = [] if attention == default_attention(s.card, s.gpu) else [f"ATTENTION={attention}"]
        cmd = env + ["text-generation-launcher", f"--model-id {repo}", *([f"--revision {revision}"] if revision else []),
                     f"--num-shard {s.layout.tp}", f"--max-input-tokens {s.max_model_len - 1}",
                     f"--max-total-tokens {s.max_model_len}", f"--max-batch-prefill-tokens {s.mnbt}"]
        if s.opts.cuda_memory_fraction != DEFAULT_CUDA_MEMORY_FRACTION:
            cmd.append(f"--cuda-memory-fraction {s.opts.cuda_memory_fraction}")
        if s.kv_t.name.startswith("fp8"):
            cmd.append(f"--kv-cache-dtype {KV_CACHE_DTYPES[s.kv_t.name]}")
        if s.w_t.name.startswith("fp8") or s.online_fp8:  # a 16-bit checkpoint quantized at load (Server.loaded_card)
            cmd.append("--quantize fp8")
        # --dtype float16|bfloat16 (launcher/src/main.rs enum Dtype) wherever the plan's 16-bit weights are not the
        # checkpoint's own (bf16 of a float16 checkpoint as well as fp16 of a bfloat16 one)
        own = _auto_dtype(s.card)  # an AWQ/GPTQ checkpoint's own is float16 (get_model, served_dtypes)
        if s.w_t.name == "fp16" and own != "float16":
            cmd.append("--dtype float16")
        elif s.w_t.name == "bf16" and own != "bfloat16":
            cmd.append("--dtype bfloat16")
        return " ".join(cmd)

    def no_flag_note(self, s: Setup, p) -> str:
        """What TGI 3.x does without --max-input-tokens/--max-total-tokens (db931fcf): launcher/src/main.rs passes
        neither to the shard (``max_input_tokens``/``max_total_tokens`` stay None); ``flash_causal_lm.py``
        ``FlashCausalLM.warmup`` then sets ``max_total_tokens = min(num_blocks x BLOCK_SIZE,
        tokenizer.model_max_length, max_position_embeddings)`` with prefill chunking (flashinfer, flashdecoding; else
        the warm-up batch's cache length) and ``max_input_tokens = max_total_tokens - 1`` (since PR #2808, v3.0;
        2.0's launcher defaulted them to min(max_position_embeddings, 4096) and one less)."""
        mpe = s.card.max_position_embeddings
        if self.attention(s) == "paged":
            total = "the warm-up batch's cache length (paged attention has no prefill chunking; not modelled)"
        else:
            total = (f"min(KV tokens {fmt_int(p.pool.tokens)}, max_position_embeddings {fmt_int(mpe)}, the "
                     f"tokenizer's model_max_length, which kvplan does not read) = at most "
                     f"{fmt_int(min(p.pool.tokens, mpe))}")
        return (f"This plan passes --max-model-len {fmt_int(s.max_model_len)} as --max-total-tokens and one less as "
                f"--max-input-tokens. Without them TGI 3.x sets max_total_tokens = {total} and max_input_tokens one "
                f"less (flash_causal_lm.py warmup), and warms up one request of max_batch_prefill_tokens "
                f"({fmt_int(warmup_blocks(s.mnbt, None, s.block_size))} blocks, not "
                f"{fmt_int(self.warmup_blocks(s))}), so its KV blocks differ slightly.")

    def notes(self, s: Setup, p) -> list[str]:
        lim = p.limiting
        attention = self.attention(s)
        picked = (f"resolve_attention: {attention_reason(s.card, s.gpu)}"
                  if attention == default_attention(s.card, s.gpu) else "ATTENTION set by --block-size")
        out = [f"{RULES}: attention {attention} ({picked}; BLOCK_SIZE {s.block_size}); KV-cache blocks = int((free "
               f"after the warm-up - (1 - {s.opts.cuda_memory_fraction}) x total) x 0.90) // {fmt_int(p.pool.bytes_per_block)}"
               f" B + {fmt_int(self.warmup_blocks(s))} warm-up blocks = {fmt_int(p.pool.num_blocks)}; the router's "
               f"max_batch_total_tokens = {fmt_int(p.pool.tokens)} ('Setting max batch total tokens to "
               f"{p.pool.tokens}'). Free after the warm-up = total - CUDA context ({fmt_bytes(s.context)}) - weights "
               f"- warm-up activations ({fmt_bytes(lim.activation)}) - runtime growth ({fmt_bytes(s.non_torch)}) - the "
               f"warm-up blocks' own {fmt_bytes(self.warmup_blocks(s) * p.pool.bytes_per_block)} (allocated for the "
               "warm-up and still held when the free memory is read).",
               unverified("TGI", "the warm-up activation peak (kvplan's vLLM-style approximation), the warm-up blocks "
                          "and the budget")]
        value, how = default_prefill_tokens(s.card, s.gpu, s.layout.tp, s.opts.cuda_memory_fraction)
        if s.mnbt == value:
            out.append(f"--max-batch-prefill-tokens {fmt_int(s.mnbt)} is TGI's own default here (launcher/src/main.rs "
                       f"with no flag: {how}); it sizes the warm-up.")
        else:
            out.append(f"--max-batch-prefill-tokens {fmt_int(s.mnbt)} on the launch line (given, or raised to "
                       f"max_input_tokens under paged attention, which has no prefill chunking); TGI's own default "
                       f"without the flag would be {fmt_int(value)} ({how}).")
        out.append(self.no_flag_note(s, p))
        if any(sp.window for sp in lim.specs):
            out.append("Sliding-window layers are held in full: TGI keeps every position of every layer.")
        return out


def _forces_float16(card) -> bool:
    """A checkpoint of the quantizers get_model serves in float16 without --dtype ("These quantizers only work with
    float16 params": AWQ, GPTQ; models/__init__.py, db931fcf)."""
    return card.quantization is not None and card.quantization.method in ("awq", "gptq")


def _auto_dtype(card) -> str:
    """The dtype TGI serves a checkpoint in without --dtype: float16 for those quantizers, else its torch_dtype."""
    return "float16" if _forces_float16(card) else card.dtype
