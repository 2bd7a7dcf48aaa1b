"""Two or three real examples per command, shown at the end of its ``--help`` (typer's ``epilog``).

Each one runs as written from a checkout's root (tests/test_help_examples.py parses every command's help and runs
its examples through the CLI); the files an example names are the repository's own (``model_cards/``,
``kvplan.toml``) or ones it tells you to make (``my-model/config.json``: a model's Hugging Face config).
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "kvplan": (
        ("kvplan estimate -m llama-3-8b --seq-len 8192 --batch 16", "KV cache and weights of a batch"),
        ("kvplan plan -m llama-3.1-70b --max-model-len 8192 --concurrency 16 --sort cost", "which GPUs, cheapest first"),
        ("kvplan gpus list", "the GPU catalog: memory torch sees, bandwidth, FLOP/s, price"),
    ),
    "estimate": (
        ("kvplan estimate -m llama-3-8b --seq-len 8192 --batch 16", "KV cache, weights and the formula"),
        ("kvplan estimate -m llama-3-8b --seq-len 8192 --gpu H100-SXM --engine vllm", "+ FLOPs and the roofline"),
        ("kvplan estimate -m llama-2-70b --seq-len 4096 --attention mha --json", "what-if: no GQA, as JSON"),
    ),
    "plan": (
        ("kvplan plan -m llama-3.1-70b --gpu H100-SXM --tp 4 --max-model-len 8192", "requests that fit on 4 GPUs"),
        ("kvplan plan -m llama-3.1-70b --max-model-len 8192 --concurrency 16 --sort cost",
         "which GPUs, cheapest first"),
        ("kvplan plan -m qwen3-8b --gpu L40S --max-model-len 32768 --engine sglang", "SGLang's pool"),
    ),
    "compare": (
        ("kvplan compare -m llama-2-70b --attention mha,gqa:8,mqa,mla:512 --seq-len 4096", "KV per layout"),
        ("kvplan compare -m llama-2-70b --attention gqa:8,mla:512 --gpu H100-SXM --tp 4 --seq-len 4096 "
         "--engine vllm", "+ max batch on 4 H100s"),
    ),
    "sweep": (
        ("kvplan sweep -m llama-3-8b,gemma-2-9b --seq-len 4096,32768 --batch 1,16", "a grid as a table"),
        ("kvplan sweep -m llama-3-8b --seq-len 8192 --gpu H100-SXM --tp 1,2 --format csv", "CSV for a spreadsheet"),
    ),
    "report": (
        ("kvplan report -m llama-2-70b --gpu H100-SXM --tp 4 --max-model-len 8192 -o report.html",
         "one self-contained HTML page"),
        ("kvplan report -m llama-3-8b -m gemma-2-9b --gpu H100-SXM,L40S --max-model-len 8192 -o report.md",
         "two models, two GPUs, Markdown"),
    ),
    "verify": (
        ("kvplan verify -m llama-2-7b --layers 1 --scale 0.0625", "measure a shrunk real model (needs torch)"),
        ("kvplan verify -m mistral-7b-v0.1 --layers 2 --scale 0.0625 --engine hf-static", "transformers' cache"),
    ),
    "check": (
        ("kvplan check", "every scenario of kvplan.toml against its budgets and baseline"),
        ("kvplan check --format github", "annotations on the lines responsible, for CI"),
        ("kvplan check --schema", "the config's JSON Schema"),
    ),
    "disagg": (
        ("kvplan disagg -m llama-3.1-70b --gpu H100-SXM --rate 10 --isl 2048 --osl 256 --ttft-ms 2000 --tpot-ms 50",
         "prefill and decode workers for 10 req/s"),
        ("kvplan disagg -m llama-3-8b --gpu L40S --rate 5 --isl 4096 --osl 512 --ttft-ms 1000 --tpot-ms 40 --json",
         "as JSON"),
    ),
    "cards list": (
        ("kvplan cards list", "every bundled card"),
        ("kvplan cards list --json", "for programs"),
    ),
    "cards show": (
        ("kvplan cards show gemma-2-9b", "one card as YAML, and what it implies"),
        ("kvplan cards show model_cards/llama-2-7b.yaml", "a card file"),
    ),
    "cards validate": (
        ("kvplan cards validate model_cards/llama-2-7b.yaml", "exit 0 when valid"),
        ("kvplan cards validate model_cards/llama-2-7b.yaml model_cards/gemma-2-9b.yaml", "several files: every "
         "problem of every file on stderr"),
    ),
    "cards import": (
        ("kvplan cards import my-model/config.json", "a Hugging Face config.json as a card (printed)"),
        ("kvplan cards import my-model/config.json --name my-model -o my-model.yaml --force", "written to a file"),
    ),
    "cards schema": (
        ("kvplan cards schema", "the JSON Schema of a card, for your editor"),
    ),
    "gpus list": (
        ("kvplan gpus list", "memory, visible total, bandwidth, peak FLOP/s, price"),
        ("kvplan gpus list --json", "every figure, exact"),
    ),
    "gpus show": (
        ("kvplan gpus show H100-SXM", "one GPU with the source of each figure"),
        ("kvplan gpus show l40s", "names are case-insensitive"),
    ),
}


def epilog(command: str) -> str:
    """The examples of ``command`` ("plan", "cards list") for its help: what each shows as a comment line, then the
    command line (typer prints the epilog's lines as written)."""
    return "Examples:\n\n" + "\n\n".join(f"  # {what}\n  {line}" for line, what in EXAMPLES[command])
