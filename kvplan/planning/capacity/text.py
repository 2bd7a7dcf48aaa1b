"""The strings a plan carries: the runtime's launch command, the pasteable verdict line, and the notes (the
runtime's own, then those that hold for any runtime)."""

from __future__ import annotations

from functools import lru_cache

from kvplan.cost.hardware import WINDOWS_IN_USE_AT_START_BYTES, windows_in_use_range
from kvplan.cost.runtimes.setup import Pool, Setup
from kvplan.model.origin import PLACEHOLDER, hf_repo, revision
from kvplan.units import fmt_bytes, fmt_int


def launch_command(s: Setup) -> str | None:
    """The runtime's launch line; None where none reproduces the plan (Runtime.no_launch_reason, in the notes)."""
    if s.engine.no_launch_reason(s) is not None:
        return None
    cmd = s.engine.launch_command(s, hf_repo(s.card), revision(s.card))
    if s.layout.dp > 1 and not s.engine.launches_replicas:  # no DP flag: each replica is a server of its own
        cmd += f"  # once per replica: {s.layout.dp} servers of {s.layout.tp * s.layout.pp} GPU(s) each"
    return cmd


def verdict(s: Setup, p: Pool, concurrency: int | None = None) -> str:
    lay, L = s.layout, s.max_model_len
    where = f"{s.card.name} on {lay.gpus}x {s.gpu.name}, {s.engine.display_name} TP {lay.tp}"
    where += f" PP {lay.pp}" if lay.pp > 1 else ""
    where += f" DP {lay.dp}" if lay.dp > 1 else ""
    where += f" EP {lay.tp * lay.dp}" if lay.expert_parallel else ""
    room, alloc = p.pool.available_bytes, p.pool.allocated_bytes
    if room < 0:
        pool = f"no memory left for the KV cache: {fmt_bytes(-room)} short per GPU" + s.engine.pool_summary(p, s)
    elif alloc is None:
        pool = f"KV pool {fmt_bytes(room)} per GPU" + s.engine.pool_summary(p, s)
    else:  # llama.cpp: a cache of n_ctx cells, whatever memory is left
        free = f", {fmt_bytes(room - alloc)} of GPU memory left free" if alloc <= room else ""
        pool = f"KV cache {fmt_bytes(alloc)} per GPU{s.engine.pool_summary(p, s)}{free}"
    total = p.concurrency * lay.dp
    if not p.fits:
        longest = f"the longest that fits is {fmt_int(p.max_model_len_fit)}" if p.max_model_len_fit else "none fits"
        return f"{where}: one {fmt_int(L)}-token request does NOT fit; {longest}; {pool}"
    limit = s.engine.running_limit(s, p)
    cap = ""
    if limit is not None and limit < p.concurrency:
        cap = f"; runs at most {fmt_int(limit)} at once per replica ({s.engine.running_limit_flag} {fmt_int(limit)})"
    target = ""
    if concurrency is not None:
        target = f"; target {fmt_int(concurrency)}: {'met' if target_met(s, p, concurrency) else 'NOT met'}"
    # two decimals, as the pool table and vLLM's "Maximum concurrency ... 58.98x": one would round 58.98 up to 59.0
    return f"{where}: {total:,.2f} concurrent {fmt_int(L)}-token requests; {pool}{cap}{target}"


def target_met(s: Setup, p: Pool, concurrency: int) -> bool:
    """``concurrency`` requests of max_model_len run at once: one fits, and the whole requests each replica runs
    (its pool's, capped by the engine's scheduler) times the replicas hold them."""
    return p.fits and int(s.engine.running(s, p)) * s.layout.dp >= concurrency


