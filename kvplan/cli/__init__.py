"""The `kvplan` command line (typer): one module per command group; each command parses, calls one library
function and hands the result to kvplan.report.

``main`` is the entry point (the `kvplan` script, ``python -m kvplan``): it first makes Ctrl-C and SIGTERM exit at
once and quietly (130 / 143: nothing has been written yet), then imports the app, whose commands take those signals
over when they start (``kvplan.cli.errors.KvplanGroup.invoke``: KeyboardInterrupt, temporary files removed). A signal
during the imports printed a KeyboardInterrupt traceback from whatever module was loading."""

from kvplan.cli.signals import install_quiet


def main() -> None:
    install_quiet()
    from kvplan.cli.app import main as run

    run()


def __getattr__(name: str):
    if name == "app":  # the typer app, built on first use (kvplan.cli.app)
        from kvplan.cli.app import app

        return app
    raise AttributeError(name)


__all__ = ["app", "main"]
