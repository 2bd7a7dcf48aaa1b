"""Serving features that move an engine's memory: speculative decoding (vLLM ``--speculative-config``), prefix
caching (``--shared-prefix-len``) and LoRA slots (vLLM ``--enable-lora``). Pure functions and small typed values;
the runtimes (``kvplan.cost.runtimes``) apply them. Rules read from vLLM (local-inference-lab/vllm 28be48fa, upstream
to 2026-05-19; /work/shared/reference/serving-features.md section 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError
from kvplan.model.origin import hf_repo  # a draft card is launched as its Hub id, as the target is
from kvplan.units import cdiv, require_positive

if TYPE_CHECKING:
    from kvplan.cost.parallel import Layout
    from kvplan.model.card import ModelCard
    from kvplan.model.dtypes import DType

# ---- speculative decoding ----------------------------------------------------------------------------------------

SPEC_METHODS = ("eagle", "eagle3", "mtp", "draft_model", "ngram", "suffix")
# vLLM's spellings of the multi-token-prediction proposer (config/speculative.py SpeculativeMethod / MTPModelTypes)
# and the first release that takes each, read in every wheel 0.9.1-0.33.0: before 0.11 only the model types
# (0.9.1-0.10.1 deepseek_mtp; 0.10.2 ernie_mtp and qwen3_next_mtp), "mtp" from 0.11; later model types (nemotron_h_mtp,
# qwen3_5_mtp, ...) are taken as "mtp" and not checked by release
MTP_FIRST_RELEASES = {"deepseek_mtp": (0, 9, 1), "ernie_mtp": (0, 10, 2), "qwen3_next_mtp": (0, 10, 2),
                      "mtp": (0, 11, 0), "glm4_moe_mtp": (0, 11, 0), "mimo_mtp": (0, 11, 0),
                      "longcat_flash_mtp": (0, 11, 0), "pangu_ultra_moe_mtp": (0, 12, 0)}
_SPEC_KEYS = {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "revision",
              "draft_model_revision", "quantization", "prompt_lookup_max", "prompt_lookup_min", "max_model_len"}
EAGLE_LAYERS = 1  # EAGLE / EAGLE-3 heads for Llama, Qwen, ...: one decoder layer (num_hidden_layers 1)
MTP_LAYERS = 1  # num_nextn_predict_layers of DeepSeek-V3, GLM-4.5, Qwen3-Next, MiMo (a card without mtp_layers)


@dataclass(frozen=True)
class Speculative:
    """A resolved ``--speculative-config``: the method, the draft, k, and the draft's decoder layers on the GPU."""

    method: str
    k: int  # num_speculative_tokens: lookahead slots per running request
    model: str | None = None
    draft_layers: int = 0  # attention layers the proposer adds to the KV pool
    draft_card: ModelCard | None = None  # draft_model: the small model kvplan loaded
    passed_on: tuple[str, ...] = ()  # the engine's flags given but not modelled, for the launch line
    spelling: str = ""  # the method as given (vLLM's deepseek_mtp, qwen3_next_mtp, ... are method mtp)
    config: str | None = None  # vLLM: the --speculative-config JSON as given, every key of it (the launch line's)
    topk: int | None = None  # SGLang: --speculative-eagle-topk on the launch line (1: a chain; None: vLLM, NGRAM)
    draft_tokens: int | None = None  # SGLang: speculative_num_draft_tokens (None: vLLM; NGRAM without the flag)

    def __str__(self) -> str:
        draft = f", draft {self.model}" if self.model else ""
        return f"{self.method} k={self.k} ({self.draft_layers} draft layer{'s' * (self.draft_layers != 1)}{draft})"


def parse_speculative(value: str | dict, card: ModelCard) -> Speculative:
    """vLLM config/speculative.py SpeculativeConfig from ``--speculative-config`` (JSON text or a dict); ``config``
    keeps every key given, for the launch line."""
    flag = "--speculative-config"
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise KvplanError(f"{flag}: not JSON ({e.msg} at character {e.pos}); e.g. "
                              '\'{"method": "eagle", "model": "ORG/NAME", "num_speculative_tokens": 3}\'') from None
    if not isinstance(value, dict):
        raise KvplanError(f"{flag}: a JSON object, got {type(value).__name__}")
    try:
        config = json.dumps(value)
    except (TypeError, ValueError):  # a dict through the API holding what JSON cannot
        raise KvplanError(f"{flag}: a JSON object of strings and numbers, got {str(value)[:60]!r}") from None
    spec = _speculative(value, card)
    if spec.draft_card is not None and spec.model != value.get("model"):  # a card name: the engine loads its Hub repo
        config = json.dumps({**value, "model": spec.model})
    return replace(spec, config=config)


