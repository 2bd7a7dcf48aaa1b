"""llama.cpp (llama-server): one process, the model's layers on the GPU (-ngl) and the rest on the CPU, one K/V
cache of n_ctx cells shared by -np slots. The arithmetic, with its sources, is ``kvplan.cost.llamacpp``; this runtime
applies it to a plan: the flags and their defaults, the GPU's budget, the slots that fit, the launch line.

A card made from a GGUF (``--gguf``) is sized from the GGUF's per-layer metadata and tensor table (exact bytes of every
quantized tensor); a bundled card from its architecture, weights at the plan's --weight-dtype.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.cost import llamacpp as lc
from kvplan.cost.engines import CacheRun
from kvplan.cost.runtimes.base import Runtime, longest, rank_row
from kvplan.cost.runtimes.setup import Options, Pool, ServingFlags, Setup, Stage
from kvplan.cost.runtimes.results import KVCachePool
from kvplan.errors import KvplanError
from kvplan.units import fmt_bytes


def hparams_and_weights(card, w_bits: int, quant: str | None = None):
    """(LlamaHparams, (per-layer, input, output) weight bytes or None) of a card: the GGUF's own when the card came
    from one; at a llama-quantize type (``quant``) by llama-quant.cpp's rules (kvplan.cost.gguf_quant); else the
    card's parameters at ``w_bits`` split evenly over its layers."""
    from kvplan.model.gguf import gguf_path_of
    from kvplan.model.llama_hparams import hparams_from_card

    path = gguf_path_of(card)
    if path is not None:
        if quant is not None:
            raise KvplanError("--gguf-quant: the GGUF's own tensor table gives its weights; only for a card")
        from kvplan.model.gguf import load_gguf

        return load_gguf(path).hparams, None
    if quant is not None:
        from kvplan.cost.gguf_quant import quant_weights

        return hparams_from_card(card), quant_weights(card, quant)
    from kvplan.cost.params import count_params

    p = count_params(card)
    emb = p.embedding + p.positions
    out = p.lm_head + (0 if card.final_norm is False else card.hidden_size)
    body = p.total - emb - p.lm_head
    per = [body // card.num_layers] * card.num_layers
    per[0] += body - sum(per)
    to_bytes = lambda n: n * w_bits // 8  # noqa: E731
    tied_copy = p.embedding if card.tie_embeddings else 0  # llama.cpp loads a tied token_embd again as the output
    return hparams_from_card(card), ([to_bytes(x) for x in per], to_bytes(emb), to_bytes(out + tied_copy))


class LlamaCpp(Runtime):
    name = "llamacpp"
    display_name = "llama.cpp"
    rules = f"llama.cpp {lc.LATEST} rules (b10488; kvplan.cost.llamacpp)"
    description = "llama.cpp: n_ctx cells padded to 256, shared by -np slots; sliding layers keep n_swa + n_ubatch"
    single_process = True
    extra_flags = frozenset({"llama"})
    budget_flag = "-ngl/--n-gpu-layers"
    serves_fp32 = False
    default_parallel: int | None = None  # llama-server: auto (4 slots, unified)

    kv_dtypes = ("fp32", "fp16", "bf16")
    _dtype_hint = " (llama.cpp's quantized caches: -ctk/-ctv q8_0, q4_0, ... on estimate and plan)"

    # -- cache rules: one sequence of seq_len tokens in its own stream (-np batch, no unified cache) --

    def positions_held(self, window: int | None, run: CacheRun) -> int:
        """Cells one sequence holds: n_ctx_seq = GGML_PAD(seq_len, 256); a sliding layer GGML_PAD(min(n_ctx_seq,
        n_swa + n_ubatch), 256) (llama_kv_cache_iswa, n_ubatch 512; kvplan.cost.llamacpp)."""
        cells = lc.pad(run.seq_len, 256)
        return lc.pad(min(cells, window + 512), 256) if window else cells

    def chunk_positions(self, chunk: int, run: CacheRun) -> int:
        """Chunked layers (Llama-4) use the sliding cache with n_swa = the chunk."""
        return self.positions_held(chunk, run)

    def estimate_memory(self, card, w_bits, seq_len, batch, flags):
        """``batch`` slots of ``seq_len`` cells each (-np batch, -c seq_len x batch) unless the flags say otherwise."""
        hp, weights = hparams_and_weights(card, w_bits, (flags or lc.LlamaFlags()).gguf_quant)
        f = flags or lc.LlamaFlags()
        if f.n_parallel is None:
            f = replace(f, n_parallel=batch)
        if f.n_ctx is None:
            f = replace(f, n_ctx=seq_len if f.kv_unified else seq_len * f.n_parallel)
        return lc.memory(hp, f, weights)

    def resolve(self, flags: ServingFlags, card, gpu, total, layout, max_model_len) -> Options:
        for flag, value in (("--gpu-memory-utilization", flags.gpu_memory_utilization),
                            ("--block-size", flags.block_size)):
            if value is not None:
                raise KvplanError(f"{flag}: not a {self.display_name} option (it sizes by -c, -np and -ngl)")
        self._refuse_sglang_only(flags)
        self._refuse_vllm_only(flags)
        f = flags.llama or lc.LlamaFlags()
        if f.n_parallel is None and self.default_parallel is not None:
            f = replace(f, n_parallel=self.default_parallel)
        if f.n_ctx is None:  # each slot holds --max-model-len tokens
            unified = f.kv_unified if f.n_parallel is not None else (f.kv_unified is not False)
            slots = f.n_parallel or 4
            f = replace(f, n_ctx=max_model_len if unified else max_model_len * slots)
        return Options(util=1.0, llama=f)

    def memory(self, s: Setup, n_ctx: int | None = None) -> lc.LlamaMemory:
        hp, weights = hparams_and_weights(s.card, s.w_t.bits, s.opts.llama.gguf_quant)
        f = s.opts.llama if n_ctx is None else replace(s.opts.llama, n_ctx=n_ctx)
        return lc.memory(hp, f, weights)

    def stages(self, s: Setup) -> list[Stage]:
        m = self.memory(s)
        gpu = f"{s.opts.llama.backend}0"
        weights = sum(b.bytes for b in m.buffers if b.device == gpu and b.kind == "model")
        compute = sum(b.bytes for b in m.buffers if b.device == gpu and b.kind == "compute")
        available = s.total - weights - compute
        return [Stage(0, range(s.card.num_layers), 0, weights, 0, compute, 0, 0, s.total, available)]

    def pool(self, s: Setup, sts: list[Stage]) -> Pool:
        """The cache llama.cpp allocates at start-up (n_ctx cells, whatever the requests): it fits or it does not;
        slots of --max-model-len that fit: -np (own cells each), or n_ctx // max_model_len of a unified cache."""
        st, m = sts[0], self.memory(s)
        c = m.context
        gpu = f"{s.opts.llama.backend}0"
        cache = sum(b.bytes for b in m.buffers if b.device == gpu and b.kind in ("kv", "recurrent"))
        fits = cache <= st.available and c.n_ctx_seq >= s.max_model_len
        slots = c.n_seq_max if not c.kv_unified else min(c.n_seq_max, c.n_ctx // s.max_model_len)
        conc = float(slots) if fits else 0.0
        ok = lambda L: self._gpu_cache(s, L) <= st.available  # noqa: E731
        fit = longest(ok, max(c.n_ctx, s.max_model_len)) if ok(1) else 0
        row = rank_row(st, cache // max(1, c.n_ctx), c.n_ctx, fit)
        pool = KVCachePool(available_bytes=st.available, block_size=1, bytes_per_block=cache // max(1, c.n_ctx),
                           num_blocks=c.n_ctx, tokens=c.n_ctx, groups=len(m.caches), padding_layers=0,
                           blocks_per_request=c.n_ctx_seq)
        return Pool(st, pool, conc, cache, fits, fit, [row])

    def _gpu_cache(self, s: Setup, n_ctx: int) -> int:
        m = self.memory(s, n_ctx)
        gpu = f"{s.opts.llama.backend}0"
        return sum(b.bytes for b in m.buffers if b.device == gpu and b.kind in ("kv", "recurrent", "compute"))

    def check_budget(self, s: Setup, sts: list[Stage]) -> None:
        """No refusal: weights that overflow the GPU are an answer (fits false) with the most -ngl that fit
        (``llamacpp_fit``), as llama.cpp's --fit would lower -ngl."""

    def fit(self, s: Setup, quant: str | None = None) -> lc.LlamaFit:
        hp, weights = hparams_and_weights(s.card, s.w_t.bits, quant or s.opts.llama.gguf_quant)
        return lc.fit(hp, s.opts.llama, s.total - lc.FIT_TARGET, weights)

    def quant_table(self, s: Setup) -> list[lc.QuantFit] | None:
        """A card without a GGUF: each llama-quantize type's weights and what fits (the quant-type search)."""
        from kvplan.cost.gguf_quant import FILE_TYPES, quant_weights
        from kvplan.model.gguf import gguf_path_of

        if gguf_path_of(s.card) is not None or s.card.mla or s.card.ssm or s.card.shared_blocks:
            return None
        f, rows = s.opts.llama, []
        for q in FILE_TYPES:
            layers, inp, out = quant_weights(s.card, q)
            ft = self.fit(s, q)
            rows.append(lc.QuantFit(quant=q, model_bytes=sum(layers) + inp + out - (inp if s.card.tie_embeddings
                                                                                    else 0),
                                    max_n_ctx=ft.max_n_ctx, max_gpu_layers=ft.max_gpu_layers,
                                    fits=ft.max_n_ctx >= (f.n_ctx or 0) and ft.max_n_ctx > 0))
        return rows

    def plan_extras(self, s: Setup) -> dict:
        m = self.memory(s)
        return {"context": m.context, "buffers": m.buffers, "caches": m.caches, "llamacpp_fit": self.fit(s),
                "quants": self.quant_table(s)}

    def activation_estimated(self, s: Setup) -> bool:
        return True

    def requested_rule(self, s: Setup) -> str:
        return "the whole GPU (llama.cpp allocates its buffers directly; --fit keeps 1 GiB free)"

    def activation_rule(self, s: Setup) -> str:
        return "compute buffer, ESTIMATED (llama.cpp measures it at start-up)"

    def pool_summary(self, p: Pool, s: Setup) -> str:
        return f" (n_ctx {p.pool.tokens:,} cells)"

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        from kvplan.model.gguf import gguf_path_of

        f, m = s.opts.llama, self.memory(s)
        cmd = ["llama-server", f"-m {gguf_path_of(s.card) or repo + '.gguf'}", f"-c {m.context.n_ctx}"]
        if f.n_parallel is not None:
            cmd.append(f"-np {f.n_parallel}")
        if f.kv_unified and f.n_parallel is not None:
            cmd.append("-kvu")
        cmd += [f"-ctk {f.type_k}"] if f.type_k != "f16" else []
        cmd += [f"-ctv {f.type_v}"] if f.type_v != "f16" else []
        cmd += [f"-fa {f.flash_attn}"] if f.flash_attn != "auto" else []
        cmd += [f"-ngl {f.n_gpu_layers}"] if f.n_gpu_layers is not None else []
        cmd += ["--swa-full"] if f.swa_full else []
        cmd += [f"-ub {f.n_ubatch}"] if f.n_ubatch != 512 else []
        return " ".join(cmd)

    def notes(self, s: Setup, p: Pool) -> list[str]:
        m = self.memory(s)
        c = m.context
        out = [f"{self.display_name} ({c.rules} rules): n_ctx {c.n_ctx:,} cells, {c.n_ctx_seq:,} per slot, "
               f"{c.n_seq_max} slot(s){', unified cache' if c.kv_unified else ''}; {c.n_gpu_layers}/{c.n_layer + 1} "
               "layers on the GPU. Buffers per device in the JSON (buffers); the compute buffer is ESTIMATED "
               "(llama.cpp measures it; error on public logs in docs/llamacpp.md); the output buffer is in host "
               "memory."]
        ft = self.fit(s)
        out.append(f"Fit (GPU memory less --fit's 1 GiB margin, {fmt_bytes(ft.budget_bytes)}): at most -c "
                   f"{ft.max_n_ctx:,} with these layers; at most -ngl {ft.max_gpu_layers} at -c {c.n_ctx:,}.")
        quants = self.quant_table(s)
        if quants:
            ok = [q.quant for q in quants if q.fits]
            out.append(f"GGUF quant types that fit with all layers on the GPU at -c {c.n_ctx:,} (llama-quantize rules, "
                       f"no imatrix overrides): {', '.join(ok) or 'none'}" + (f"; launch with --gguf-quant {ok[0]}"
                                                                              " sized here" if ok else "") + ".")
        return out + list(m.notes) + [c.log_line() for c in m.caches]
