"""vLLM ``--cpu-offload-gb``: which decoder-layer parameters vLLM moves to CPU memory, and what stays on the GPU.

The rule (vLLM 0.17-0.33 ``vllm/model_executor/offloader/uva.py`` ``UVAOffloader._maybe_offload_to_cpu``; 0.10-0.16
the same loop as ``vllm/model_executor/models/utils.py`` ``maybe_offload_to_cpu``; V0 0.6-0.9 that function too),
called by ``models/utils.py`` ``make_layers`` on each decoder layer of the rank's pipeline stage, in layer order, as
the layer is built:

- the budget is ``int(cpu_offload_gb * 1024**3)`` bytes per GPU (0.17+ ``offloader/base.py`` ``create_offloader``;
  0.10-0.16 ``v1/worker/gpu_model_runner.py`` ``set_cpu_offload_max_bytes``; V0 ``worker/model_runner.py``);
- a layer is passed over once the offloaded bytes reach the budget; inside a layer each parameter, in
  ``named_parameters()`` order (kvplan.cost.parallel.layer_parameters), moves to (pinned) CPU memory while the
  offloaded bytes are still below the budget, so the last one moved may overshoot it ("we use per-parameter
  offloading: one module might have some parameters offloaded and some not");
- only make_layers' decoder layers are offered: the embedding, lm_head, the final norm and every buffer (the rotary
  cos/sin cache) stay on the GPU. 0.33's ``SupportsMultiModal._mark_tower_model`` also offers a multimodal tower, and
  state-space, shared-block, MLA and quantized layers register other parameters: kvplan refuses those.

What the GPU then holds: vLLM's ``Model loading took X GiB`` is ``torch.cuda.memory_allocated`` after the load, and an
offloaded parameter's GPU tensor is freed as its layer is built, so the weights per GPU are kvplan's less the
offloaded bytes, and the caching allocator's blocks of those tensors go with them: kvplan.cost.allocator's replay
frees them after each layer (``rounding_bytes(offload=)``), and the next layers' tensors reuse the freed blocks.
V1 reads an offloaded parameter in place through a UVA view of the pinned memory
(``get_accelerator_view_from_cpu_tensor``): its profile run copies nothing to the GPU.
V0 (and V1 with VLLM_WEIGHT_OFFLOADING_DISABLE_UVA=1, not modelled) wraps the layer's forward: it copies the layer's
whole ``state_dict()`` to the GPU for the call (``functional_call``), so the profile peak holds one offloaded layer's
parameters beside the activations.
"""

from __future__ import annotations

import math

from kvplan.cost.parallel import Layout, layer_parameters
from kvplan.errors import KvplanError
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType
from kvplan.units import MAX_SIZE_BYTES

GIB = 2**30  # --cpu-offload-gb's unit (here, not from serving_vllm, which imports the allocator that imports this)


def budget_bytes(cpu_offload_gb: float) -> int:
    """``int(cpu_offload_gb * 1024**3)`` (create_offloader); KvplanError for a negative, non-finite or absurd size."""
    if not math.isfinite(cpu_offload_gb) or not 0 <= cpu_offload_gb * GIB <= MAX_SIZE_BYTES:
        raise KvplanError(f"--cpu-offload-gb: a size in GiB from 0 to {MAX_SIZE_BYTES // GIB:,} (vLLM's "
                          f"cpu_offload_gb), got {cpu_offload_gb!r}")
    return int(cpu_offload_gb * GIB)


def check_offloadable(card: ModelCard) -> None:
    """Refuse, by flag, a card whose layers kvplan cannot list in vLLM's parameter order."""
    reason = ("a multimodal tower (0.33 offloads it too)" if card.vision else "state-space layers" if card.ssm
              else "shared blocks" if card.shared_blocks else "MLA attention" if card.mla
              else "a quantized checkpoint" if card.quantization else None)
    if reason:
        raise KvplanError(f"--cpu-offload-gb: kvplan lists vLLM's offloaded parameters for 16-bit attention "
                          f"decoders (dense or MoE); {card.name} has {reason}")


def offloaded_per_layer(card: ModelCard, w_t: DType, layout: Layout, layers: range, budget: int) -> tuple[int, ...]:
    """Bytes moved to CPU from each decoder layer of ``layers`` (one pipeline stage, on every one of its TP ranks)
    under a budget of ``budget`` bytes."""
    done, out = 0, []
    for i in layers:
        moved = moved_prefix(layer_parameters(card, w_t, layout, i), done, budget)
        out.append(sum(n for n, _ in moved))
        done += out[-1]
    return tuple(out)


def moved_prefix(params: tuple[tuple[int, bool], ...], done: int, budget: int) -> tuple[tuple[int, bool], ...]:
    """The parameters of one layer that ``_maybe_offload_to_cpu`` moves when ``done`` bytes are already offloaded:
    none once the budget is reached, else each in turn while the offloaded bytes are below it (the last one moved
    may overshoot)."""
    n = 0
    while n < len(params) and done < budget:
        done += params[n][0]
        n += 1
    return params[:n]
