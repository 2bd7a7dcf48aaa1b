"""The card a command runs on: a bundled name, a card path, or a Hugging Face config.json."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.catalog import load_card


def resolve_card(model: str | None, hf_config: str | None, gguf: str | None = None,
                 engine: str | None = None, per_layer_ok: bool = False) -> ModelCard:
    """The card a command runs on: ``--model NAME|PATH``, ``--hf-config PATH`` or ``--gguf FILE`` (exactly one);
    ``engine``: the runtime a plan sizes, as named; ``per_layer_ok``: it sizes each layer from the GGUF itself (a
    GGUF with per-layer K/V heads is planned only by such a runtime)."""
    if sum(x is not None for x in (model, hf_config, gguf)) != 1:
        raise KvplanError("give exactly one of --model NAME|PATH, --hf-config PATH and --gguf FILE")
    for flag, value in (("--model", model), ("--hf-config", hf_config), ("--gguf", gguf)):
        if value is not None and not str(value).strip():
            raise KvplanError(f"{flag}: empty; allowed: a bundled card name (`kvplan cards list`), a card or config "
                              "file, or a Hugging Face id" if flag == "--model" else f"{flag}: empty; allowed: a file")
    if gguf is not None:
        from kvplan.model.gguf_card import card_from_gguf  # the gguf package: only when a GGUF is given

        return card_from_gguf(gguf, engine=engine, per_layer_ok=per_layer_ok)
    if hf_config is not None:
        from kvplan.model.hf.config import card_from_hf_config  # 40 model families: read only when asked for

        return card_from_hf_config(hf_config)
    return load_card(model)
