"""The `kvplan` command line (typer): one module per command group; each command parses, calls one library
function and hands the result to kvplan.report."""

from kvplan.cli.app import app, main

__all__ = ["app", "main"]
