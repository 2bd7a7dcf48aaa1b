"""Options shared by several commands, written once as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Model = Annotated[Optional[str], typer.Option("--model", "-m", help="Bundled card name (llama-2-7b) or a card .yaml.")]
HfConfig = Annotated[Optional[str], typer.Option("--hf-config", help="A Hugging Face config.json, or its folder.")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON (exact bytes).", metavar="")]
Batch = Annotated[int, typer.Option("--batch", help="Sequences held at once.")]
KvDtype = Annotated[Optional[str], typer.Option(
    "--kv-dtype", help="fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4; default: what the engine serves.")]
WeightDtype = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Weight dtype (same names); default: what the engine serves the checkpoint in.")]
Engine = Annotated[str, typer.Option("--engine", help="ideal, hf-dynamic, hf-static, vllm or sglang.")]
BlockSize = Annotated[int, typer.Option("--block-size", help="vllm: tokens per KV block.")]
EncoderLen = Annotated[Optional[int], typer.Option("--encoder-len", help="Encoder tokens (encoder-decoder models).")]
Gpu = Annotated[Optional[str], typer.Option("--gpu", help="A GPU of the catalog (`kvplan gpus list`), e.g. H100-SXM.")]
GpuFile = Annotated[Optional[str], typer.Option(
    "--gpu-file", help="YAML of extra or overriding GPUs (format: `kvplan gpus --help`).")]
Attention = Annotated[Optional[str], typer.Option(
    "--attention", help="What-if layout: mha, mqa, or gqa:G where G is the number of query heads per KV head.")]
