"""A typer command with the same options as `kvplan estimate` that does nothing: the floor any typer CLI pays."""

from typing import Optional

import typer

app = typer.Typer(add_completion=False)


@app.command()
def estimate(model: str = typer.Option(..., "--model"), batch: int = 1, seq_len: int = typer.Option(..., "--seq-len"),
             encoder_len: Optional[int] = None, kv_dtype: Optional[str] = None, weight_dtype: Optional[str] = None,
             kv_heads: Optional[int] = None, attention: Optional[str] = None, engine: str = "ideal",
             max_cache_len: Optional[int] = None, block_size: int = 16, as_json: bool = typer.Option(False, "--json")):
    pass


if __name__ == "__main__":
    app()
