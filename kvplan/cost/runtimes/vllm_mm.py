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
# architecture -> (the modalities its processor takes, get_supported_mm_limits; the first vLLM release that builds
# no tower or projector when --limit-mm-per-prompt sets every one of them to 0). Read in vLLM 0.9.1 - 0.33.0
# (model_executor/models/): qwen2_5_vl.py, mistral3.py and llava.py test get_limit_per_prompt in __init__ from
# 0.10.1 (read in 0.10.1.1; 0.10.0 builds them), qwen3_vl.py and qwen3_5.py from their first release; gemma3_mm.py
# and llava_next.py from 0.15.0 (interfaces.py _mark_tower_model: "automatically skipped when
# `--limit-mm-per-prompt` is set to zero for all of their modalities"), which every one of them uses since.
TOWERS = {
    "LlavaForConditionalGeneration": (("image",), (0, 10, 1)),
    "Mistral3ForConditionalGeneration": (("image",), (0, 10, 1)),
    "Qwen2_5_VLForConditionalGeneration": (("image", "video"), (0, 10, 1)),
    "Qwen3VLForConditionalGeneration": (("image", "video"), (0, 11)),
    "Qwen3VLMoeForConditionalGeneration": (("image", "video"), (0, 11)),
    "Qwen3_5ForConditionalGeneration": (("image", "video"), (0, 17)),
    "Qwen3_5MoeForConditionalGeneration": (("image", "video"), (0, 17)),
    "LlavaNextForConditionalGeneration": (("image",), (0, 15)),
    "Gemma3ForConditionalGeneration": (("image",), (0, 15)),
}


def tower_rule(card) -> tuple[tuple[str, ...], tuple[int, ...] | None]:
    """(the modalities ``card``'s architecture takes, the first release that skips its tower; None: not read)."""
    if card.hf_architecture in TOWERS:
        return TOWERS[card.hf_architecture]
    return (("image", "video") if card.vision.kind in DATA_PARALLEL_KINDS else ("image",)), None


def resolve_mm(flags: ServingFlags, card, version) -> dict:
    """The Options fields of the multimodal flags, checked by flag; ``version``: the VllmVersion planned (whether it
    builds the tower when every modality is limited to 0)."""
    limit, mode = flags.limit_mm_per_prompt, flags.mm_encoder_tp_mode
    if card.vision is None:
        for flag, value in (("--limit-mm-per-prompt", limit), ("--mm-encoder-tp-mode", mode)):
            if value is not None:
                raise KvplanError(f"{flag}: {card.name} has no vision tower (a text model); allowed: only with a "
                                  "multimodal card")
        return {}
    if mode is not None and mode not in TP_MODES:
        raise KvplanError(f"--mm-encoder-tp-mode: {clip(mode)} unsupported; allowed: {', '.join(TP_MODES)}")
    if limit is None:
        return dict(mm_limit=vz.DEFAULT_LIMIT_PER_PROMPT, mm_encoder_data=mode == "data" and
                    card.vision.kind in DATA_PARALLEL_KINDS, mm_encoder_mode=mode)
    counts, config = parse_limit(limit, card)
    modalities, first = tower_rule(card)
    skipped = not any(counts.values()) and first is not None and version.first >= first
    return dict(mm_limit=counts["image"], mm_limit_config=config, mm_tower_skipped=skipped,
                mm_encoder_data=mode == "data" and card.vision.kind in DATA_PARALLEL_KINDS and not skipped,
                mm_encoder_mode=mode)


