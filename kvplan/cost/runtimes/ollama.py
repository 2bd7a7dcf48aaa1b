"""Ollama: llama-server under the hood (since #16031, 2026-05), started with its own defaults.

``llm/llama_server.go`` (fb307609): ``llama-server --model M -c (num_ctx x num_parallel) -np num_parallel
[--cache-type-k T --cache-type-v T] --flash-attn on|off|auto [-ngl num_gpu]`` and no ``-kvu``: each slot gets num_ctx
cells (padded to 256). ``OLLAMA_NUM_PARALLEL`` defaults to 1; ``num_ctx`` (``OLLAMA_CONTEXT_LENGTH`` 0) defaults by
total VRAM (``server/routes.go`` Serve: the sum over every GPU of ``TotalMemory - OLLAMA_GPU_OVERHEAD``, 0 by default):
>= 47 GiB 262144, >= 23 GiB 32768, else 4096, capped at the model's context length (``llm/server.go``
NewLlamaServer's trainCtx cap).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.cost.runtimes.setup import Options, Setup
from kvplan.cost.runtimes.llamacpp import LlamaCpp

GIB = 2**30


def default_num_ctx(total_vram: int, context_length: int) -> int:
    """server/routes.go: num_ctx by VRAM tier when OLLAMA_CONTEXT_LENGTH is 0, capped at the model's context."""
    tier = 262144 if total_vram >= 47 * GIB else 32768 if total_vram >= 23 * GIB else 4096
    return min(tier, context_length) if context_length else tier


class Ollama(LlamaCpp):
    name = "ollama"
    display_name = "Ollama"
    rules = "Ollama fb307609 (2026-08) over llama.cpp b10488 rules (kvplan.cost.llamacpp)"
    description = "Ollama: llama-server with -c num_ctx x num_parallel -np num_parallel, no unified cache"
    default_parallel = 1  # OLLAMA_NUM_PARALLEL
    # no num_gpu: not llama-server's 2025-02 default of no layer (Ollama's 2025 runner passed --n-gpu-layers of its
    # own fit, llm/server.go NewLlamaServer at d7d7e996 of 2025-02-26: opts.NumGPU = EstimateGPULayers(...).Layers;
    # from #16031 it starts a current llama-server), so an estimate sizes every layer on the GPU as before
    server_default_ngl = False

    def resolve(self, flags, card, gpu, total, layout, max_model_len) -> Options:
        opts = super().resolve(flags, card, gpu, total, layout, max_model_len)
        f = opts.llama
        return Options(util=1.0, llama=replace(f, kv_unified=False))

    def launch_command(self, s: Setup, repo: str, revision: str | None = None) -> str:
        f = self.flags(s)
        env = [f"OLLAMA_NUM_PARALLEL={f.n_parallel}"]
        if f.type_k != "f16":
            env.append(f"OLLAMA_KV_CACHE_TYPE={f.type_k}")
        if f.flash_attn != "auto":
            env.append(f"OLLAMA_FLASH_ATTENTION={1 if f.flash_attn == 'on' else 0}")
        params = f"FROM ./{self.model_file(s, repo)}; " if f.gguf_quant else ""  # a card at a llama-quantize type
        params += f"PARAMETER num_ctx {f.n_ctx // f.n_parallel}"
        params += f"; PARAMETER num_gpu {f.n_gpu_layers}" if f.n_gpu_layers is not None else ""
        return f"{' '.join(env)} ollama serve  (Modelfile: {params})"

    def notes(self, s: Setup, p) -> list[str]:
        hp_ctx = s.card.max_position_embeddings
        gpus = s.layout.gpus
        vram = s.total * gpus  # server/routes.go: every GPU's TotalMemory - OLLAMA_GPU_OVERHEAD (0 by default), summed
        return super().notes(s, p) + [
            f"Ollama's default num_ctx on {vram / GIB:.0f} GiB of VRAM ({gpus} x {s.total / GIB:.1f} GiB, summed over "
            f"the GPUs less OLLAMA_GPU_OVERHEAD, 0 by default) would be {default_num_ctx(vram, hp_ctx):,} "
            f"(server/routes.go VRAM tiers, capped at the model's {hp_ctx:,} by llm/server.go); this plan uses "
            f"{s.opts.llama.n_ctx // s.opts.llama.n_parallel:,} per slot."]
