"""llama.cpp's flags as the CLI takes them (QA F1-7, F2 0 and 3): estimate's KV rows are llama.cpp's own caches,
a plan's slot search keeps --kv-unified, and another engine refuses the llama.cpp flags that were given, by name."""

from __future__ import annotations

import pytest

GIB = 2**30


LLAMA_ONLY = [(("--swa-full",), "--swa-full"), (("-ub", "256"), "-ub/--ubatch-size"),
              (("--kv-unified",), "--kv-unified"), (("--no-kv-unified",), "--no-kv-unified"),
              (("--cpu-moe",), "--cpu-moe"), (("-ncmoe", "2"), "-ncmoe/--n-cpu-moe"),
              (("--gguf-quant", "Q4_K_M"), "--gguf-quant"), (("--lora-rank", "8"), "--lora-rank"),
              (("--lora-targets", "attn_q"), "--lora-targets"), (("--llamacpp-rules", "2025-12"), "--llamacpp-rules"),
              (("-ts", "1,1"), "-ts/--tensor-split"), (("-ot", "exps=CPU"), "-ot/--override-tensor"),
              (("-c", "4096", "-np", "2"), "-c/--ctx-size, -np/--parallel")]


@pytest.mark.parametrize("flags, named", LLAMA_ONLY)
@pytest.mark.parametrize("command", ["estimate", "plan", "report"])
def test_another_engine_names_the_llama_cpp_flags_given(cli, tmp_path, command, flags, named):
    """F2 3: every llama.cpp flag was refused as '-c/-np/-ctk/-ctv/-fa/-ngl', whichever was typed."""
    head = {"estimate": ("estimate", "-m", "llama-3-8b", "--seq-len", "100"),
            "plan": ("plan", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096"),
            "report": ("report", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "4096", "-o",
                       str(tmp_path / "r.md"))}[command]
    for engine in ("vllm", "sglang"):
        code, _, err = cli(*head, "--engine", engine, *flags)
        assert code == 2 and err.strip() == f"error: {named}: only for --engine llamacpp or ollama (got --engine {engine})"