def _speculative(value: dict, card: ModelCard) -> Speculative:
    flag = "--speculative-config"
    unknown = sorted(set(value) - _SPEC_KEYS)
    if unknown:
        raise KvplanError(f"{flag}: unknown key {unknown[0]!r}; kvplan reads {', '.join(sorted(_SPEC_KEYS))}")
    model = value.get("model")
    method = value.get("method") or _infer_method(model)
    spelling = method
    if isinstance(method, str) and method.endswith("_mtp"):  # a model type's own name for its MTP proposer
        method = "mtp"
    if method not in SPEC_METHODS:
        raise KvplanError(f"{flag}: method {str(method)[:40]!r}; allowed: {', '.join(SPEC_METHODS)}")
    # vLLM SpeculativeConfig: mtp's num_speculative_tokens defaults to the checkpoint's num_nextn_predict_layers
    mtp_layers = own_mtp_layers(card, f"{flag}: method mtp") if method == "mtp" else MTP_LAYERS
    k = value.get("num_speculative_tokens", mtp_layers if method == "mtp" else None)
    if k is None:
        raise KvplanError(f"{flag}: num_speculative_tokens is required for method {method}")
    k = require_positive(f"{flag}: num_speculative_tokens", k, 64)
    tp = value.get("draft_tensor_parallel_size")
    if tp is not None and tp != 1 and method == "draft_model":
        pass  # vLLM: 1 or the target TP; kvplan shards the draft as the target (the default)
    if method in ("eagle", "eagle3"):
        if not model:
            raise KvplanError(f"{flag}: method {method} needs \"model\" (the EAGLE head's repository)")
        return Speculative(method, k, model, EAGLE_LAYERS)
    if method == "mtp":
        return Speculative(method, k, model, mtp_layers, spelling=spelling)
    if method == "draft_model":
        if not model:
            raise KvplanError(f"{flag}: method draft_model needs \"model\": a card name, .yaml or Hub id kvplan reads")
        draft = draft_card(f"{flag}: model", model)
        return Speculative(method, k, hf_repo(draft), draft.attention_layers, draft)
    return Speculative(method, k, model, 0)  # ngram, suffix: proposers on the host, nothing on the GPU


def own_mtp_layers(card: ModelCard, what: str) -> int:
    """The multi-token-prediction layers a draft reuses (vLLM mtp, SGLang NEXTN): the card's mtp_layers when it says
    (Kimi-K2: 0, refused), else MTP_LAYERS for the MoE / MLA / hybrid families that ship them."""
    if card.mtp_layers == 0 or (card.mtp_layers is None and card.moe is None and card.mla is None
                                and card.ssm is None):
        raise KvplanError(f"{what} reuses the model's own multi-token-prediction layers (DeepSeek-V3, GLM-4.5, "
                          f"Qwen3-Next, MiMo); {card.name} has none in its card")
    return card.mtp_layers or MTP_LAYERS


def draft_card(flag: str, model: str) -> ModelCard:
    """The draft model's card (a bundled name, .yaml or Hub id), a bad one reported under ``flag``."""
    from kvplan.model.catalog import load_card

    try:
        return load_card(model)
    except KvplanError as e:
        raise KvplanError(f"{flag}: {e}") from None


SGLANG_SPEC = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# kvplan's draft when --speculative-num-steps is not given: a chain of 3 steps (topk 1, 4 draft tokens), printed on the
# launch line in full. SGLang's own choice, reached only when none of the three is given, depends on the release and
# the architecture (serving_sglang.auto_speculative_params; the SGLang runtime names it in a note where it differs)
SGLANG_DEFAULT_STEPS = 3


