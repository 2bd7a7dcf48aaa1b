"""vLLM and a multimodal checkpoint (card.vision): ``--limit-mm-per-prompt`` and ``--mm-encoder-tp-mode``, the
tower's weights on every rank, and the encoder's part of the profile run (kvplan.cost.vision).

- Weights: the tower and projector are built in the model's ``__init__`` on every rank and counted in "Model
  loading took" (``gpu_model_runner.py`` ``load_model`` profiles the whole model). They are split by TP
  (``--mm-encoder-tp-mode weights``, the default) or, with ``data`` on a model that ``supports_encoder_tp_data``
  (``qwen2_5_vl.py``, ``qwen3_vl.py``), built whole on every rank (``vllm/config/multimodal.py``
  ``mm_encoder_tp_mode``; a model without it falls back to ``weights``).
- Profile run (``gpu_model_runner.py`` ``profile_run``; budget in ``kvplan.cost.vision.encoder_budget``): the
  encoder runs on the dummy batch of the largest items, its outputs stay in the encoder cache while the text dummy
  pass runs; ``--limit-mm-per-prompt '{"image": 0}'`` (a text-only deployment) skips it.
"""

from __future__ import annotations

import json

from kvplan.cost import vision as vz
from kvplan.cost.runtimes.setup import ServingFlags, Setup
from kvplan.errors import KvplanError, clip
from kvplan.units import MAX_COUNT, fmt_bytes, fmt_int

TP_MODES = ("weights", "data")
# towers whose model class sets supports_encoder_tp_data (qwen2_5_vl.py, qwen3_vl.py: disable_tp=use_data_parallel)
DATA_PARALLEL_KINDS = ("qwen2_5_vl", "qwen3_vl")


def resolve_mm(flags: ServingFlags, card) -> dict:
    """The Options fields of the multimodal flags, checked by flag."""
    limit, mode = flags.limit_mm_per_prompt, flags.mm_encoder_tp_mode
    if card.vision is None:
        for flag, value in (("--limit-mm-per-prompt", limit), ("--mm-encoder-tp-mode", mode)):
            if value is not None:
                raise KvplanError(f"{flag}: {card.name} has no vision tower (a text model); allowed: only with a "
                                  "multimodal card")
        return {}
    if mode is not None and mode not in TP_MODES:
        raise KvplanError(f"--mm-encoder-tp-mode: {clip(mode)} unsupported; allowed: {', '.join(TP_MODES)}")
    return dict(mm_limit=vz.DEFAULT_LIMIT_PER_PROMPT if limit is None else parse_limit(limit),
                mm_encoder_data=mode == "data" and card.vision.kind in DATA_PARALLEL_KINDS,
                mm_encoder_mode=mode)


def parse_limit(value) -> int:
    """``--limit-mm-per-prompt`` as vLLM takes it: JSON ``{"image": N}`` (a dict through the API); the image
    limit is what the profile uses (kvplan models image towers)."""
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            data = None
    allowed = 'allowed: JSON like \'{"image": 4}\' (items per prompt, 0 for text-only)'
    if not isinstance(data, dict) or any(type(v) is not int or v < 0 for v in data.values() if not isinstance(v, dict)):
        raise KvplanError(f"--limit-mm-per-prompt: {clip(value)} is not a JSON object of counts; {allowed}")
    image = data.get("image", vz.DEFAULT_LIMIT_PER_PROMPT)
    if isinstance(image, dict):  # newer vLLM: {"image": {"count": N, "width": ..., "height": ...}}
        image = image.get("count", vz.DEFAULT_LIMIT_PER_PROMPT)
    if type(image) is not int or not 0 <= image <= MAX_COUNT:
        raise KvplanError(f"--limit-mm-per-prompt: image {clip(image)} is not a count up to {MAX_COUNT:,}; {allowed}")
    return image


