r"""The model card: one frozen pydantic model describing a transformer's architecture.

``None`` means "derive": ``num_kv_heads`` defaults to ``num_heads`` and ``head_dim`` to
``hidden_size // num_heads``. An explicit value always wins; Gemma-2/3 and Qwen3 set a ``head_dim`` that is not
``hidden_size / num_heads``, and T5-11B one whose heads x head_dim (16384) is far wider than its hidden size (1024).

How query heads share K/V heads (``num_heads`` query heads, ``num_kv_heads`` K/V heads)::

    MHA  num_kv_heads == num_heads       MQA  num_kv_heads == 1          GQA  1 < num_kv_heads < num_heads
    q: | | | | | | | |                   q: | | | | | | | |              q: | | | | | | | |
       | | | | | | | |                       \ \ \ \ / / / /                 \ /  \ /  \ /  \ /
    k: | | | | | | | |                   k:         |                    k:  |    |    |    |
    v: | | | | | | | |                   v:         |                    v:  |    |    |    |

MLA (DeepSeek-V2/V3) caches neither per-head K nor V: each token stores one compressed latent of
``kv_lora_rank`` values plus one shared RoPE key of ``qk_rope_head_dim`` values per layer, and the per-head K/V are
re-expanded from it (DeepSeek-V2 paper, arXiv:2405.04434, section 2.1).
"""

from collections import Counter
from functools import cached_property
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

from kvplan.errors import KvplanError
from kvplan.model.ssm import SSM, derive_ssm
from kvplan.model.quant import Quantization
from kvplan.model.rope import RopeScaling
from kvplan.model.shared import SharedBlocks, check_shared_blocks
from kvplan.model.vision import VisionTower
from kvplan.units import divisors

Architecture = Literal["decoder-only", "encoder-only", "encoder-decoder"]
LayerType = Literal["global", "sliding", "chunked", "mamba", "hybrid", "mlp"]
Mixer = Literal["attention", "mamba", "hybrid"]
Fp32Part = Literal["router", "norms", "ffn_out", "a_log", "dt_bias"]  # kvplan.cost.fp32
# defer_build: the schema is built on the first validation; bundled cards come validated (model.cardcache)
_STRICT = ConfigDict(frozen=True, extra="forbid", defer_build=True)
_DERIVABLE = frozenset({"num_kv_heads", "head_dim"})

# Caps far above any real model, so absurd input is refused at once (10^7 layers would hang, 10^30 exhaust memory).
# Integers are strict: YAML ``true`` is not 1, ``32.0`` and ``"32"`` are not 32.
MAX_LAYERS = 10_000
MAX_HEADS = 100_000
MAX_WIDTH = 10_000_000  # hidden, FFN, head and latent widths
MAX_COUNT = 2**31 - 1  # vocabulary, positions, windows: what an int32 token id or position holds
MAX_EXPERTS = 100_000
Layers = Annotated[StrictInt, Field(gt=0, le=MAX_LAYERS)]
Heads = Annotated[StrictInt, Field(gt=0, le=MAX_HEADS)]
Width = Annotated[StrictInt, Field(gt=0, le=MAX_WIDTH)]
Count = Annotated[StrictInt, Field(gt=0, le=MAX_COUNT)]
Experts = Annotated[StrictInt, Field(gt=0, le=MAX_EXPERTS)]


class MLA(BaseModel):
    """Multi-head latent attention ranks, as DeepSeek's config.json names them."""

    model_config = _STRICT
    kv_lora_rank: Width = Field(description="Width of the cached compressed KV latent.")
    qk_rope_head_dim: Width = Field(description="Width of the decoupled RoPE key, cached once per token.")
    qk_nope_head_dim: Width = Field(description="Per-head query/key width without RoPE.")
    v_head_dim: Width = Field(description="Per-head value width.")
    q_lora_rank: Width | None = Field(None, description="Query compression rank; null: no compression.")


