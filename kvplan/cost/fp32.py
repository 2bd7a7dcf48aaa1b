"""Parameters transformers holds in float32 inside a half-precision model (the rule of transformers 5.24).

``PreTrainedModel._get_dtype_plan`` (transformers 5.24 ``modeling_utils.py``) keeps modules in float32 by name when
``from_pretrained`` loads a model: a class's ``_keep_in_fp32_modules_strict`` when the model loads in float16 or
bfloat16, its ``_keep_in_fp32_modules`` only in float16 (an fp16 overflow guard, huggingface/transformers#20287).
``core_model_loading.py`` matches the names with ``re.search`` over the parameter names, and keeps a parameter its
module built in another dtype (``torch.float32`` explicitly) in that dtype. A float32 load holds everything in float32
anyway; the packed int8 / int4 weight dtypes have no transformers load, so nothing is kept there. What a card keeps
(``card.hf_fp32``, set by the family readers), checked against transformers 5.24's own models
(tests/test_hf_fp32.py):

- ``router`` (fp16 and bf16): the MoE router's weight (and its bias parameter). DeepSeek-V2
  ``_keep_in_fp32_modules_strict = ["gate.weight"]``, DeepSeek-V3 ``["e_score_correction_bias", "gate.weight"]``,
  Kimi-Linear and ERNIE-4.5-MoE (whose ``e_score_correction_bias`` is a parameter: the card's router_bias); their
  TopkRouter modules also build the weight in float32. DeepSeek-V3's and Kimi's ``e_score_correction_bias`` is a
  buffer, not a weight. Earlier 5.x releases (5.20 to 5.2x) built the DeepSeek routers in the model dtype.
- ``dt_bias`` (fp16 and bf16): Kimi-Linear's KDA forget-gate ``dt_bias`` (in the strict list and built in float32).
- ``a_log`` (fp16 and bf16): built in float32 (the log of a float32 range) by Zamba's Mamba mixer (I x N per mixer)
  and OLMo-hybrid's Gated DeltaNet (one per head).
- ``norms`` (fp16 only): gpt-oss ``_keep_in_fp32_modules = ["post_attention_layernorm", "input_layernorm", "norm"]``:
  every parameter of a module named ``*norm*``.
- ``ffn_out`` (fp16 only): T5 ``_keep_in_fp32_modules = ["wo"]``, the ``DenseReluDense.wo`` of every block.

vLLM keeps the model dtype for all of these: ``DeepseekV2MoE`` builds its router as ``GateLinear(hidden, n_experts,
out_dtype=...)`` without ``params_dtype`` (vllm/model_executor/models/deepseek_v2.py), so the weight is in the model
dtype and only the logits are float32 (``out_dtype``); kvplan counts the other engines' weights in the model dtype.
"""

from __future__ import annotations

from kvplan.cost.params import attention_extras, count_params
from kvplan.cost.shapes import ffn_matrices, router_matrices, total
from kvplan.model.card import ModelCard
from kvplan.model.dtypes import DType

FP32_BYTES = 4
_STRICT = frozenset({"router", "dt_bias", "a_log"})  # kept in fp16 and bf16 loads; the others in fp16 only


def hf_fp32_parts(card: ModelCard, w_t: DType) -> tuple[str, ...]:
    """The card's ``hf_fp32`` parts transformers keeps in float32 when it loads the model in ``w_t``."""
    if w_t.name not in ("fp16", "bf16"):
        return ()
    return tuple(p for p in card.hf_fp32 if p in _STRICT or w_t.name == "fp16")


def hf_fp32_params(card: ModelCard, w_t: DType) -> int:
    """Parameters transformers holds in float32 (4 bytes each) when it loads the card's model in ``w_t``."""
    return sum(part_params(card, p) for p in hf_fp32_parts(card, w_t))


def part_params(card: ModelCard, part: str) -> int:
    """The parameters of one ``hf_fp32`` part, over the whole model."""
    if part == "router":  # the router of every MoE layer (not Qwen2-MoE's shared_expert_gate)
        return card.ffn_layers[1] * total(tuple(m for m in router_matrices(card) if m.name == "router"))
    if part == "norms":  # the block and final norms, and the attention's own (q/k, MLA latent) norms
        sinks = card.num_heads if card.attention_sinks else 0
        return count_params(card).norms + card.attention_layers * (attention_extras(card) - sinks)
    if part == "ffn_out":  # the down projection of every dense FFN, the encoder's included (T5 wo)
        return (card.ffn_layers[0] + (card.num_encoder_layers or 0)) * ffn_matrices(card, card.ffn_size)[-1].params
    s = card.ssm
    if part == "a_log":  # Mamba-1: I x N per mixer; Mamba-2, Gated DeltaNet, KDA: one per head
        return card.state_layers * (s.intermediate_size * s.d_state if s.kind == "mamba" else s.num_heads)
    # dt_bias: KDA one per channel (I), Mamba-2 and Gated DeltaNet one per head
    return card.state_layers * (s.intermediate_size if s.kind == "kda" else s.num_heads)


def fp32_note(card: ModelCard, w_t: DType, params: int) -> str:
    """Why ``params`` of the weights are counted at 4 bytes."""
    parts = ", ".join(p.replace("ffn_out", "FFN output (wo)") for p in hf_fp32_parts(card, w_t))
    rule = "_keep_in_fp32_modules_strict" if w_t.name == "bf16" else "_keep_in_fp32_modules(_strict)"
    return (f"transformers keeps {card.name}'s {parts} in float32 when it loads the model in {w_t.name} ({rule}, "
            f"transformers 5.24): {params:,} parameters counted at 4 bytes (weights.fp32_params); vLLM holds them "
            "in the model dtype.")