def parse_limit(value, card) -> tuple[dict[str, int], str]:
    """``--limit-mm-per-prompt`` as vLLM takes it: JSON ``{"image": N, "video": M}`` (a dict through the API; newer
    vLLM also ``{"image": {"count": N, ...}}``), over the modalities ``card``'s architecture takes. Returns (each
    modality's count, the JSON for the launch line); kvplan profiles image items, so a prompt of videos without
    images (whose dummy videos vLLM would profile) is refused."""
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            data = None
    modalities = tower_rule(card)[0]
    allowed = f"allowed: JSON like '{{\"image\": 4}}' over {', '.join(modalities)} (items per prompt, 0 for none)"
    if not isinstance(data, dict):
        raise KvplanError(f"--limit-mm-per-prompt: {clip(value)} is not a JSON object of counts; {allowed}")
    unknown = [m for m in data if m not in modalities]
    if unknown:
        arch = card.hf_architecture or card.vision.kind
        raise KvplanError(f"--limit-mm-per-prompt: {clip(unknown[0])}: {card.name} ({arch}) takes no such modality; "
                          f"{allowed}")
    counts = {}
    for m in modalities:
        n = data.get(m, vz.DEFAULT_LIMIT_PER_PROMPT)
        if isinstance(n, dict):  # newer vLLM: {"image": {"count": N, "width": ..., "height": ...}}
            n = n.get("count", vz.DEFAULT_LIMIT_PER_PROMPT)
        if type(n) is not int or not 0 <= n <= MAX_COUNT:
            raise KvplanError(f"--limit-mm-per-prompt: {m} {clip(n)} is not a count up to {MAX_COUNT:,}; {allowed}")
        counts[m] = n
    if counts["image"] == 0 and any(counts.values()):
        other = next(m for m, n in counts.items() if n)
        given = "" if other in data else " (not given: vLLM's default)"
        raise KvplanError(f"--limit-mm-per-prompt: {other} {counts[other]}{given} with image 0: vLLM profiles the "
                          f"encoder on dummy {other} items, which kvplan does not model (it profiles image "
                          f"items); allowed: image above 0, or every modality 0 (text-only: "
                          f"'{json.dumps(dict.fromkeys(modalities, 0))}')")
    return counts, json.dumps(data)


def skipped_tower(s: Setup) -> tuple[int, int]:
    """(parameters, bytes) per GPU of the tower and projector vLLM does not build (every modality limited to 0 in a
    release that skips them: ``resolve_mm``); (0, 0) otherwise."""
    if not s.opts.mm_tower_skipped:
        return 0, 0
    n = vz.vision_params(s.card, hf=False, tp=s.layout.tp).total
    return n, s.w_t.data_bytes(n)


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
    """--limit-mm-per-prompt as given (every modality of it) and --mm-encoder-tp-mode."""
    import shlex

    out = []
    if s.opts.mm_limit_config is not None:
        out.append(f"--limit-mm-per-prompt {shlex.quote(s.opts.mm_limit_config)}")
    if s.opts.mm_encoder_mode:
        out.append(f"--mm-encoder-tp-mode {s.opts.mm_encoder_mode}")
    return out


def notes(s: Setup) -> list[str]:
    v = s.card.vision
    if v is None:
        return []
    if s.opts.mm_tower_skipped:
        return [f"--limit-mm-per-prompt {s.opts.mm_limit_config}: every modality 0, so {s.engine.rules} builds no "
                f"vision tower or projector ({v.kind}; its module skips them: {_skip_rule(s)}): none is counted with "
                "the weights, and the profile run encodes nothing."]
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
        first = tower_rule(s.card)[1]
        later = (f"; {s.card.hf_architecture} skips them from vLLM {'.'.join(map(str, first))} on ({_skip_rule(s)}), "
                 f"whose weights are {size} smaller per GPU" if first is not None
                 else "; kvplan has not read whether this architecture skips them")
        out.append("--limit-mm-per-prompt: every modality 0 (text-only): the profile run encodes nothing; this "
                   f"release ({s.engine.rules}) still builds the tower and projector, counted with the weights{later}.")
        return out
    kept, enc = vz.encoder_peak_bytes(v, b, s.card.hidden_size, s.w_t.activation_bytes)
    enc //= 1 if s.opts.mm_encoder_data else s.layout.tp
    out.append(f"Encoder profile: 'Encoder cache will be initialized with a budget of {b.budget_tokens} tokens, and "
               f"profiled with {b.items} image items of the maximum feature size' ({fmt_int(b.tokens_per_item)} "
               f"tokens per image, {fmt_int(b.encoder_tokens)} encoder tokens); the kept outputs "
               f"({fmt_bytes(kept)}) and the encoder's peak ({fmt_bytes(enc)}, ESTIMATED) enter the profile-run peak.")
    return out


def _skip_rule(s: Setup) -> str:
    first = tower_rule(s.card)[1]
    return ("interfaces.py _mark_tower_model" if first >= (0, 15) else "its __init__ tests get_limit_per_prompt; "
            "interfaces.py _mark_tower_model from 0.15")