class MoE(BaseModel):
    """Mixture-of-experts feed-forward layers (Mixtral, Qwen-MoE, DeepSeek)."""

    model_config = _STRICT
    num_experts: Experts = Field(description="Routed experts per MoE layer.")
    experts_per_token: Experts = Field(description="Routed experts each token uses (top-k).")
    expert_ffn_size: Width = Field(description="Intermediate size of one routed expert.")
    num_shared_experts: StrictInt = Field(0, ge=0, le=MAX_EXPERTS,
                                          description="Always-active shared experts per MoE layer.")
    shared_expert_ffn_size: Width | None = Field(
        None, description="Intermediate size of one shared expert; null: expert_ffn_size.")
    shared_expert_gate: StrictBool = Field(
        False, description="A sigmoid gate (hidden x 1) on the shared expert (Qwen2-MoE).")
    first_dense_layers: StrictInt = Field(0, ge=0, le=MAX_LAYERS,
                                          description="Leading layers with a dense FFN (DeepSeek first_k_dense_replace).")
    layer_interval: StrictInt = Field(
        1, ge=1, le=MAX_LAYERS, description="Every n-th layer is MoE, the others dense: layer i is MoE iff "
                                           "(i + 1) % n == 0 (Llama-4 interleave_moe_layer_step); 1: every layer.")
    last_layer: StrictInt | None = Field(
        None, ge=0, le=MAX_LAYERS, description="The last layer that may be MoE, later ones dense (ERNIE-4.5 "
                                               "moe_layer_end_index); null: the last layer.")
    router_bias: StrictBool = Field(False, description="The router Linear(hidden, num_experts) has a bias (gpt-oss), or a "
                                                       "per-expert score correction of as many parameters (ERNIE-4.5).")

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"experts_per_token: {self.experts_per_token} exceeds num_experts "
                             f"({self.num_experts}); allowed: 1..{self.num_experts}")
        if not self.num_shared_experts:
            for field in ("shared_expert_ffn_size", "shared_expert_gate"):
                if getattr(self, field):
                    raise ValueError(f"{field}: set, but num_shared_experts is 0; allowed: only with shared experts")
        return self

    @property
    def shared_ffn(self) -> int:
        return self.shared_expert_ffn_size or self.expert_ffn_size


class PublishedParams(BaseModel):
    """A parameter total published by the model's authors, to check the derived count against."""

    model_config = _STRICT
    value: Annotated[StrictInt, Field(gt=0, le=10**16)]
    source: str = Field(min_length=1)