def notes(s: Setup, p: Pool) -> list[str]:
    out = s.engine.notes(s, p) + list(s.card_notes)
    if s.engine.beyond_read:
        out.append(f"--engine {s.engine.name}=={s.engine.beyond_read}: newer than the newest release kvplan has read "
                   f"({'.'.join(map(str, s.engine.newest_read))}); planned with that release's rules "
                   f"({s.engine.rules}), which a later release may have changed.")
    out += checkpoint_notes(s.card) if s.engine.loads_hf_checkpoint else []
    if hf_repo(s.card) == PLACEHOLDER:
        out.append(f"launch: replace {PLACEHOLDER} with the folder or Hugging Face id of the checkpoint this "
                   "config.json belongs to (it names none: its _name_or_path is empty or a local path).")
    if s.w_t.name.startswith("fp8"):
        out.append("fp8 weights: the values only; block-wise fp32 scales (one per 128x128 block, +0.02%) are not "
                   "counted." + (" MLA: vLLM's bf16 W_UK/W_UV copies of kv_b_proj are." if s.card.mla else ""))
    if s.kv_t.name.startswith("fp8"):
        out.append("fp8 KV: per-layer fp32 k_scale and v_scale are parameters, counted with the weights.")
    if s.total == s.gpu.memory_bytes and s.gpu.visible_memory_bytes is None:
        out.append(f"GPU memory: the catalog's {fmt_bytes(s.total)} (vendor-stated {s.gpu.stated_memory}): no visible "
                   f"total is recorded for {s.gpu.name}; the engine starts from torch's total "
                   "(torch.cuda.mem_get_info), a little less than nvidia-smi's: pass --gpu-memory with it.")
    elif s.total == s.gpu.visible_memory_bytes and s.gpu.platform == "windows":
        out.append(f"GPU memory: {fmt_bytes(s.total)}, the total CUDA reports for one {s.gpu.name} under Windows or WSL2 "
                   f"(--platform windows: the WDDM driver keeps no share outside it, where Linux's shows less; the "
                   f"datasheet states {s.gpu.stated_memory}); another process on the GPU (the desktop) does not "
                   "lower vLLM's budget, but it lowers the free memory the other engines size from and vLLM's "
                   "start-up check: --context-memory takes what nvidia-smi shows in use before the start plus the "
                   f"engine's own CUDA context (this plan counts {fmt_bytes(s.context)}" + (
                       ")." if "context" in s.given else
                       f"; by default at least {fmt_bytes(WINDOWS_IN_USE_AT_START_BYTES)}, the least that public "
                       f"Windows start-ups had in use, {windows_in_use_range()} GiB, an ESTIMATE)."))
    elif s.total == s.gpu.visible_memory_bytes:
        windows = s.gpu.windows_visible_memory_bytes
        out.append(f"GPU memory: {fmt_bytes(s.total)}, the total torch sees on one {s.gpu.name} under Linux (the "
                   f"datasheet states {s.gpu.stated_memory}); drivers move it by 0.1-0.5 GiB: --gpu-memory takes "
                   "yours." + ("" if windows is None else f" Under Windows or WSL2 CUDA sees {fmt_bytes(windows)} "
                                                          f"({windows - s.total:+,} B): --platform windows."))
    if s.max_model_len > s.card.max_position_embeddings:
        env = s.engine.long_context_env
        out.append(f"--max-model-len {s.max_model_len} exceeds the model's max_position_embeddings "
                   f"({s.card.max_position_embeddings})" + (
                       f"; {s.engine.display_name} refuses it unless {env}=1, which the launch line sets (past the "
                       "length the model was trained for)." if s.engine.needs_long_context(s)
                       else ": past the length the model was trained for."))
    return out


def checkpoint_notes(card) -> list[str]:
    """Where the launch line's checkpoint holds weights the card does not plan: the quantized weights of a bundled
    sibling card of the same repository (deepseek-v3 and deepseek-v3-fp8 read deepseek-ai/DeepSeek-V3), or the vision
    tower of a multimodal checkpoint (``*ForConditionalGeneration``) whose text decoder the card is."""
    repo = hf_repo(card)
    if repo in (PLACEHOLDER, card.name):
        return []
    by_repo = _bundled_by_repo()
    bundled = any(c.name == card.name for c in by_repo.get(repo, ()))
    siblings = [c for c in by_repo.get(repo, ()) if c.name != card.name] if bundled else []
    out = []
    quantized = [c for c in siblings if c.quantization is not None]
    if card.quantization is None and quantized:
        out.append(f"launch: {repo} holds {quantized[0].quantization.method} weights (-m {quantized[0].name} plans "
                   f"them); this card plans them unquantized, as a converted checkpoint loads them: point the launch "
                   "line at that one")
    with_vision = [c for c in siblings if c.vision is not None]
    if card.vision is None and ((card.hf_architecture or "").endswith("ForConditionalGeneration") or with_vision):
        out.append(f"launch: {repo} is a multimodal checkpoint and this card its text decoder: the engine also loads "
                   "the vision encoder and projector, which the weights above leave out"
                   + (f" (-m {with_vision[0].name} counts them)" if with_vision else ""))
    return out


@lru_cache(maxsize=1)
def _bundled_by_repo() -> dict[str, tuple]:
    """The bundled cards by the Hugging Face repository of their source (read once: a search asks per option)."""
    from kvplan.model.catalog import bundled_names, load_card

    out: dict[str, list] = {}
    for name in bundled_names():
        card = load_card(name)
        out.setdefault(hf_repo(card), []).append(card)
    return {repo: tuple(cards) for repo, cards in out.items()}