def parse_sglang_speculative(flags, card: ModelCard) -> Speculative | None:
    """SGLang's --speculative-* flags (server_args.py): NEXTN runs as EAGLE on the model's own MTP layers; EAGLE /
    EAGLE3 heads have one decoder layer; STANDALONE loads the draft model (a card kvplan reads); NGRAM keeps nothing
    on the GPU. k = --speculative-num-steps (the drafted chain; kvplan's default SGLANG_DEFAULT_STEPS).

    EAGLE, EAGLE3, NEXTN and STANDALONE get the whole triple on the launch line (``passed_on``): SGLang takes either
    none of --speculative-num-steps / --speculative-eagle-topk / --speculative-num-draft-tokens (its auto-choice) or
    the steps with a top-k (server_args.py _handle_speculative_decoding, read in 0.4.8, 0.5.4, 0.5.6, 0.5.10;
    arg_groups/speculative_hook.py _handle_eagle_family 0.5.13 - 0.5.23): "if speculative_num_steps is None: assert
    speculative_eagle_topk is None and speculative_num_draft_tokens is None", then ``speculative_eagle_topk > 1``
    raises a TypeError on a top-k left None (0.5.4+), and a top-k > 1 leaves the draft tokens None (only top-k 1 sets
    them to steps + 1). So: no steps -> kvplan's chain (3, 1, 4); steps alone -> top-k 1 and steps + 1 draft tokens;
    a top-k or draft tokens without the steps, or a top-k > 1 without the draft tokens, refused."""
    algo = flags.speculative_algorithm
    given = [n for n in ("speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
                         "speculative_num_draft_tokens") if getattr(flags, n) is not None]
    if algo is None:
        if given:
            raise KvplanError(f"--{given[0].replace('_', '-')}: needs --speculative-algorithm")
        return None
    name = str(algo).upper()
    if name not in SGLANG_SPEC:
        raise KvplanError(f"--speculative-algorithm: {str(algo)[:40]!r}; allowed: {', '.join(SGLANG_SPEC)}")
    steps = flags.speculative_num_steps
    k = SGLANG_DEFAULT_STEPS if steps is None else require_positive("--speculative-num-steps", steps, 64)
    topk, tokens = (None if v is None else require_positive(f, v, 1024) for f, v in (
        ("--speculative-eagle-topk", flags.speculative_eagle_topk),
        ("--speculative-num-draft-tokens", flags.speculative_num_draft_tokens)))
    path = flags.speculative_draft_model_path
    if name == "NGRAM":  # as given: SGLang's NGRAM sets its top-k from --speculative-ngram-max-bfs-breadth itself
        passed_on = (f"--speculative-num-steps {k}",
                     *(f"{f} {v}" for f, v in (("--speculative-eagle-topk", topk),
                                               ("--speculative-num-draft-tokens", tokens)) if v is not None))
        return Speculative("ngram", k, path, 0, None, passed_on, topk=topk, draft_tokens=tokens)
    if steps is None and (topk is not None or tokens is not None):
        which = "--speculative-eagle-topk" if topk is not None else "--speculative-num-draft-tokens"
        raise KvplanError(f"--speculative-num-steps: SGLang needs it with {which} (server_args.py "
                          "_handle_speculative_decoding asserts both unset without it); give all three or none")
    topk = 1 if topk is None else topk
    if tokens is None and topk > 1:
        raise KvplanError(f"--speculative-num-draft-tokens: SGLang needs it with --speculative-eagle-topk {topk} "
                          "(server_args.py _handle_speculative_decoding sets it only for top-k 1)")
    tokens = k + 1 if tokens is None else tokens
    passed_on = (f"--speculative-num-steps {k}", f"--speculative-eagle-topk {topk}",
                 f"--speculative-num-draft-tokens {tokens}")
    if name == "NEXTN":
        return Speculative("nextn", k, path, own_mtp_layers(card, "--speculative-algorithm: NEXTN"), None, passed_on,
                           topk=topk, draft_tokens=tokens)
    if name in ("EAGLE", "EAGLE3"):
        if not path:
            raise KvplanError(f"--speculative-draft-model-path: {name} needs the draft head's repository")
        return Speculative(name.lower(), k, path, EAGLE_LAYERS, None, passed_on, topk=topk, draft_tokens=tokens)
    if not path:
        raise KvplanError("--speculative-draft-model-path: STANDALONE needs the draft model (a card name, .yaml "
                          "or Hub id kvplan reads)")
    draft = draft_card("--speculative-draft-model-path", path)
    return Speculative("standalone", k, hf_repo(draft), draft.attention_layers, draft, passed_on, topk=topk,
                       draft_tokens=tokens)


