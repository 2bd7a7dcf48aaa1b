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
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

_Size = Annotated[StrictInt, Field(gt=0, le=10_000_000)]


class SSM(BaseModel):
    """The state-space mixer of a card's ``mamba`` layers."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["mamba", "mamba2"] = Field(description="Mamba-1 (selective scan) or Mamba-2 (SSD, multi-head).")
    d_state: _Size = Field(description="SSM state size N (config state_size / mamba_d_state / ssm_state_size).")
    d_conv: _Size = Field(4, description="Causal conv1d kernel width (conv_kernel / mamba_d_conv).")
    expand: _Size = Field(2, description="intermediate_size = expand x hidden_size when intermediate_size is null.")
    intermediate_size: _Size | None = Field(None, description="Inner width of the mixer; null: expand x hidden_size.")
    dt_rank: _Size | None = Field(None, description="Mamba-1 dt projection rank; null: ceil(hidden_size / 16).")
    num_heads: _Size | None = Field(None, description="Mamba-2 heads (required for mamba2, not allowed for mamba).")
    head_dim: _Size | None = Field(None, description="Mamba-2 head width; null: intermediate_size / num_heads.")
    n_groups: _Size = Field(1, description="Mamba-2 groups sharing B and C (1 for Mamba-1).")
    chunk_size: _Size = Field(256, description="Mamba-2 SSD chunk length of the prefill scan (no effect on sizes).")
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
    def conv_dim(self) -> int:
        """Channels of the depthwise conv1d, and so of the conv state."""
        if self.kind == "mamba":
            return self.intermediate_size
        return self.intermediate_size + 2 * self.n_groups * self.d_state

    @property
    def state_shape(self) -> tuple[int, ...]:
        """The SSM state of one sequence: Mamba-1 (intermediate, d_state), Mamba-2 (heads, head_dim, d_state)."""
        if self.kind == "mamba":
            return (self.intermediate_size, self.d_state)
        return (self.num_heads, self.head_dim, self.d_state)


def derive_ssm(ssm: SSM, hidden_size: int) -> None:
    """Fill the derived sizes of a frozen ``ssm`` block in place and check the invariants beside them; ValueError
    names the keys that disagree."""
    if ssm.intermediate_size is None:
        _fill(ssm, "intermediate_size", ssm.expand * hidden_size)
    inner = ssm.intermediate_size
    if ssm.out_proj_bias is None:
        _fill(ssm, "out_proj_bias", ssm.proj_bias)
    if ssm.kind == "mamba":
        if not ssm.gated_norm:
            raise ValueError("ssm.gated_norm: false only for kind mamba2 (Mamba-1 has no gated norm); allowed: true")
        for key in ("num_heads", "head_dim"):
            if getattr(ssm, key) is not None:
                raise ValueError(f"ssm.{key}: only for kind mamba2; allowed: null (not set) for mamba")
        if ssm.n_groups != 1:
            raise ValueError(f"ssm.n_groups: {ssm.n_groups}; Mamba-1 has no groups; allowed: 1")
        if ssm.dt_rank is None:
            _fill(ssm, "dt_rank", -(-hidden_size // 16))
        return
    if ssm.dt_bc_norms:
        raise ValueError("ssm.dt_bc_norms: only for kind mamba (Jamba); allowed: false")
    if ssm.dt_rank is not None:
        raise ValueError("ssm.dt_rank: only for kind mamba (Mamba-2 has one dt per head); allowed: null (not set)")
    if ssm.num_heads is None:
        raise ValueError("ssm.num_heads: required for kind mamba2")
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
                         "each group's B and C serve num_heads / n_groups heads")


def _fill(ssm: SSM, field: str, value: int) -> None:
    object.__setattr__(ssm, field, value)