def data_parallel_extra(s: Setup) -> int:
    """Bytes per GPU the tower adds when built whole (``--mm-encoder-tp-mode data``) instead of split by TP."""
    if s.card.vision is None or not s.opts.mm_encoder_data or s.layout.tp == 1:
        return 0
    whole = vz.vision_params(s.card, hf=False, data_parallel=True).total
    split = vz.vision_params(s.card, hf=False, tp=s.layout.tp).total
    return s.w_t.data_bytes(whole - split)


def budget(s: Setup) -> vz.EncoderBudget | None:
    """The encoder budget starts from the scheduler config's max_num_batched_tokens as given, even where it exceeds
    max_num_seqs x max_model_len (vLLM warns and keeps it: a public 0.11 log with max_num_seqs 1, max_model_len 4,096
    prints "a budget of 8192 tokens")."""
    if s.card.vision is None:
        return None
    return vz.encoder_budget(s.card.vision, s.mnbt, s.max_num_seqs, s.max_model_len, s.opts.mm_limit)


def profile_bytes(s: Setup, text_peak: int, act_bytes: int) -> int:
    """The profile peak with the encoder's dummy batch: its kept outputs plus the larger of the encoder's peak and
    the text pass's (an ESTIMATE); the text peak alone without a multimodal batch."""
    b = budget(s)
    if b is None:
        return text_peak
    kept, enc = vz.encoder_peak_bytes(s.card.vision, b, s.card.hidden_size, act_bytes)
    if not s.opts.mm_encoder_data:
        enc //= s.layout.tp  # weights mode: every activation's hidden or intermediate width split over TP
    return kept + max(text_peak, enc)


def launch_flags(s: Setup) -> list[str]:
    out = []
    if s.card.vision is not None and s.opts.mm_limit != vz.DEFAULT_LIMIT_PER_PROMPT:
        out.append(f"--limit-mm-per-prompt '{json.dumps({'image': s.opts.mm_limit})}'")
    if s.opts.mm_encoder_mode:
        out.append(f"--mm-encoder-tp-mode {s.opts.mm_encoder_mode}")
    return out


def notes(s: Setup) -> list[str]:
    v = s.card.vision
    if v is None:
        return []
    tower = vz.vision_params(s.card, hf=False, tp=1 if s.opts.mm_encoder_data else s.layout.tp)
    how = ("whole on every GPU (--mm-encoder-tp-mode data)" if s.opts.mm_encoder_data or s.layout.tp == 1
           else f"split over TP {s.layout.tp} (--mm-encoder-tp-mode weights)")
    size = fmt_bytes(s.w_t.data_bytes(tower.total))
    out = [f"Vision tower ({v.kind}, {v.built_layers} of {v.num_layers} blocks built) and projector ({v.projector}): "
           f"{fmt_int(tower.tower)} + {fmt_int(tower.projector)} parameters = {size} per GPU, {how}, counted with "
           "the weights ('Model loading took')."]
    if s.opts.mm_encoder_mode == "data" and not s.opts.mm_encoder_data:
        out.append(f"--mm-encoder-tp-mode data: {v.kind} towers do not support it in vLLM (no "
                   "supports_encoder_tp_data); vLLM falls back to weights.")
    b = budget(s)
    if b is None:
        out.append("--limit-mm-per-prompt image 0 (text-only): the profile run encodes no dummy images; the tower's "
                   "weights are still counted (kvplan does not model releases that skip loading it).")
        return out
    kept, enc = vz.encoder_peak_bytes(v, b, s.card.hidden_size, s.w_t.activation_bytes)
    enc //= 1 if s.opts.mm_encoder_data else s.layout.tp
    out.append(f"Encoder profile: 'Encoder cache will be initialized with a budget of {b.budget_tokens} tokens, and "
               f"profiled with {b.items} image items of the maximum feature size' ({fmt_int(b.tokens_per_item)} "
               f"tokens per image, {fmt_int(b.encoder_tokens)} encoder tokens); the kept outputs "
               f"({fmt_bytes(kept)}) and the encoder's peak ({fmt_bytes(enc)}, ESTIMATED) enter the profile-run peak.")
    return out
