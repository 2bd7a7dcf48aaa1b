"""State-space mixers (Mamba-1, Mamba-2): the sizes a card's ``ssm:`` block gives, derived and checked once here.

``None`` means "derive", as on the card: ``intermediate_size`` is ``expand x hidden_size`` (transformers
``MambaConfig.__post_init__``, ``Mamba2Mixer``: ``int(config.expand * hidden_size)``); Mamba-1's ``dt_rank`` is
``ceil(hidden_size / 16)`` (``time_step_rank="auto"``); Mamba-2's ``head_dim`` is ``intermediate_size / num_heads``
(Bamba's ``mamba_d_head="auto"``).

What one sequence caches per state layer, whatever its length (Mamba paper arXiv:2312.00752 section 3.3.2;
Mamba-2 arXiv:2405.21060; transformers ``LinearAttentionLayer``, vLLM ``MambaStateShapeCalculator``):

- a convolution state: the last inputs of the depthwise causal conv1d, ``conv_dim`` channels (Mamba-1:
  intermediate_size; Mamba-2: intermediate_size + 2 x n_groups x d_state, the x, B and C it convolves);
- an SSM (recurrent) state: Mamba-1 ``intermediate_size x d_state``, Mamba-2 ``num_heads x head_dim x d_state``.

Two linear-attention mixers share the block, each with its own state rule:

- ``gated_deltanet`` (Gated DeltaNet, arXiv:2412.06464; Qwen3-Next ``Qwen3NextGatedDeltaNet``): ``num_heads`` value
  heads of ``head_dim`` and ``n_groups`` key (and query) heads of ``d_state`` channels, each key head shared by
  ``num_heads / n_groups`` value heads as Mamba-2 groups share B and C. Its conv covers q, k and v (conv_dim =
  intermediate_size + 2 x n_groups x d_state, the Mamba-2 formula); its recurrent state is one d_state x head_dim
  matrix per value head, held as (num_heads, d_state, head_dim) (transformers ``recurrent_states``, vLLM
  ``MambaStateShapeCalculator.gated_delta_net_state_shape``).
- ``short_conv`` (LFM2 ``Lfm2ShortConv``): a gated depthwise conv over the hidden width, no recurrence: only a
  conv state (hidden_size channels x d_conv), no d_state, no heads.
- ``lightning`` (MiniMax ``MiniMaxLightningAttention``, arXiv:2501.08313): linear attention with a per-head decay and
  no conv: only the recurrent K^T V state, (num_heads, head_dim, head_dim), held in the model dtype.
- ``rglru`` (RecurrentGemma / Griffin ``RecurrentGemmaRecurrentBlock``, arXiv:2402.19427): a conv over the
  intermediate_size (lru_width) channels, then the RG-LRU, whose state is one vector of intermediate_size; its gates
  are block-diagonal over num_heads blocks. transformers keeps both states on the module, not in the cache object;
  its conv state, d_conv - 1 inputs, is a view of d_conv once decoding runs.
- ``kda`` (Kimi Delta Attention, Kimi-Linear; transformers ``KimiLinearDeltaAttention``): a gated delta rule with a
  per-channel decay; ``num_heads`` heads of ``head_dim`` for q, k and v alike. One conv covers q, k and v (conv_dim
  = 3 x intermediate_size; vLLM's older ``kda_state_shape`` splits it into three conv states of the same total);
  the recurrent state is one head_dim x head_dim matrix per head, (num_heads, head_dim, head_dim), float32 in
  transformers and in vLLM (``MambaStateDtypeCalculator.kda_state_dtype``) whatever the model dtype.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

_Size = Annotated[StrictInt, Field(gt=0, le=10_000_000)]


class SSM(BaseModel):
    """The state-space mixer of a card's ``mamba`` layers."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    kind: Literal["mamba", "mamba2", "gated_deltanet", "short_conv", "lightning", "rglru", "kda"] = Field(
        description="Mamba-1 (selective scan), Mamba-2 (SSD, multi-head), Gated DeltaNet (Qwen3-Next linear "
                    "attention), short_conv (LFM2: a conv state only), lightning (MiniMax: a K^T V state only), "
                    "rglru (RecurrentGemma: a conv and one recurrent vector) or kda (Kimi Delta Attention: a conv "
                    "over q, k, v and a float32 head_dim x head_dim state per head).")
    d_state: _Size | None = Field(
        None, description="SSM state size N (state_size / mamba_d_state / ssm_state_size); gated_deltanet: the key "
                          "head width; required except for short_conv.")
    d_conv: _Size = Field(4, description="Causal conv1d kernel width (conv_kernel / mamba_d_conv).")
    expand: _Size = Field(2, description="intermediate_size = expand x hidden_size when intermediate_size is null.")
    intermediate_size: _Size | None = Field(None, description="Inner width of the mixer; null: expand x hidden_size.")
    dt_rank: _Size | None = Field(None, description="Mamba-1 dt projection rank; null: ceil(hidden_size / 16).")
    num_heads: _Size | None = Field(None, description="Mamba-2 heads (required for mamba2, not allowed for mamba).")
    head_dim: _Size | None = Field(None, description="Mamba-2 head width; null: intermediate_size / num_heads.")
    n_groups: _Size = Field(1, description="Mamba-2 groups sharing B and C (1 for Mamba-1).")
    chunk_size: _Size = Field(256, description="Mamba-2 SSD chunk length of the prefill scan, lightning's block_size "
                                               "(FLOPs; and vLLM 0.20-0.27's Mamba cache mode 'all' aligns a "
                                               "hybrid's block to it, Mamba-1 to 2048).")
    conv_bias: StrictBool = Field(True, description="The conv1d has a bias (use_conv_bias / mamba_conv_bias).")
    proj_bias: StrictBool = Field(False, description="in_proj and out_proj have biases (use_bias / mamba_proj_bias).")
    out_proj_bias: StrictBool | None = Field(
        None, description="out_proj has a bias; null: proj_bias (Falcon-H1 sets it apart: projectors_bias).")
    gated_norm: StrictBool = Field(
        True, description="Mamba-2's gated RMSNorm of intermediate_size before out_proj (Falcon-H1: mamba_rms_norm).")
    dt_bc_norms: StrictBool = Field(
        False, description="Mamba-1 RMSNorm weights on dt (dt_rank), B and C (d_state each): Jamba; Falcon-Mamba's "
                           "are weightless.")
    state_dtype: Literal["float32", "float16", "bfloat16"] | None = Field(
        None, description="The dtype the checkpoint asks a server to keep the SSM state in (mamba_ssm_cache_dtype); "
                          "null: the cache dtype. transformers keeps it in float32 regardless.")

    @property
    def has_conv(self) -> bool:
        """The mixer runs a causal conv1d, and so caches a conv state (all kinds but lightning)."""
        return self.kind != "lightning"

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise conv1d, and so of the conv state."""
        if self.kind in ("mamba", "short_conv", "rglru"):
            return self.intermediate_size
        if self.kind == "kda":  # q, k and v, each heads x head_dim wide
            return 3 * self.intermediate_size
        return self.intermediate_size + 2 * self.n_groups * self.d_state

    @property
    def state_shape(self) -> tuple[int, ...] | None:
        """The recurrent state of one sequence: Mamba-1 (intermediate, d_state), Mamba-2 (heads, head_dim,
        d_state), Gated DeltaNet (heads, d_state, head_dim), lightning and KDA (heads, head_dim, head_dim), RG-LRU
        (intermediate,); None for short_conv (a conv state only)."""
        if self.kind == "short_conv":
            return None
        if self.kind == "mamba":
            return (self.intermediate_size, self.d_state)
        if self.kind == "gated_deltanet":
            return (self.num_heads, self.d_state, self.head_dim)
        if self.kind in ("lightning", "kda"):
            return (self.num_heads, self.head_dim, self.head_dim)
        if self.kind == "rglru":
            return (self.intermediate_size,)
        return (self.num_heads, self.head_dim, self.d_state)


_ONLY = {  # fields a kind may set away from their defaults: field -> (the kinds allowed, what it is)
    "dt_rank": (("mamba",), "Mamba-1's dt projection rank"),
    "dt_bc_norms": (("mamba",), "Jamba's dt/B/C norms"),
    "num_heads": (("mamba2", "gated_deltanet", "lightning", "rglru", "kda"), "heads"),
    "head_dim": (("mamba2", "gated_deltanet", "lightning", "kda"), "head width"),
    "d_state": (("mamba", "mamba2", "gated_deltanet"), "a recurrent state"),
}

def derive_ssm(ssm: SSM, hidden_size: int) -> None:
    """Fill the derived sizes of a frozen ``ssm`` block in place and check the invariants beside them; ValueError
    names the keys that disagree."""
    _check_kind_fields(ssm)
    if ssm.kind == "short_conv":
        if ssm.intermediate_size not in (None, hidden_size):
            raise ValueError(f"ssm.intermediate_size: {ssm.intermediate_size}; a short conv runs over the hidden "
                             f"width; allowed: null or {hidden_size} (hidden_size)")
        _fill(ssm, "intermediate_size", hidden_size)
    elif ssm.intermediate_size is None:
        _fill(ssm, "intermediate_size", ssm.expand * hidden_size)
    if ssm.out_proj_bias is None:
        _fill(ssm, "out_proj_bias", ssm.proj_bias)
    if ssm.kind == "mamba" and ssm.dt_rank is None:
        _fill(ssm, "dt_rank", -(-hidden_size // 16))
    if ssm.kind in ("mamba2", "gated_deltanet", "lightning", "kda"):
        _derive_heads(ssm)
    if ssm.kind == "kda":  # vLLM MambaStateDtypeCalculator.kda_state_dtype: (cache dtype, torch.float32)
        if ssm.state_dtype not in (None, "float32"):
            raise ValueError(f"ssm.state_dtype: {ssm.state_dtype}; KDA keeps its recurrent state in float32 "
                             "(transformers and vLLM kda_state_dtype); allowed: null or float32")
        _fill(ssm, "state_dtype", "float32")
    if ssm.kind == "rglru" and (ssm.num_heads is None or ssm.intermediate_size % ssm.num_heads):
        raise ValueError(f"ssm.num_heads: {ssm.num_heads} must divide ssm.intermediate_size "
                         f"{ssm.intermediate_size} into the RG-LRU gate blocks")


def _check_kind_fields(ssm: SSM) -> None:
    for field, (kinds, what) in _ONLY.items():
        if ssm.kind not in kinds and getattr(ssm, field) not in (None, False):
            raise ValueError(f"ssm.{field}: only for kind {' or '.join(kinds)} ({what}); allowed: null (not set) "
                             f"for {ssm.kind}")
    if ssm.kind in _ONLY["d_state"][0] and ssm.d_state is None:
        raise ValueError(f"ssm.d_state: required for kind {ssm.kind}")
    if ssm.n_groups != 1 and ssm.kind not in ("mamba2", "gated_deltanet"):
        raise ValueError(f"ssm.n_groups: {ssm.n_groups}; {ssm.kind} has no groups; allowed: 1")
    if not ssm.gated_norm and ssm.kind != "mamba2":
        raise ValueError(f"ssm.gated_norm: false only for kind mamba2 (Falcon-H1); allowed: true for {ssm.kind}")


def _derive_heads(ssm: SSM) -> None:
    inner = ssm.intermediate_size
    if ssm.num_heads is None:
        raise ValueError(f"ssm.num_heads: required for kind {ssm.kind}")
    if ssm.head_dim is None:
        if inner % ssm.num_heads:
            raise ValueError(f"ssm.num_heads: {ssm.num_heads} does not divide ssm.intermediate_size {inner}; set "
                             "ssm.head_dim or a dividing num_heads")
        _fill(ssm, "head_dim", inner // ssm.num_heads)
    if ssm.num_heads * ssm.head_dim != inner:
        raise ValueError(f"ssm.num_heads x ssm.head_dim ({ssm.num_heads} x {ssm.head_dim}) must equal "
                         f"ssm.intermediate_size ({inner}); the scan views the inner width as heads x head_dim")
    if ssm.num_heads % ssm.n_groups:
        raise ValueError(f"ssm.n_groups: {ssm.n_groups} does not divide ssm.num_heads {ssm.num_heads}; "
                         "each group's B and C (Gated DeltaNet: each key head) serve num_heads / n_groups heads")


def _fill(ssm: SSM, field: str, value: int) -> None:
    object.__setattr__(ssm, field, value)