class ModelCard(BaseModel):
    """A transformer architecture, enough to size its weights, KV cache and compute exactly."""

    model_config = _STRICT

    name: str = Field(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Card name, e.g. llama-2-7b.")
    source: str = Field(min_length=1, description="Where the facts come from (config.json URL, paper).")
    architecture: Architecture = "decoder-only"
    hf_architecture: str | None = Field(
        None, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        description="config.json architectures[0] (e.g. Qwen3MoeForCausalLM): the class an engine builds, where an "
                    "engine's placement of the vocabulary under pipeline parallelism depends on it (kvplan.cost."
                    "serving_vllm PP_VOCAB_EVERY_STAGE); null: not stated (vLLM's llama.py placement).")
    num_layers: Layers = Field(description="Blocks in the decoder (the encoder for encoder-only models).")
    num_encoder_layers: Layers | None = Field(None, description="Encoder blocks; encoder-decoder only.")
    hidden_size: Width
    num_heads: Heads = Field(description="Query heads per attention layer.")
    num_kv_heads: Heads | None = Field(None, description="K/V heads; null: num_heads (MHA).")
    head_dim: Width | None = Field(None, description="Per-head width; null: hidden_size / num_heads.")
    ffn_size: Width = Field(description="Dense feed-forward intermediate size.")
    gated_ffn: StrictBool = Field(description="Gated FFN (SwiGLU/GeGLU: gate, up, down) or plain (up, down).")
    activation: Literal["silu", "gelu", "gelu_tanh", "relu", "relu2"] = Field(
        description="FFN activation; relu2 is squared ReLU (Nemotron, Persimmon).")
    vocab_size: Count
    tie_embeddings: StrictBool = Field(description="LM head shares the input embedding matrix.")
    lm_head_bias: StrictBool = False
    norm: Literal["rmsnorm", "layernorm", "layernorm_nobias"] = Field(
        description="rmsnorm and layernorm_nobias (MPT): a weight; layernorm: a weight and a bias.")
    norms_per_layer: StrictInt = Field(2, ge=1, le=4, description="Norms per block (Gemma-2: 4, parallel Falcon-7B: 1).")
    final_norm: StrictBool = Field(True, description="A norm after the last block (BERT has none).")
    qk_norm: StrictBool = Field(False, description="Per-head RMSNorm on queries and keys (Qwen3, Gemma-3).")
    qk_norm_width: Literal["head", "all_heads"] | None = Field(
        None, description="Width of the qk_norm weights: head (one head_dim norm shared by all heads, Qwen3) or "
                          "all_heads (q: num_heads x head_dim, k: num_kv_heads x head_dim, OLMo-2); null: head.")
    attention_sinks: StrictBool = Field(
        False, description="Learned per-head attention-sink logits (gpt-oss): num_heads parameters per layer, never "
                           "cached.")
    attention_output_gate: StrictBool = Field(
        False, description="q_proj also emits a sigmoid gate on the attention output (Qwen3-Next): twice as wide.")
    qkv_bias: StrictBool = False
    out_bias: StrictBool = False
    mlp_bias: StrictBool = False
    position: Literal["rope", "learned", "alibi", "relative", "none"] = Field(
        description="none: no positional encoding at all (Mamba: order comes from the recurrence).")
    max_position_embeddings: Count
    learned_position_offset: StrictInt = Field(0, ge=0, le=MAX_WIDTH, description="Extra learned position rows (OPT: 2).")
    relative_attention_num_buckets: Width | None = Field(None, description="T5 relative-position buckets.")
    rope_scaling: RopeScaling | None = Field(
        None, description="The global layers' RoPE scaling where it sets the length of an engine's rotary cache "
                          "(kvplan.model.rope: linear, dynamic, yarn, longrope); null: none, default or llama3.")
    local_rope: StrictBool = Field(
        False, description="Sliding layers build their own unscaled rotary embedding (Gemma 3: rope_local_base_freq): "
                           "a second rotary cache beside the global layers'.")
    partial_rotary_factor: float = Field(
        1.0, strict=True, gt=0, le=1,
        description="The fraction of head_dim the rotary embedding turns (transformers' partial_rotary_factor; "
                    "Qwen3-Next and Qwen3.5: 0.25): the engines' rotary width and cos/sin cache rows are "
                    "int(head_dim x factor) (vLLM and SGLang get_rope).")
    type_vocab_size: StrictInt = Field(0, ge=0, le=MAX_COUNT, description="BERT token-type embeddings.")
    embedding_norm: StrictBool = Field(False, description="A norm right after the embeddings (BERT, BLOOM).")
    pooler: StrictBool = Field(False, description="BERT's pooler (hidden x hidden dense with bias).")
    sliding_window: Count | None = Field(None, description="Window W of sliding layers, in tokens.")
    layer_pattern: tuple[LayerType, ...] | None = Field(
        None, max_length=MAX_LAYERS, description="Layer types, repeated over the layers; null: all sliding if "
                          "sliding_window is set, else all global. Gemma-2: [sliding, global]; Llama-4: [chunked, chunked, "
                          "chunked, global]; mamba: a state layer (the card's ssm block: Mamba-1/2, Gated DeltaNet, KDA, "
                          "short conv, ...); hybrid: full attention and the ssm mixer side by side in one layer "
                          "(Falcon-H1); mlp: a layer with an FFN and no mixer (Nemotron-H, only with mixer_mlp false).")
    attention_chunk_size: Count | None = Field(None, description="Chunk C of chunked layers (Llama-4 local attention): "
                                               "a token attends the tokens of its own C-aligned chunk only.")
    hf_kv_heads: Heads | None = Field(None, description="K/V heads transformers' cache holds when not num_kv_heads: its "
                                      "Falcon new_decoder_architecture broadcasts K/V to every query head before caching.")
    hf_fp32: tuple[Fp32Part, ...] = Field((), description="What transformers keeps in float32 in a half-precision "
                                          "model (kvplan.cost.fp32): router, norms, ffn_out (T5 wo), a_log, dt_bias.")
    mla: MLA | None = None
    ssm: SSM | None = Field(None, description="The state-space mixer of the mamba layers; required with them.")
    mixer_mlp: StrictBool = Field(True, description="Every block holds its mixer and an FFN; false: each block holds one "
                                  "module, a mixer or, in an mlp layer, the FFN (Nemotron-H; Mamba, which has no FFN).")
    moe: MoE | None = None
    mtp_layers: StrictInt | None = Field(
        None, ge=0, le=MAX_LAYERS, description="Multi-token-prediction layers the checkpoint stores after the decoder "
        "(num_nextn_predict_layers): never built or counted with the model; vLLM and SGLang load them only as a "
        "speculative draft (--speculative-config method mtp). null: the card does not say.")
    shared_blocks: SharedBlocks | None = Field(None, description="Transformer blocks the hybrid layers share (Zamba, "
                                               "Zamba2; kvplan.model.shared): weights counted once, cached per invocation.")
    vision: VisionTower | None = Field(None, description="A multimodal checkpoint's vision tower and projector "
                                       "(kvplan.model.vision), loaded beside the decoder; null: a text model.")
    dtype: Literal["float32", "float16", "bfloat16"] = Field(description="The checkpoint's dtype.")
    quantization: Quantization | None = Field(
        None, description="How the checkpoint stores quantized linears (kvplan.model.quant); null: all in dtype.")
    published_params: PublishedParams | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: object) -> object:
        """An explicit ``null`` means "derive", exactly as an absent key does."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (k in _DERIVABLE and v is None)}
        return data

    @model_validator(mode="after")
    def _derive_and_check(self) -> "ModelCard":
        self._check_stacks()
        _fill(self, "num_kv_heads", self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads: {self.num_heads} heads are not divisible by {self.num_kv_heads} KV heads; "
                             f"allowed: a divisor of num_heads ({', '.join(map(str, divisors(self.num_heads)))})")
        self._check_heads()
        if self.head_dim is None:
            if self.hidden_size % self.num_heads:
                raise ValueError(f"head_dim: hidden_size {self.hidden_size} is not divisible by num_heads "
                                 f"{self.num_heads}; set head_dim explicitly")
            _fill(self, "head_dim", self.hidden_size // self.num_heads)
        self._check_layers()
        self._check_mixers()
        return self

    def _check_stacks(self) -> None:
        if (self.architecture == "encoder-decoder") != (self.num_encoder_layers is not None):
            raise ValueError("num_encoder_layers: required for (and allowed only with) architecture encoder-decoder")
        if self.position == "relative" and self.relative_attention_num_buckets is None:
            raise ValueError("relative_attention_num_buckets: required when position is relative")
        if self.position != "relative" and self.relative_attention_num_buckets is not None:
            raise ValueError("relative_attention_num_buckets: allowed only when position is relative")
        if self.position != "learned" and self.learned_position_offset:
            raise ValueError("learned_position_offset: allowed only when position is learned")
        if self.position != "rope" and self.partial_rotary_factor != 1:
            raise ValueError("partial_rotary_factor: allowed only when position is rope")
        for field in ("rope_scaling", "local_rope"):
            if self.position != "rope" and getattr(self, field):
                raise ValueError(f"{field}: allowed only when position is rope")
        if self.moe and self.moe.first_dense_layers >= self.num_layers:
            raise ValueError(f"moe.first_dense_layers: {self.moe.first_dense_layers} leaves no MoE layer of "
                             f"num_layers ({self.num_layers}); allowed: 0..{self.num_layers - 1}")
        last = self.moe.last_layer if self.moe else None
        if last is not None and not self.moe.first_dense_layers <= last < self.num_layers:
            raise ValueError(f"moe.last_layer: {last} is outside moe.first_dense_layers..num_layers - 1 "
                             f"({self.moe.first_dense_layers}..{self.num_layers - 1})")
        if self.quantization and self.architecture != "decoder-only":
            raise ValueError(f"quantization: modelled for decoder-only cards; {self.name} is {self.architecture}")
        if self.vision and self.architecture != "decoder-only":
            raise ValueError(f"vision: a vision tower is modelled for decoder-only cards; {self.name} is "
                             f"{self.architecture}")
        if self.mla and self.architecture != "decoder-only":
            raise ValueError(f"mla: not supported with architecture {self.architecture}; allowed: decoder-only")
        for field in ("sliding_window", "layer_pattern", "hf_kv_heads"):
            if self.architecture == "encoder-only" and getattr(self, field) is not None:
                raise ValueError(f"{field}: an encoder-only model keeps no KV cache; allowed: null (not set)")

    def _check_heads(self) -> None:
        if self.mla and self.num_kv_heads != self.num_heads:
            raise ValueError(f"num_kv_heads: MLA caches one latent, not per-head K/V; allowed: leave it out "
                             f"(or {self.num_heads}, num_heads)")
        if self.mla and self.hf_kv_heads is not None:
            raise ValueError("hf_kv_heads: not supported together with mla; allowed: null (not set)")
        hf = self.hf_kv_heads
        if hf is not None and (hf % self.num_kv_heads or self.num_heads % hf):
            fits = [d for d in divisors(self.num_heads) if d % self.num_kv_heads == 0]
            raise ValueError(f"hf_kv_heads: {hf} is not a multiple of num_kv_heads ({self.num_kv_heads}) dividing "
                             f"num_heads ({self.num_heads}); allowed: {', '.join(map(str, fits))}")

    def _check_layers(self) -> None:
        pattern = self.layer_pattern
        if pattern is not None and not 1 <= len(pattern) <= self.num_layers:
            raise ValueError(f"layer_pattern: needs 1..{self.num_layers} entries (num_layers), got {len(pattern)}")
        if "sliding" in (pattern or ()) and self.sliding_window is None:
            raise ValueError("sliding_window: required when layer_pattern has sliding layers; allowed: a window > 0")
        if "chunked" in (pattern or ()) and self.attention_chunk_size is None:
            raise ValueError("attention_chunk_size: required when layer_pattern has chunked layers; allowed: a chunk > 0")
        if self.qk_norm_width is not None and not self.qk_norm:
            raise ValueError("qk_norm_width: only with qk_norm true")
        if self.mla and self.sliding_window:
            raise ValueError("sliding_window: not supported together with mla")
        if self.local_rope and "sliding" not in self.layer_types:
            raise ValueError("local_rope: the card has no sliding layers to build it; allowed: false")
        if pattern is not None and self.sliding_window is not None and "sliding" not in pattern:
            raise ValueError("sliding_window: set, but layer_pattern has no sliding layers; allowed: leave it out, "
                             "or add sliding layers to layer_pattern")

    def _check_mixers(self) -> None:
        pattern = self.layer_pattern or ()
        stateful = "mamba" in pattern or "hybrid" in pattern
        if stateful != (self.ssm is not None):
            raise ValueError("ssm: required when layer_pattern has mamba or hybrid layers, and allowed only with "
                             f"them; layer_pattern has {'' if stateful else 'no '}mamba or hybrid layers")
        if "mlp" in pattern and self.mixer_mlp:
            raise ValueError("layer_pattern: mlp layers (an FFN without a mixer) need mixer_mlp false")
        for part, block in (("router", "moe"), ("a_log", "ssm"), ("dt_bias", "ssm")):
            if part in self.hf_fp32 and getattr(self, block) is None:
                raise ValueError(f"hf_fp32: {part} needs the card's {block} block; allowed: leave {part} out")
        if self.ssm is not None:
            if self.architecture != "decoder-only":
                raise ValueError(f"ssm: supported in decoder-only models only; {self.name} is {self.architecture}")
            derive_ssm(self.ssm, self.hidden_size)
        if self.shared_blocks is not None:
            check_shared_blocks(self.shared_blocks, pattern=pattern, mixer_mlp=self.mixer_mlp, has_moe=bool(self.moe),
                                q_width=self.num_heads * self.head_dim, kv_width=self.num_kv_heads * self.head_dim,
                                hidden_size=self.hidden_size)

    # ---- derived, never stored --------------------------------------------------------------------------------

    @cached_property
    def layer_types(self) -> tuple[LayerType, ...]:
        """The attention type of each decoder layer (the pattern repeated over ``num_layers``)."""
        pattern = self.layer_pattern or (("sliding",) if self.sliding_window else ("global",))
        return tuple(pattern[i % len(pattern)] for i in range(self.num_layers))

    # ---- per-layer accessors: each rule is written here once ---------------------------------------------------

    def __hash__(self) -> int:
        """A few scalar fields, not pydantic's hash of every nested field (the lru_caches of kvplan.cost hash a card
        on every call: a search asks thousands of times). Equal cards hash equal; cards that differ elsewhere share a
        hash and are told apart by ``==``, which compares every field."""
        return hash((self.name, self.num_layers, self.hidden_size, self.vocab_size, self.max_position_embeddings))

    def mixer(self, layer: int) -> Mixer | None:
        """What mixes tokens in decoder layer ``layer``: attention, a state-space mixer (mamba), both side by side
        (hybrid, Falcon-H1), or nothing (an mlp layer of Nemotron-H)."""
        kind = self.layer_types[layer]
        return None if kind == "mlp" else kind if kind in ("mamba", "hybrid") else "attention"

    def has_mlp(self, layer: int) -> bool:
        """Layer ``layer`` has an FFN (dense or MoE): every layer unless mixer_mlp is false, then only the mlp layers."""
        return self.mixer_mlp or self.layer_types[layer] == "mlp"

    @cached_property
    def attention_layers(self) -> int:
        """Decoder layers with attention (and so a K/V cache): attention and hybrid layers."""
        return sum(self.mixer(i) in ("attention", "hybrid") for i in range(self.num_layers))

    @cached_property
    def state_layers(self) -> int:
        """Decoder layers with a state-space mixer (mamba and hybrid layers): a fixed-size state per sequence."""
        return sum(self.mixer(i) in ("mamba", "hybrid") for i in range(self.num_layers))

    def window(self, layer: int) -> int | None:
        """The sliding window of decoder layer ``layer``; None for a full-attention (or chunked) layer."""
        return self.sliding_window if self.layer_types[layer] == "sliding" else None

    @cached_property
    def windows(self) -> tuple[int | None, ...]:
        """``window(i)`` of every decoder layer."""
        return tuple(self.window(i) for i in range(self.num_layers))

    @cached_property
    def attention_spans(self) -> tuple[tuple[tuple[int | None, int | None], int], ...]:
        """((window(i), chunk(i)), layers) over the layers that attend (attention, hybrid), each span once."""
        return tuple(Counter((self.window(i), self.chunk(i)) for i in range(self.num_layers)
                             if self.mixer(i) in ("attention", "hybrid")).items())

    @cached_property
    def ffn_layers(self) -> tuple[int, int]:
        """(dense, MoE) counts of the decoder layers with an FFN (``has_mlp``, ``is_moe_layer``)."""
        moe = sum(self.is_moe_layer(i) for i in range(self.num_layers))
        return sum(self.has_mlp(i) for i in range(self.num_layers)) - moe, moe

    def chunk(self, layer: int) -> int | None:
        """The attention chunk of decoder layer ``layer``; None unless it is a chunked layer (Llama-4)."""
        return self.attention_chunk_size if self.layer_types[layer] == "chunked" else None

    def is_moe_layer(self, layer: int) -> bool:
        """Layer ``layer`` routes its FFN through experts (DeepSeek keeps first_k_dense_replace dense layers; Llama-4
        interleaves every layer_interval-th)."""
        moe = self.moe
        last = layer if moe is None or moe.last_layer is None else moe.last_layer
        return moe is not None and self.has_mlp(layer) and moe.first_dense_layers <= layer <= last and (layer + 1) % moe.layer_interval == 0

    def cached_kv_heads(self, transformers: bool) -> int:
        """K/V heads a runtime caches per layer. transformers' Falcon (new_decoder_architecture) broadcasts K/V to
        every query head before the cache update, so its caches hold ``hf_kv_heads``; vLLM holds num_kv_heads."""
        return self.hf_kv_heads if transformers and self.hf_kv_heads else self.num_kv_heads

    @property
    def attention_kind(self) -> str:
        """MHA, MQA, GQA or MLA: derived from the head counts, never stored; none without attention layers."""
        if not self.attention_layers:
            return "none"
        if self.mla:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def attention_label(self) -> str:
        """e.g. 'GQA (8 KV heads, 8 query heads per KV head)'."""
        kind = self.attention_kind
        if kind == "none":
            return f"none ({self.state_layers} state-space layers, no K/V)"
        if kind == "MLA":
            return f"MLA (latent {self.mla.kv_lora_rank} + rope key {self.mla.qk_rope_head_dim} per token and layer)"
        if kind == "GQA":
            return f"GQA ({self.num_kv_heads} KV heads, {self.num_heads // self.num_kv_heads} query heads per KV head)"
        return f"{kind} ({self.num_kv_heads} KV head{'s' if self.num_kv_heads > 1 else ''})"

    @property
    def has_kv_cache(self) -> bool:
        """Encoder-only models run one bidirectional pass: nothing is cached between steps."""
        return self.architecture != "encoder-only"

    def require_no_state_layers(self, what: str) -> None:
        """KvplanError for a computation not modelled for state-space layers yet, instead of a number that silently
        treats them as attention."""
        self.require_no_shared_blocks(what)
        if self.ssm is not None:
            raise KvplanError(f"{what}: not modelled for state-space (mamba) layers yet; {self.name} has "
                              f"{self.state_layers}")

    def require_no_shared_blocks(self, what: str) -> None:
        """KvplanError where shared blocks are not modelled (FLOPs, TP, the reference model), not a per-layer guess."""
        if self.shared_blocks is not None:
            raise KvplanError(f"{what}: not modelled for shared transformer blocks (Zamba-style) yet; {self.name} "
                              f"invokes them in {self.attention_layers} layers")

    def derived_fields(self) -> frozenset[str]:
        """Fields whose value was derived rather than written in the card."""
        return frozenset(_DERIVABLE - self.model_fields_set)


def _fill(card: ModelCard, field: str, value: int) -> None:
    """Fill a derived field of a frozen card in place, only where the card left it None."""
    if getattr(card, field) is None:
        object.__setattr__(card, field, value)

