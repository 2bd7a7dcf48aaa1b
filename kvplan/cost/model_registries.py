"""The first engine release that can load each architecture: its model registry holds the architecture's class.

A pinned release (``--engine vllm==0.6.4``) older than that is refused by name (``Runtime.check_release``): its
launch line would fail with "Model architectures [...] are not supported" (vLLM) or an unsupported architecture
(SGLang), so no figure is printed for it. An architecture missing from the table (a config's class kvplan has not
read) is planned as before, and so is a card that names none.

Source (read, not recalled): every release's wheel on PyPI, the 95 vLLM releases 0.1.4 - 0.33.0 and the 160 SGLang
releases 0.1.3 - 0.5.23 (pre-releases included). vLLM: the keys of the generator registries in
vllm/model_executor/models/registry.py (0.6.3+; _TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS and
_TRANSFORMERS_SUPPORTED_MODELS, whose architectures run through the Transformers backend), models/__init__.py
(0.2.5 - 0.6.2: _MODELS, _GENERATION_MODELS ...) or model_loader.py (0.1.4 - 0.2.4: _MODEL_REGISTRY). SGLang: the
classes named by ``EntryClass`` in sglang/srt/models/*.py (srt/models/registry.py import_model_classes). The reader,
tests/data/release_architectures.py, writes tests/data/release_architectures.json (every release read and which of
these architectures each holds); tests/test_release_architectures.py derives this table from that file, checks that
every release after the first holds the architecture too (so the newest modelled release loads every bundled card),
and that every bundled card's architecture is here.

A first release that is the oldest read (vLLM 0.1.4: 0.1.0 - 0.1.3 have no wheel) means "that release or earlier";
every modelled range (vLLM 0.2+, SGLang 0.4.0+) is later. None: no release read holds it (SGLang serves no Falcon,
Jamba, LLaVA-NeXT or SmolLM3 class of its own; its Transformers fallback may) and nothing is refused. vLLM 0.7.2+ also
falls back to the Transformers backend for an architecture its registry lacks when the installed transformers has
the model; the table does not count that (SmolLM3: registered from 0.10.1).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple


class First(NamedTuple):
    """The first vLLM and SGLang releases whose registry holds an architecture, and where (None: no release read)."""

    vllm: str | None
    vllm_source: str | None
    sglang: str | None
    sglang_source: str | None


# architecture (config.json architectures[0]) -> First; the sources are short: vLLM's under vllm/model_executor/,
# SGLang's the srt/models module whose EntryClass names it. tests/data/release_architectures.py prints these rows.
FIRST_RELEASES: dict[str, First] = {
    "DeepseekV2ForCausalLM": First("0.5.1", "models/__init__.py _GENERATION_MODELS", "0.2.6", "deepseek_v2.py"),
    "DeepseekV3ForCausalLM": First("0.6.6", "models/registry.py _TEXT_GENERATION_MODELS", "0.4.1", "deepseek_v2.py"),
    "Exaone4ForCausalLM": First("0.10.0", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.9", "exaone4.py"),
    "FalconForCausalLM": First("0.1.4", "model_loader.py _MODEL_REGISTRY", None, None),
    "GPT2LMHeadModel": First("0.1.4", "model_loader.py _MODEL_REGISTRY", "0.3.5", "gpt2.py"),
    "Gemma2ForCausalLM": First("0.5.1", "models/__init__.py _GENERATION_MODELS", "0.1.19", "gemma2.py"),
    "Gemma3ForCausalLM": First("0.8.0", "models/registry.py _TEXT_GENERATION_MODELS", "0.4.4.post2", "gemma3_causal.py"),
    "Gemma3ForConditionalGeneration": First("0.8.0", "models/registry.py _MULTIMODAL_MODELS", "0.4.4.post2", "gemma3_mm.py"),
    "Glm4MoeForCausalLM": First("0.10.0", "models/registry.py _TEXT_GENERATION_MODELS", "0.4.9.post5", "glm4_moe.py"),
    "GptOssForCausalLM": First("0.10.1", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.0rc0", "gpt_oss.py"),
    "GraniteMoeHybridForCausalLM": First("0.9.0", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.9", "granitemoehybrid.py"),
    "JambaForCausalLM": First("0.5.1", "models/__init__.py _GENERATION_MODELS", None, None),
    "Llama4ForConditionalGeneration": First("0.8.3", "models/registry.py _MULTIMODAL_MODELS", "0.4.5", "mllama4.py"),
    "LlamaForCausalLM": First("0.1.4", "model_loader.py _MODEL_REGISTRY", "0.1.10", "llama2.py"),
    "LlavaNextForConditionalGeneration": First("0.5.0", "models/__init__.py _GENERATION_MODELS", None, None),
    "Mamba2ForCausalLM": First("0.7.3", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.20", "mamba2.py"),
    "Mistral3ForConditionalGeneration": First("0.8.3", "models/registry.py _MULTIMODAL_MODELS", "0.4.6.post5", "mistral.py"),
    "MistralForCausalLM": First("0.2.0", "model_loader.py _MODEL_REGISTRY", "0.1.10", "mistral.py"),
    "MixtralForCausalLM": First("0.2.4", "model_loader.py _MODEL_REGISTRY", "0.1.10", "mixtral.py"),
    "NemotronHForCausalLM": First("0.9.1", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.3.post1", "nemotron_h.py"),
    "Olmo2ForCausalLM": First("0.6.5", "models/registry.py _TEXT_GENERATION_MODELS", "0.3.6.post3", "olmo2.py"),
    "Phi3ForCausalLM": First("0.4.2", "models/__init__.py _MODELS", "0.3.0", "llama.py"),
    "Qwen2ForCausalLM": First("0.3.0", "models/__init__.py _MODELS", "0.1.10", "qwen2.py"),
    "Qwen2_5_VLForConditionalGeneration": First("0.7.2", "models/registry.py _MULTIMODAL_MODELS", "0.4.3.post1", "qwen2_5_vl.py"),
    "Qwen3ForCausalLM": First("0.8.4", "models/registry.py _TEXT_GENERATION_MODELS", "0.4.5.post2", "qwen3.py"),
    "Qwen3MoeForCausalLM": First("0.8.4", "models/registry.py _TEXT_GENERATION_MODELS", "0.4.5.post2", "qwen3_moe.py"),
    "Qwen3NextForCausalLM": First("0.10.2", "models/registry.py _TEXT_GENERATION_MODELS", "0.5.2", "qwen3_next.py"),
    "Qwen3_5ForConditionalGeneration": First("0.17.0", "models/registry.py _MULTIMODAL_MODELS", "0.5.9", "qwen3_5.py"),
    "SmolLM3ForCausalLM": First("0.10.1", "models/registry.py _TRANSFORMERS_SUPPORTED_MODELS", None, None),
}

# Encoder-decoder (T5) models: no vLLM registry read holds a T5 class (vllm/model_executor/models/registry.py,
# 0.9.1 - 0.33.0: its encoder-decoder entries are BART (0.9.1 - 0.10; a plugin from 0.11), Mllama and Whisper) and no
# SGLang srt/models module names one in its EntryClass (0.4.8 - 0.5.23), so a runtime with a column here loads none;
# plan refuses every encoder-decoder model (decoder-only serving), estimate the same pairing by this line.
ENCODER_DECODER_SOURCES = {"vllm": "vllm/model_executor/models/registry.py, read in 0.9.1 - 0.33.0",
                           "sglang": "sglang/srt/models EntryClass, read in 0.4.8 - 0.5.23"}

# a column of First (a runtime's ``registry_column``) -> its sources written out
SOURCES = {"vllm": "vllm/model_executor/{}", "sglang": "sglang/srt/models/{} EntryClass"}

_STAGES = {"dev": -4, "a": -3, "b": -2, "rc": -1, "post": 1}


@lru_cache(maxsize=256)  # a layout search asks once per layout
def release_key(text: str) -> tuple[int, ...]:
    """A release as PEP 440 orders the forms these engines publish: 0.5.0rc0 < 0.5.0 < 0.5.0.post1 < 0.5.1 and
    0.10.1 < 0.10.1.1 (vLLM's fourth number); a local suffix (+cu121) is ignored, as is any other suffix."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.-]?(dev|a|b|rc|post)(\d*))?", str(text).strip())
    if m is None:
        return (-1,)
    major, minor, patch, fourth, stage, n = m.groups()
    return int(major), int(minor), int(patch or 0), int(fourth or 0), _STAGES.get(stage or "", 0), int(n or 0)


def first_release(column: str | None, architecture: str | None) -> tuple[str, str] | None:
    """(the first release in ``column`` of the table, "vllm" or "sglang", whose registry holds ``architecture``, and
    where); None where the table does not know it (an architecture not read, no release holding it, no column)."""
    row = FIRST_RELEASES.get(architecture or "")
    if row is None or column not in SOURCES or getattr(row, column) is None:
        return None
    return getattr(row, column), SOURCES[column].format(getattr(row, f"{column}_source"))


def encoder_decoder_refusal(column: str | None, display: str, card_name: str, architecture: str | None) -> str:
    """The one-line refusal of an encoder-decoder card on the runtime of ``column`` (ENCODER_DECODER_SOURCES)."""
    return (f"--engine: {display} cannot load {card_name}, an encoder-decoder model: no {display} model registry "
            f"read holds {architecture or 'a T5 class'} ({ENCODER_DECODER_SOURCES[column]}); size it with --engine "
            f"ideal, hf-static or hf-dynamic")


def release_refusal(column: str | None, name: str, display: str, pinned: str, card_name: str,
                    architecture: str | None) -> str | None:
    """The one-line refusal of ``--engine NAME==PINNED`` (the runtime's column of the table) for a card of
    ``architecture``; None where that release loads it."""
    first = first_release(column, architecture)
    if first is None or release_key(pinned) >= release_key(first[0]):
        return None
    return (f"--engine: {display} {pinned} cannot load {card_name}: {architecture} is first in {display} "
            f"{first[0]}'s model registry ({first[1]}); use --engine {name}=={first[0]} or later")
