"""An empty typer command with the options of `kvplan estimate`: the floor any typer CLI pays.

Same shape as kvplan's: a root group with the flags --version and --debug, and a subcommand `estimate` that
declares the 36 options `kvplan estimate` does (18 until the llama.cpp, GGUF and LoRA options joined them), with
the same flags, types and defaults, and does nothing. It imports typer (and so pydantic and click) and parses the
options; it prints nothing, so it does not import rich. tests/test_cold_start.py keeps the two option lists equal.
"""

from typing import List, Optional

import typer

app = typer.Typer(add_completion=False)


@app.callback()
def root(version: bool = typer.Option(False, "--version", is_eager=True), debug: bool = typer.Option(False, "--debug")):
    pass


@app.command()
def estimate(model: Optional[str] = typer.Option(None, "--model", "-m"), gguf: Optional[str] = None,
             hf_config: Optional[str] = None,
             batch: int = 1, seq_len: int = typer.Option(..., "--seq-len"), encoder_len: Optional[int] = None,
             kv_dtype: Optional[str] = None, weight_dtype: Optional[str] = None, kv_heads: Optional[int] = None,
             attention: Optional[str] = None, engine: str = "ideal", max_cache_len: Optional[int] = None,
             block_size: Optional[int] = None,
             enable_prefix_caching: Optional[bool] = typer.Option(
                 None, "--enable-prefix-caching/--no-enable-prefix-caching"),
             prompt_len: Optional[int] = None, gpu: Optional[str] = None,
             gpu_file: Optional[str] = None, mfu: Optional[float] = None, mbu: Optional[float] = None,
             ctx_size: Optional[int] = typer.Option(None, "--ctx-size", "-c"),
             parallel: Optional[int] = typer.Option(None, "--parallel", "-np"),
             kv_unified: Optional[bool] = typer.Option(None, "--kv-unified/--no-kv-unified", "-kvu"),
             cache_type_k: Optional[str] = typer.Option(None, "--cache-type-k", "-ctk"),
             cache_type_v: Optional[str] = typer.Option(None, "--cache-type-v", "-ctv"),
             flash_attn: Optional[str] = typer.Option(None, "--flash-attn", "-fa"),
             n_gpu_layers: Optional[int] = typer.Option(None, "--n-gpu-layers", "-ngl"),
             swa_full: bool = typer.Option(False, "--swa-full"),
             ubatch_size: Optional[int] = typer.Option(None, "--ubatch-size", "-ub"),
             llamacpp_rules: Optional[str] = None, gguf_quant: Optional[str] = None,
             tensor_split: Optional[str] = typer.Option(None, "--tensor-split", "-ts"),
             override_tensor: Optional[List[str]] = typer.Option(None, "--override-tensor", "-ot"),
             cpu_moe: bool = typer.Option(False, "--cpu-moe", "-cmoe"),
             n_cpu_moe: Optional[int] = typer.Option(None, "--n-cpu-moe", "-ncmoe"),
             lora: Optional[List[str]] = None, lora_rank: Optional[int] = None, lora_targets: Optional[str] = None,
             as_json: bool = typer.Option(False, "--json")):
    pass


if __name__ == "__main__":
    app()
