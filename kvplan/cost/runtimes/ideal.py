"""``ideal``: exactly the tokens attention needs, no pages, no overheads: the lower bound any engine can reach.

Its cache rules are the base rules of ``kvplan.cost.engines.Engine``; its serving rules the unpaged defaults of
``Runtime`` (a plan charges weights and nothing else against ``total x utilization``).
"""

from __future__ import annotations

from kvplan.cost.runtimes.base import Runtime
from kvplan.model.quant import Mxfp4Layout


class Ideal(Runtime):
    name = "ideal"
    display_name = "ideal"
    reference_cache = True
    # the checkpoint's MXFP4 blocks as stored, no kernel's padding: the lower bound
    mxfp4_layout = Mxfp4Layout(backend="as stored", hidden_pad=1, intermediate_pad=1)