def sglang_spec_cell_size(cell_size: int, spec: Speculative | None, num_layers: int) -> int:
    """SGLang's target cell size with an EAGLE / STANDALONE draft in the same token pool (sgl-project/sglang
    003fca80 ``pool_configurator.py`` ``DefaultPoolConfigurator.__init__``): ``int(cell_size * (1 +
    eagle_draft_num_layers / num_layers))``, assuming the draft's layers cache as the target's do; the draft worker
    inherits ``max_total_num_tokens``."""
    if spec is None or not spec.draft_layers or num_layers <= 0:
        return cell_size
    return int(cell_size * (1 + spec.draft_layers / num_layers))


def _infer_method(model: str | None) -> str | None:
    """vLLM SpeculativeConfig.__post_init__: a model named like an EAGLE head is eagle / eagle3, else draft_model."""
    if not model:
        return None
    name = model.lower()
    if "eagle3" in name or "eagle-3" in name:
        return "eagle3"
    return "eagle" if "eagle" in name else "draft_model"


def draft_head_weight_bytes(card: ModelCard, w_t: DType, layout: Layout, spec: Speculative) -> int:
    """Draft weights an EAGLE head or MTP module adds on one GPU, ESTIMATED from the target's shapes
    (v1/spec_decode/llm_base_proposer.py load_model shares embed_tokens and lm_head with the target): one decoder
    layer of the target's, sharded as the target's are, plus its replicated input projection (torch.nn.Linear, bias
    free: EAGLE ``fc`` 2h x h, EAGLE-3 ``fc`` 3h x h, MTP ``eh_proj`` 2h x h)."""
    from kvplan.cost.parallel import Layout, rank_weights

    n = card.num_layers
    if n < 3:
        per_layer = rank_weights(card, w_t, Layout(layout.tp), 0, 0, include_buffers=False).bytes // n
    else:  # a middle pipeline stage of one layer holds that layer's weights alone (no embeddings, no LM head)
        stages = [range(0, n - 2), range(n - 2, n - 1), range(n - 1, n)]
        per_layer = rank_weights(card, w_t, Layout(layout.tp, 3), 0, 1, include_buffers=False, stages=stages).bytes
    fc_in = 3 if spec.method == "eagle3" else 2
    return spec.draft_layers * per_layer + w_t.data_bytes(fc_in * card.hidden_size * card.hidden_size)


def draft_model_weight_bytes(spec: Speculative, w_t: DType, layout: Layout) -> int:
    """draft_model: the small model's own weights, sharded over the target's TP (draft_tensor_parallel_size
    default), with its own embeddings and LM head."""
    from kvplan.cost.parallel import Layout, rank_weights

    return rank_weights(spec.draft_card, w_t, Layout(layout.tp), 0, 0).bytes


def expected_tokens_per_step(acceptance_rate: float, k: int) -> float:
    """Tokens a request gains per verification step with k drafted tokens each accepted with probability a, i.i.d.:
    E = (1 - a^(k+1)) / (1 - a) (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
    Decoding", ICML, eq. 1), k + 1 at a = 1."""
    a = acceptance_rate
    if not 0.0 <= a <= 1.0:
        raise KvplanError(f"--acceptance-rate: {a}; allowed: a probability in [0, 1]")
    return float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def draft_step_cost(card: ModelCard, w_t: DType, spec: Speculative, batch: int, kv_read_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of one drafting step of ``batch`` requests by an EAGLE head or MTP module, ESTIMATED: its
    decoder layer(s) and input projection (``draft_head_weight_bytes``) plus the target's LM head it shares (vocab x
    hidden), read once and multiplied by 2 FLOPs per weight and token; ``kv_read_bytes`` of its layers' K/V."""
    from kvplan.cost.parallel import Layout

    head = draft_head_weight_bytes(card, w_t, Layout(), spec)
    lm_head = w_t.data_bytes(card.vocab_size * card.hidden_size)
    params = (head + lm_head) * 8 // max(1, w_t.bits)
    return 2 * batch * params, head + lm_head + kv_read_bytes


