"""An empty typer command with the options of `kvplan estimate`: the floor any typer CLI pays.

Same shape as kvplan's: a root group with the flags --version and --debug, and a subcommand `estimate` that
declares the 18 options `kvplan estimate` does, with the same types and defaults, and does nothing. It imports
typer (and so pydantic and click) and parses the options; it prints nothing, so it does not import rich.
"""

from typing import Optional

import typer

app = typer.Typer(add_completion=False)


@app.callback()
def root(version: bool = typer.Option(False, "--version", is_eager=True), debug: bool = typer.Option(False, "--debug")):
    pass


@app.command()
def estimate(model: Optional[str] = typer.Option(None, "--model", "-m"), hf_config: Optional[str] = None,
             batch: int = 1, seq_len: int = typer.Option(..., "--seq-len"), encoder_len: Optional[int] = None,
             kv_dtype: Optional[str] = None, weight_dtype: Optional[str] = None, kv_heads: Optional[int] = None,
             attention: Optional[str] = None, engine: str = "ideal", max_cache_len: Optional[int] = None,
             block_size: int = 16, prompt_len: Optional[int] = None, gpu: Optional[str] = None,
             gpu_file: Optional[str] = None, mfu: Optional[float] = None, mbu: Optional[float] = None,
             as_json: bool = typer.Option(False, "--json")):
    pass


if __name__ == "__main__":
    app()
