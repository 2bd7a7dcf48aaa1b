"""``ideal``: exactly the tokens attention needs, no pages, no overheads: the lower bound any engine can reach.

Its cache rules are the base rules of ``kvplan.cost.engines.Engine``; its serving rules the unpaged defaults of
``Runtime`` (a plan charges weights and nothing else against ``total x utilization``).
"""

from __future__ import annotations

from functools import cache

from kvplan.cost.runtimes.base import Runtime
from kvplan.model.quant import Mxfp4Layout


class Ideal(Runtime):
    name = "ideal"
    display_name = "ideal"
    reference_cache = True

    def decode_micro_batches(self, pp: int) -> int:
        """pp: the pipeline kept full (the lower bound any engine can reach)."""
        return pp

    @property
    def mxfp4_layout(self) -> Mxfp4Layout:  # type: ignore[override]
        """The checkpoint's MXFP4 blocks as stored, no kernel's padding: the lower bound (built when a plan first
        asks: validating it at import would build its schema on every cold ``kvplan estimate``)."""
        return _as_stored()


@cache
def _as_stored() -> Mxfp4Layout:
    return Mxfp4Layout(backend="as stored", hidden_pad=1, intermediate_pad=1)
