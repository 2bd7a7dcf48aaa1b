"""``kvplan.plan``: how many requests of max_model_len tokens fit a model on a GPU layout, as the engine computes it.

>>> from kvplan import plan
>>> r = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192)
>>> r.kv_cache.num_blocks > 0, r.fits
(True, True)

Engines: ``vllm`` (V1, 0.33 rules), ``sglang`` (0.5.23 rules), ``hf-static`` / ``hf-dynamic`` (transformers, one
GPU), ``ideal`` (exactly the tokens attention needs, no overheads). Every rule is in kvplan.cost.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.cost import serving_sglang as sg
from kvplan.cost import serving_vllm as vl
from kvplan.cost.engines import get_engine
from kvplan.cost.hardware import GPU, load_gpu
from kvplan.cost.parallel import Layout, check_layout
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import card_from_dict, load_card
from kvplan.model.dtypes import DType
from kvplan.planning.capacity_engines import Pool, Setup, Stage, hybrid_block, pool
from kvplan.planning.capacity_results import Latency, PerGPU, PlanInputs, PlanResult
from kvplan.planning.estimate import _dtype
from kvplan.units import fmt_bytes, parse_size, require_fraction, require_positive

PAGED = ("vllm", "sglang")


def plan(model: ModelCard | str | Path, *, gpu: str | GPU, max_model_len: int, tp: int = 1, pp: int = 1, dp: int = 1,
         engine: str = "vllm", gpu_memory: int | str | None = None, gpu_file: str | None = None,
         gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
         kv_cache_memory: int | str | None = None, max_num_batched_tokens: int | None = None,
         max_num_seqs: int | None = None, block_size: int | None = None, kv_dtype: str | None = None,
         weight_dtype: str | None = None, activation_memory: int | str | None = None,
         non_torch_memory: int | str | None = None, cuda_graph_memory: int | str | None = None,
         context_memory: int | str | None = None, concurrency: int | None = None,
         prompt_len: int | None = None, expert_parallel: bool = False) -> PlanResult:
    """Plan ``model`` on ``tp x pp`` GPUs (x ``dp`` replicas) of type ``gpu``; KvplanError on a layout the engine
    refuses or on memory that leaves nothing for the cache. A request that does not fit is an answer (fits=False).
    ``concurrency`` adds latency bounds at that many requests (``prompt_len`` tokens of prefill, default
    max_model_len)."""
    s = resolve(model, gpu=gpu, max_model_len=max_model_len, tp=tp, pp=pp, dp=dp, engine=engine,
                gpu_memory=gpu_memory, gpu_file=gpu_file, gpu_memory_utilization=gpu_memory_utilization,
                mem_fraction_static=mem_fraction_static, kv_cache_memory=kv_cache_memory,
                max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, block_size=block_size,
                kv_dtype=kv_dtype, weight_dtype=weight_dtype, activation_memory=activation_memory,
                non_torch_memory=non_torch_memory, cuda_graph_memory=cuda_graph_memory,
                context_memory=context_memory, expert_parallel=expert_parallel)
    sts, p = pool(s)
    check_budget(s, sts)
    if concurrency is None:
        if prompt_len is not None:
            raise KvplanError("--prompt-len: only used with --concurrency (latency bounds)")
        return result(s, sts, p)
    from kvplan.planning.latency import latency

    require_positive("--concurrency", concurrency)
    if prompt_len is not None:
        require_positive("--prompt-len", prompt_len)
    return result(s, sts, p, latency(s, concurrency, prompt_len), concurrency)


def resolve(model: ModelCard | str | Path, *, gpu: str | GPU, max_model_len: int, tp: int, pp: int, dp: int,
            engine: str, gpu_memory, gpu_file, gpu_memory_utilization, mem_fraction_static, kv_cache_memory,
            max_num_batched_tokens, max_num_seqs, block_size, kv_dtype, weight_dtype, activation_memory,
            non_torch_memory, cuda_graph_memory, context_memory, expert_parallel: bool = False) -> Setup:
    """Defaults (the engine's own where it has them) and checks; one-line KvplanError naming the flag."""
    card = model if isinstance(model, ModelCard) else load_card(model)
    eng = get_engine(engine)
    card, card_notes = served_card(card, eng.name)
    g = gpu if isinstance(gpu, GPU) else load_gpu(gpu, gpu_file)
    require_positive("--max-model-len", max_model_len)
    layout = Layout(tp, pp, dp, bool(expert_parallel))
    _check_servable(card, eng, layout)
    kv_t, w_t = _dtype(card, eng, kv_dtype, "--kv-dtype")[0], _dtype(card, eng, weight_dtype, "--weight-dtype")[0]
    eng.check_dtype(kv_t)
    total = g.memory_bytes if gpu_memory is None else _positive_size("--gpu-memory", gpu_memory)
    size = lambda flag, v, d: d if v is None else parse_size(flag, v)  # noqa: E731
    mnbt, seqs = vl.batch_defaults(total, g.name) if eng.name == "vllm" else (None, None)
    defaults = _overhead_defaults(eng.name, tp * pp)
    state_t = _state_dtype(card, eng, kv_t)
    asked = _block_size(eng.name, block_size, card, g)
    block, padded, state_page = hybrid_block(card, kv_t, eng, tp, asked, state_t)
    return Setup(
        card=card, engine=eng, gpu=g, total=total, layout=layout, max_model_len=max_model_len, kv_t=kv_t, w_t=w_t,
        util=_util(eng.name, gpu_memory_utilization), mfs=_mfs(eng.name, mem_fraction_static, total, card, tp, pp),
        kv_cache_memory=_kv_cache_memory(eng.name, kv_cache_memory),
        mnbt=_int_flag("--max-num-batched-tokens", max_num_batched_tokens, mnbt, eng.name),
        max_num_seqs=_int_flag("--max-num-seqs", max_num_seqs, seqs, eng.name),
        block_size=block, state_page_padded=padded, state_page_bytes=state_page, state_t=state_t,
        card_notes=card_notes,
        unified_block=block != asked, block_size_asked=asked,
        activation=size("--activation-memory", activation_memory, None),
        non_torch=size("--non-torch-memory", non_torch_memory, defaults[0]),
        cuda_graph=size("--cuda-graph-memory", cuda_graph_memory, defaults[1]),
        context=size("--context-memory", context_memory, defaults[2]))


def _check_servable(card: ModelCard, eng, layout: Layout) -> None:
    """What kvplan plan does not model for this card, engine and layout, as one-line KvplanErrors naming the flag."""
    if layout.expert_parallel and eng.name != "vllm":
        raise KvplanError(f"--expert-parallel: vLLM's --enable-expert-parallel; not modelled for --engine {eng.name}")
    check_layout(card, layout)
    if card.ssm and card.ssm.kind == "rglru" and eng.name in PAGED:
        raise KvplanError(f"--engine {eng.name}: {card.name}'s RG-LRU layers (RecurrentGemma) are not modelled for "
                          "vLLM or SGLang, which serve no RecurrentGemma model here; use --engine ideal, hf-static or "
                          "hf-dynamic")
    if eng.transformers and layout.tp * layout.pp > 1:
        raise KvplanError(f"--tp/--pp: {eng.name} runs one process on one GPU here; use --dp for replicas")
    if card.architecture != "decoder-only":
        raise KvplanError(f"--model: serving capacity is planned for decoder-only models (vLLM V1 and SGLang serve "
                          f"them as generators); {card.name} is {card.architecture}: size it with `kvplan estimate`"
                          + (" --encoder-len N" if card.architecture == "encoder-decoder" else ""))


def served_card(card: ModelCard, engine: str) -> tuple[ModelCard, tuple[str, ...]]:
    """The card as the engine builds it, and notes saying how it differs. Shared blocks (Zamba, Zamba2): vLLM serves
    Zamba2 only (models/zamba2.py; SGLang neither); its Zamba2Attention builds ``QKVParallelLinear(2h, head_dim,
    num_attention_heads)`` without num_kv_heads, so K/V weights and caches are num_attention_heads wide, and
    Zamba2ForCausalLM always ties lm_head to embed_tokens."""
    if card.shared_blocks is None or engine not in PAGED:
        return card, ()
    if card.ssm.kind != "mamba2":
        raise KvplanError(f"--engine {engine}: {card.name} is a Zamba (v1) model (shared blocks over "
                          f"{card.ssm.kind} layers); vLLM serves only Zamba2 (Zamba2ForCausalLM) and SGLang neither; "
                          "use --engine ideal, hf-static or hf-dynamic")
    if engine != "vllm":
        raise KvplanError(f"--engine {engine}: SGLang serves no Zamba2 model; use --engine vllm (models/zamba2.py)")
    notes = ["Zamba2 on vLLM (models/zamba2.py): each shared block's weights once per GPU, split over TP as its "
             "layers are (q/k/v and gate_up by outputs, o_proj and down by inputs, each adapter's A and B by "
             "outputs), every hybrid layer's Linear(hidden, hidden) replicated; each hybrid layer caches its own "
             "K/V (one Attention per invocation) beside every layer's Mamba-2 states."]
    data = card.model_dump(exclude_none=True)
    if card.num_kv_heads != card.num_heads:
        data["num_kv_heads"] = card.num_heads
        notes.append(f"vLLM's Zamba2Attention builds K/V with num_attention_heads ({card.num_heads}) heads "
                     f"whatever num_key_value_heads ({card.num_kv_heads}) says (QKVParallelLinear without "
                     "num_kv_heads): the weights and K/V cache here are sized as vLLM allocates them; a checkpoint "
                     "with fewer K/V heads does not match its shapes.")
    if not card.tie_embeddings:
        data["tie_embeddings"] = True
        notes.append("vLLM's Zamba2ForCausalLM ties lm_head to embed_tokens whatever tie_word_embeddings says: no "
                     "separate LM head is held.")
    return card_from_dict(data, origin=f"{card.name} as vLLM builds it"), tuple(notes)


def _state_dtype(card: ModelCard, eng, kv_t: DType) -> DType | None:
    """A served engine keeps conv and SSM states in the model dtype whatever --kv-dtype the attention K/V use (vLLM
    mamba_cache_dtype "auto" is the model dtype: MambaStateDtypeCalculator; SGLang mamba2_state_dtype); None: the
    same as the KV dtype."""
    if card.ssm is None or eng.name not in PAGED:
        return None
    model_t = _dtype(card, eng, None, "--kv-dtype")[0]
    return None if model_t == kv_t else model_t


def _positive_size(flag: str, value) -> int:
    n = parse_size(flag, value)
    if n < 1:
        raise KvplanError(f"{flag}: must be a positive size, got {value!r}")
    return n


def _overhead_defaults(engine: str, gpus: int) -> tuple[int, int, int]:
    """(non-torch, CUDA graphs, context) defaults; see kvplan.cost.serving_vllm for their sources."""
    if engine == "vllm":
        non_torch = vl.DEFAULT_NON_TORCH_BYTES if gpus == 1 else vl.DEFAULT_NON_TORCH_MULTI_GPU_BYTES
        return non_torch, vl.DEFAULT_CUDA_GRAPH_BYTES, vl.DEFAULT_CONTEXT_BYTES
    if engine == "sglang":
        return 0, 0, vl.DEFAULT_CONTEXT_BYTES
    if engine == "ideal":
        return 0, 0, 0
    return vl.DEFAULT_CONTEXT_BYTES, 0, 0  # transformers: the CUDA context and cuBLAS workspace share the GPU


def _util(engine: str, value: float | None) -> float | None:
    if engine == "sglang":
        if value is not None:
            raise KvplanError("--gpu-memory-utilization: SGLang sizes its pool with --mem-fraction-static instead")
        return None
    util = (vl.DEFAULT_UTILIZATION if engine == "vllm" else 1.0) if value is None else value
    if isinstance(util, bool) or not isinstance(util, (int, float)):
        require_fraction("--gpu-memory-utilization", util)  # a string or None: refused by type, one line
    vl.requested_memory(1, util)  # (0, 1] check, vLLM's wording
    return util


def _mfs(engine: str, value: float | None, total: int, card: ModelCard, tp: int, pp: int) -> float | None:
    if engine != "sglang":
        if value is not None:
            raise KvplanError(f"--mem-fraction-static: only for --engine sglang (got --engine {engine})")
        return None
    mfs = sg.default_mem_fraction_static(total // sg.MIB, tp, pp, card.mla is not None) if value is None else value
    if value is not None:
        require_fraction("--mem-fraction-static", value)
    if not 0 < mfs <= 1:
        raise KvplanError(f"--mem-fraction-static: SGLang needs a fraction in (0, 1], got {mfs} "
                          f"{'(its default formula for this GPU)' if value is None else ''}".rstrip())
    return mfs


def _kv_cache_memory(engine: str, value) -> int | None:
    if value is None:
        return None
    if engine != "vllm":
        raise KvplanError(f"--kv-cache-memory: vLLM's kv_cache_memory_bytes; not used by --engine {engine}")
    return _positive_size("--kv-cache-memory", value)


def _int_flag(flag: str, value: int | None, default: int | None, engine: str) -> int | None:
    if value is None:
        return default
    if engine != "vllm":
        raise KvplanError(f"{flag}: a vLLM scheduler limit; not used by --engine {engine}")
    return require_positive(flag, value)


def _block_size(engine: str, value: int | None, card: ModelCard, g: GPU) -> int:
    if engine not in PAGED:
        if value is not None:
            raise KvplanError(f"--block-size: {engine} keeps no pages; only --engine vllm or sglang")
        return 1
    if value is not None:
        return require_positive("--block-size", value)
    if engine == "sglang":
        return sg.DEFAULT_PAGE_SIZE
    return vl.default_block_size(card, g.compute_capability)


def check_budget(s: Setup, sts: list[Stage]) -> None:
    """Refuse, as the engine would, a memory that leaves nothing for the cache."""
    if s.engine.name == "vllm" and s.kv_cache_memory is None and s.total - s.context < sts[0].requested:
        free = fmt_bytes(s.total - s.context)
        raise KvplanError(f"--gpu-memory-utilization: vLLM refuses: free memory on startup ({free} after "
                          f"{fmt_bytes(s.context)} CUDA context/NCCL, --context-memory) is less than desired GPU "
                          f"memory utilization ({s.util}, {fmt_bytes(sts[0].requested)}) (v1/worker/utils.py "
                          "request_memory)")
    worst = min(sts, key=lambda st: st.available)
    if worst.available <= 0:
        flag = "--mem-fraction-static" if s.engine.name == "sglang" else "--gpu-memory-utilization"
        raise KvplanError(
            f"{flag}: {s.engine.name}: no available memory for the cache blocks on pipeline stage {worst.pp_rank}: "
            f"{fmt_bytes(worst.requested)} requested - {fmt_bytes(worst.weights)} weights - "
            f"{fmt_bytes(worst.activation)} activations - {fmt_bytes(worst.non_torch + worst.cuda_graph)} overheads "
            f"= {fmt_bytes(worst.available)}; raise {flag}, use more GPUs (--tp/--pp) or a bigger --gpu")


def result(s: Setup, sts: list[Stage], p: Pool, lat: Latency | None = None,
           concurrency: int | None = None) -> PlanResult:
    from kvplan.planning.capacity_text import launch_command, notes, verdict

    lim = p.limiting
    per_gpu = PerGPU(pp_rank=lim.pp_rank, layers=len(lim.layers), params=lim.params, weights_bytes=lim.weights,
                     buffers_bytes=lim.buffers, activation_bytes=lim.activation,
                     activation_estimated=s.activation is None and s.engine.name == "vllm",
                     non_torch_bytes=lim.non_torch, cuda_graph_bytes=lim.cuda_graph,
                     overhead_bytes=lim.non_torch + lim.cuda_graph, context_bytes=s.context,
                     requested_bytes=lim.requested, kv_bytes_per_token=lim.kv_bytes_per_token,
                     available_kv_bytes=lim.available)
    inputs = PlanInputs(model=s.card.name, engine=s.engine.name, engine_rules=_rules(s.engine.name), gpu=s.gpu.name,
                        gpu_memory_bytes=s.total, tp=s.layout.tp, pp=s.layout.pp, dp=s.layout.dp,
                        expert_parallel=s.layout.expert_parallel,
                        max_model_len=s.max_model_len, kv_dtype=s.kv_t.name, weight_dtype=s.w_t.name,
                        gpu_memory_utilization=s.util, mem_fraction_static=s.mfs,
                        kv_cache_memory_bytes=s.kv_cache_memory, max_num_batched_tokens=s.mnbt,
                        max_num_seqs=s.max_num_seqs, block_size=s.block_size)
    return PlanResult(inputs=inputs, per_gpu=per_gpu, kv_cache=p.pool, max_concurrency=p.concurrency,
                      max_concurrency_total=p.concurrency * s.layout.dp, request_kv_bytes=p.request_bytes,
                      fits=p.fits, max_model_len_fit=p.max_model_len_fit, ranks=p.ranks,
                      launch_command=launch_command(s), verdict=verdict(s, p, concurrency), latency=lat,
                      notes=notes(s, p))


def _rules(engine: str) -> str:
    return {"vllm": vl.RULES, "sglang": sg.RULES}.get(engine, f"kvplan {engine} engine (kvplan.cost.engines)")


