"""RoPE scaling as a card carries it: what a serving engine needs to size its rotary cos/sin caches.

A card's ``rope_scaling`` is the scaling of its (global) attention layers, read from config.json's ``rope_scaling``
(transformers 5.x: ``rope_parameters``, flat or per layer type, ``full_attention``); ``local_rope`` says the sliding
layers build a rotary embedding of their own, unscaled (Gemma 3: ``rope_local_base_freq``, ``{"rope_type":
"default"}``). Only the scaling types that change how many positions vLLM's cache holds are carried
(kvplan.cost.vision.rope_cache_positions): ``linear`` and ``dynamic`` (max_position_embeddings x factor),
``yarn`` (DeepSeek's too: original_max_position_embeddings x factor), ``longrope`` (a short cache of
original_max_position_embeddings and a long one of max_position_embeddings). ``llama3`` and ``default`` keep
max_position_embeddings and are left out, as is M-RoPE (its 4 x factor follows the vision tower's kind).
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

RopeType = Literal["linear", "dynamic", "yarn", "longrope"]
# the config spelling of each carried type (DeepSeek-V2/V3 write "yarn"; vLLM's deepseek_v2.py renames it
# deepseek_yarn, whose cache has the same length)
RAW_TYPES = {"linear": "linear", "dynamic": "dynamic", "yarn": "yarn", "deepseek_yarn": "yarn", "longrope": "longrope"}
_STRICT = ConfigDict(frozen=True, extra="forbid", defer_build=True)
_Positions = Annotated[StrictInt, Field(gt=0, le=2**31 - 1)]


class RopeScaling(BaseModel):
    """The scaling of the global attention layers' RoPE, as config.json's ``rope_scaling`` gives it."""

    model_config = _STRICT
    rope_type: RopeType = Field(description="linear, dynamic, yarn (DeepSeek's deepseek_yarn too) or longrope.")
    factor: Annotated[float, Field(strict=True, gt=0, le=1e6)] | None = Field(
        None, description="The scaling factor (linear, dynamic, yarn); longrope has per-dimension factors instead.")
    original_max_position_embeddings: _Positions | None = Field(
        None, description="The pre-training context (yarn, longrope).")

    @model_validator(mode="after")
    def _check(self) -> "RopeScaling":
        if self.rope_type != "longrope" and self.factor is None:
            raise ValueError(f"rope_scaling.factor: required for type {self.rope_type}; allowed: a number > 0")
        if self.rope_type in ("yarn", "longrope") and self.original_max_position_embeddings is None:
            raise ValueError(f"rope_scaling.original_max_position_embeddings: required for type {self.rope_type}; "
                             "allowed: a position count > 0")
        return self