# ---- prefix caching ----------------------------------------------------------------------------------------------

def shared_prefix(flags) -> int:
    """--shared-prefix-len as a count of tokens (0: none)."""
    return 0 if flags.shared_prefix_len is None else require_positive("--shared-prefix-len", flags.shared_prefix_len)


def shared_blocks(prefix_len: int, max_model_len: int, block_size: int) -> int:
    """Blocks a shared prompt prefix saves per request: only full blocks are shared, and a request hits at most
    num_tokens - 1 tokens (v1/core/kv_cache_manager.py get_computed_blocks: max_cache_hit_length =
    request.num_tokens - 1): floor(min(P, L - 1) / block)."""
    return min(prefix_len, max_model_len - 1) // block_size


def concurrency_with_prefix(num_blocks: int, blocks_per_request: int, shared: int) -> float:
    """N requests of blocks_per_request blocks, ``shared`` of them held once: s + N (b - s) <= blocks, so
    N = (blocks - s) / (b - s)."""
    if shared <= 0:
        return num_blocks / blocks_per_request
    if num_blocks < shared:
        return 0.0
    return (num_blocks - shared) / (blocks_per_request - shared)


# ---- LoRA --------------------------------------------------------------------------------------------------------

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm/config/lora.py max_lora_rank choices
DEFAULT_MAX_LORAS, DEFAULT_MAX_LORA_RANK = 1, 16


@dataclass(frozen=True)
class LoRA:
    """vLLM's GPU LoRA slots: max_loras adapters of rank max_lora_rank held at once."""

    max_loras: int = DEFAULT_MAX_LORAS
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK


def resolve_lora(enable: bool, max_loras: int | None, max_lora_rank: int | None) -> LoRA | None:
    if not enable:
        for flag, value in (("--max-loras", max_loras), ("--max-lora-rank", max_lora_rank)):
            if value is not None:
                raise KvplanError(f"{flag}: only with --enable-lora")
        return None
    loras = DEFAULT_MAX_LORAS if max_loras is None else require_positive("--max-loras", max_loras)
    rank = DEFAULT_MAX_LORA_RANK if max_lora_rank is None else max_lora_rank
    if rank not in LORA_RANKS:
        raise KvplanError(f"--max-lora-rank: vLLM allows {', '.join(map(str, LORA_RANKS))}; got {rank!r}")
    return LoRA(loras, rank)


def lora_slot_elements(card: ModelCard, tp: int, rank: int) -> int:
    """Elements of one LoRA slot on one TP rank, all decoder layers (vllm/lora/layers create_lora_weights, not
    fully sharded): column-parallel slices take A = r x full input and B = (output / tp) x r; row-parallel A = r x
    (input / tp) and B = full output x r. QKV: q, k, v slices; gate_up: 2 slices; o_proj, down_proj: 1."""
    if card.mla is not None or card.moe is not None or card.ssm is not None:
        raise KvplanError(f"--enable-lora: LoRA slots are modelled for dense attention models; {card.name} has "
                          "MLA, MoE or state layers (vLLM's FusedMoEWithLoRA and MLA wrappers are not modelled)")
    h, hd, r = card.hidden_size, card.head_dim, rank
    kv_rank = max(1, card.num_kv_heads // tp)  # K/V heads on a rank, replicated when fewer than TP
    q_out, kv_out = card.num_heads // tp * hd, kv_rank * hd
    qkv = 3 * r * h + r * (q_out + 2 * kv_out)  # three slices: A r x h each, B out x r
    o = r * (card.num_heads * hd // tp) + h * r  # row-parallel: A r x (in / tp), B h x r
    i = card.ffn_size
    mlp = (2 * r * h + 2 * (i // tp) * r + r * (i // tp) + h * r) if card.gated_ffn else (r * h + (i // tp) * r
                                                                                           + r * (i // tp) + h * r)
    return card.num_layers * (qkv + o + mlp)


def lookahead_blocks(length: int, k: int, max_model_len: int, block_size: int) -> int:
    """vLLM v1/core/sched allocate_slots: a decoding request holds cdiv(min(L + k, max_model_len), block) blocks."""
    return cdiv(min(length + k, max_model_len), block_size)
