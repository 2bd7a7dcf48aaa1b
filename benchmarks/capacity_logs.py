"""Reproduce public vLLM / SGLang start-up logs with `kvplan.plan`; prints the markdown table of docs/capacity.md.

    PYTHONPATH=. python benchmarks/capacity_logs.py

Each case gives kvplan the log's own inputs (model, layout, max_model_len and, where the log states it, the KV
memory as --kv-cache-memory) and compares the figures the log prints. Sources are quoted in docs/capacity.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.model.hf.config import card_from_hf_config
from kvplan.planning.capacity import plan

GIB = 2**30
_HYBRID = json.loads((Path(__file__).parents[1] / "tests" / "data" / "hf_configs_hybrid.json").read_text())["configs"]


def hybrid(repo: str, **override):
    """A card from a vendored full-size hybrid config.json (tests/data/hf_configs_hybrid.json)."""
    return card_from_hf_config({**_HYBRID[repo], **override})


@dataclass
class Case:
    ref: str  # short source reference
    what: str  # model, GPU, layout, engine version
    kw: dict  # kvplan.plan arguments
    logged: dict  # figure -> logged value
    note: str = ""
    extra: dict = field(default_factory=dict)


CASES = [
    Case("vllm#10517 (1a)", "Llama-3.1-8B, RTX 3090, TP1, vLLM V0, max_len 20,000",
         dict(model="llama-3.1-8b", gpu="RTX-4090", max_model_len=20000, kv_cache_memory="3.81GiB",
              engine="vllm==0.6.4"),
         {"blocks": 1952, "concurrency": 1.56}),
    Case("vllm#10517 (1b)", "Llama-3.1-8B, RTX 3090, TP1, vLLM V0, max_len 29,000",
         dict(model="llama-3.1-8b", gpu="RTX-4090", max_model_len=29000, kv_cache_memory="2.89GiB",
              engine="vllm==0.6.4"),
         {"blocks": 1478, "concurrency": 0.82, "longest fit": 23648}),
    Case("vllm#21348", "Qwen3-235B-A22B-FP8, 4x H100, TP4, vLLM V1 (Jul 2025), max_len 40,960 (default)",
         dict(model="qwen3-235b-a22b", gpu="H100-SXM", tp=4, max_model_len=40960, kv_cache_memory="8.11GiB",
              weight_dtype="fp8_e4m3"),
         {"tokens": 178880}),
    Case("LMCache#1739", "Qwen3-14B, A100-40GB, TP1, vLLM 0.10.2, max_len 32,768",
         dict(model="qwen3-14b", gpu="A100-40GB", max_model_len=32768, kv_cache_memory="6.51GiB"),
         {"tokens": 42656, "concurrency": 1.30}),
    Case("LMCache#3430", "Qwen3-8B, RTX A5000, TP1, vLLM 0.21.0, max_len 16,384",
         dict(model="qwen3-8b", gpu="A10G", max_model_len=16384, kv_cache_memory="6.37GiB"),
         {"tokens": 46368, "concurrency": 2.83}),
    Case("aws-samples/sample-claude-code-multi-model", "Qwen3-Coder-30B-A3B, 4x L40S, TP4, vLLM 0.24.0, max_len 32,768",
         dict(model="qwen3-30b-a3b", gpu="L40S", tp=4, max_model_len=32768, kv_cache_memory="23.74GiB"),
         {"tokens": 1037152, "concurrency": 31.65}),
    Case("ArmDeveloperEcosystem/arm-learning-paths", "Mistral-7B-Instruct-v0.2 GPTQ, DGX Spark, TP1, vLLM 0.11.0",
         dict(model="mistral-7b-v0.2", gpu="B200", max_model_len=32768, kv_cache_memory="102.56GiB"),
         {"blocks": 52510, "tokens": 840160, "concurrency": 25.64}),
    Case("vllm#20665", "DeepSeek-V2-Lite (MLA), 4x L4, TP2 x PP2, vLLM V1 dev, max_len 1,024",
         dict(model="deepseek-v2-lite", gpu="L4", tp=2, pp=2, max_model_len=1024, kv_cache_memory="12.13GiB"),
         {"tokens": 807792, "concurrency": 788.86}),
    Case("vllm#15871", "DeepSeek-V2-Lite-Chat (MLA), TP1, vLLM 0.8.3.dev, max_len 32,768",
         dict(model="deepseek-v2-lite", gpu="L4", max_model_len=32768, kv_cache_memory="0.93GiB"),
         {"needed GiB": 0.95, "fits": False}),
    Case("eole-nlp/eole", "Gemma-3-1b-it (5 sliding : 1 global), TP1, vLLM 0.13.0, max_len 2,048",
         dict(model="gemma-3-1b", gpu="H100-SXM", max_model_len=2048, kv_cache_memory="25.39GiB"),
         {"padding layers": 2, "concurrency": 461.21, "tokens": 950864}),
    Case("vllm#19996", "Llama-3.1-8B + EAGLE draft, H100, TP1, vLLM 0.9.1.dev, max_len 131,072",
         dict(model="llama-3.1-8b", gpu="H100-SXM", max_model_len=131072, kv_cache_memory="51.63GiB",
              speculative_config={"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
                                  "num_speculative_tokens": 3}),
         {"tokens": 410128, "concurrency": 3.13}),
    Case("vllm PR#2031", "Llama-2-7B, A100-80GB, TP1, vLLM (Dec 2023), util 0.9: full budget, no KV figure given",
         dict(model="llama-2-7b", gpu="A100-80GB", gpu_memory="80GiB", max_model_len=4096, engine="vllm==0.2",
              gpu_memory_utilization=0.9),
         {"blocks": 7351}),
    Case("vllm PR#2031", "Llama-2-70B, 4x A100-80GB, TP4, vLLM (Dec 2023), util 0.9: full budget",
         dict(model="llama-2-70b", gpu="A100-80GB", gpu_memory="80GiB", tp=4, max_model_len=4096, engine="vllm==0.2",
              gpu_memory_utilization=0.9),
         {"blocks": 20865}),
    Case("vllm#21348 (SGLang)", "Qwen3-235B-A22B-FP8, 4x H100, tp 4, SGLang (Jul 2025), mfs 0.93: K 8.23 + V 8.23 GiB "
         "for 367,404 tokens",
         dict(model="qwen3-235b-a22b", gpu="H100-SXM", tp=4, max_model_len=40960, engine="sglang",
              mem_fraction_static=0.93, weight_dtype="fp8_e4m3"),
         {"KV bytes/token (implied)": 48105}),
    Case("didier-durand/llms-in-clouds", "QwQ-32B, 4x L4, tp 4, SGLang 0.4.3.post4, mfs 0.85: free 21.63 GiB at start",
         dict(model="qwq-32b", gpu="L4", tp=4, max_model_len=131072, engine="sglang", gpu_memory="21.63GiB",
              context_memory=0, mem_fraction_static=0.85),
         {"weights GiB": 15.54, "tokens": 46611}),
    Case("public log (file 7292846353)", "Qwen3-Next-80B-A3B-Instruct (36 Gated DeltaNet + 12 attention), 2x H200, TP2, "
         "vLLM 0.10.2, max_len 262,144",
         dict(model=hybrid("Qwen/Qwen3-Next-80B-A3B-Instruct"), gpu="H200", tp=2, max_model_len=262144,
              kv_cache_memory="44.59GiB", engine="vllm==0.10.2"),
         {"block size": 544, "mamba padding %": 1.49, "tokens (0.10 formula)": 973760, "concurrency": 14.77,
          "weights GiB": 74.2812}),
    Case("MetaX C500 lifecycle notes", "LFM2.5-1.2B-Instruct (10 short conv + 6 attention), TP1, vLLM 0.17.0, "
         "max_len 2,048; KV memory implied by the log's two figures (40,738 blocks)",
         dict(model=hybrid("LiquidAI/LFM2.5-1.2B-Instruct"), gpu="L4", max_model_len=2048,
              kv_cache_memory=40738 * 6 * 32768, engine="vllm==0.17"),
         {"block size": 16, "mamba padding %": 300.0, "padding layers": 2, "tokens (0.10 formula)": 217264,
          "concurrency": 313.37}),
    Case("vllm#24280", "NVIDIA-Nemotron-Nano-9B-v2 (27 Mamba-2 + 4 attention), TP1, vLLM (Sep 2025: SSM state in the "
         "model dtype)",
         dict(model=hybrid("nvidia/NVIDIA-Nemotron-Nano-9B-v2", mamba_ssm_cache_dtype="auto"), gpu="H100-SXM",
              max_model_len=8192, kv_cache_memory="20GiB"),
         {"block size": 672}),
    Case("vllm#23230", "NVIDIA-Nemotron-Nano-9B-v2, L40S, TP1, vLLM 0.10.1 (V0 runner): weights only",
         dict(model=hybrid("nvidia/NVIDIA-Nemotron-Nano-9B-v2"), gpu="L40S", max_model_len=8192,
              kv_cache_memory="10GiB"),
         {"weights GiB": 16.5557}),
]


def figures(r) -> dict:
    return {"blocks": r.kv_cache.num_blocks, "tokens": r.kv_cache.tokens, "concurrency": r.max_concurrency,
            "longest fit": r.max_model_len_fit, "needed GiB": r.request_kv_bytes / GIB, "fits": r.fits,
            "padding layers": r.kv_cache.padding_layers, "weights GiB": r.per_gpu.weights_bytes / GIB,
            "KV bytes/token (implied)": r.per_gpu.kv_bytes_per_token, "block size": r.kv_cache.block_size,
            # vLLM 0.10 - 0.17 printed num_blocks // groups x block_size for hybrid models
            "tokens (0.10 formula)": r.kv_cache.num_blocks // r.kv_cache.groups * r.kv_cache.block_size,
            "mamba padding %": round(100 * ((r.kv_cache.state_page_padded_bytes or r.kv_cache.state_page_bytes)
                                            - r.kv_cache.state_page_bytes) / max(1, r.kv_cache.state_page_bytes), 2)}


def fmt(v) -> str:
    if isinstance(v, bool):
        return "fits" if v else "does not fit"
    return f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"


def error(ours, logged) -> str:
    if isinstance(logged, bool) or isinstance(logged, int) and logged < 10:
        return "exact" if ours == logged else "differs"
    e = (ours - logged) / logged * 100
    return "exact" if abs(e) < 0.005 else f"{e:+.2f}%"


def main() -> None:
    print("| # | source | case | kvplan input | figure | logged | kvplan | error |")
    print("|---|---|---|---|---|---|---|---|")
    for i, c in enumerate(CASES, 1):
        kw = dict(c.kw)
        model = kw.pop("model")
        got = figures(plan(model, **kw, kv_cache_memory_what_if="kv_cache_memory" in kw))  # logged pools: what-ifs
        memory = kw.get("kv_cache_memory")
        given = (f"{memory / GIB:.2f}GiB" if isinstance(memory, int) else memory) or ("mfs " + str(kw["mem_fraction_static"]) if "mem_fraction_static" in kw
                                              else f"util {kw.get('gpu_memory_utilization')}, {kw.get('gpu_memory')}")
        for j, (name, logged) in enumerate(c.logged.items()):
            head = (f"{i} | {c.ref} | {c.what} | {given}" if j == 0 else " | | |")
            print(f"| {head} | {name} | {fmt(logged)} | {fmt(got[name])} | {error(got[name], logged)} |")


if __name__ == "__main__":
    main()
