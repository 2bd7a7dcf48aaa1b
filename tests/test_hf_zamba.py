"""ERNIE-4.5-MoE and the Zamba hybrids (Mamba layers plus shared attention + MLP blocks invoked by hybrid layers),
proven against transformers 5.x like tests/test_state_layers_2.py: exact parameter counts (shared weights once,
per-invocation linears and adapters each time), and every tensor the real caches hold (each invocation's own K/V,
the conv and SSM states), layer by layer, for several batch / prompt / decode combinations."""

from __future__ import annotations

import functools
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan import count_params, estimate, sweep  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.catalog import card_from_dict  # noqa: E402
from kvplan.planning.capacity import plan  # noqa: E402
from kvplan.verify.reference.shrink import shrink  # noqa: E402
from kvplan.verify.run import verify  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families.moe import DEFAULTS as DEFAULTS_ZAMBA  # noqa: E402
from cases import ATTN, MOE, ZAMBA_CASES as CASES  # noqa: E402
from tiny_models import HYBRID_LENGTHS, case, case_card, dynamic_cache_test  # noqa: E402
from tiny_models import check_bf16_cache, check_config_defaults, check_static_cache, full_size_card  # noqa: E402


_case = functools.partial(case, CASES)
_card = functools.partial(case_card, CASES)


test_params_and_dynamic_cache_match_transformers = dynamic_cache_test(CASES, HYBRID_LENGTHS)


@pytest.mark.parametrize("name", ["zamba", "zamba2-gqa-rope-bias"])
def test_bf16_model_state_dtypes(name):
    """transformers keeps the Mamba-1/2 SSM states in float32 in a bf16 model, K/V and conv states in bf16."""
    card, cache = check_bf16_cache(*_case(name), 4, 2)
    hybrid = cache.layers[[i for i in range(card.num_layers) if card.mixer(i) == "hybrid"][0]]
    assert (hybrid.keys.dtype, hybrid.conv_states[0].dtype, hybrid.recurrent_states[0].dtype) == (
        torch.bfloat16, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("name", ["zamba", "zamba2-adapters", "ernie4.5-moe"])
def test_static_cache_holds_states_beside_preallocated_kv(name):
    check_static_cache(*_case(name))


def test_zamba2_shared_blocks_by_hand():
    """Zamba2 tiny (h 64, 4 heads of 2h/4 = 32, ffn 96, adapter rank 4, 2 blocks over 3 hybrid layers of 6):
    2 blocks of attention 2 x 64 x (128 + 2 x 128) + 128 x 64 and MLP 64 x 192 + 96 x 64; 3 invocations of q/k/v
    adapters 3 x 2 x (128 x 4) and a gate_up adapter 4 x (64 + 192), each with its Linear(64, 64). Cache on vLLM,
    bf16, batch 3 at 40 tokens: 3 hybrid layers of K/V (4 heads x 32), 6 conv states (conv_dim 128 + 2 x 8 = 144
    channels x 3 inputs) and 6 SSM states (8 heads x 16 x 8)."""
    card = _card("zamba2-adapters")
    p = count_params(card)
    assert p.attention == 2 * (2 * 64 * (128 + 2 * 128) + 128 * 64) + 3 * 3 * 2 * 128 * 4
    assert p.mlp == p.mlp_active == 2 * (64 * 192 + 96 * 64) + 3 * 4 * (64 + 192)
    assert (p.other, p.norms) == (3 * 64 * 64, 2 * (128 + 64) + 6 * 64 + 64)
    est = estimate(card, batch=3, seq_len=40, engine="vllm", kv_dtype="bf16", block_size=16,
                   engine_groups=False)
    groups = {g.kind: g.total_bytes for g in est.kv_cache.groups}
    assert groups == {"full": 3 * 3 * 48 * 2 * 4 * 32 * 2, "conv_state": 3 * 6 * 144 * 3 * 2,
                      "ssm_state": 3 * 6 * 8 * 16 * 8 * 2}
    ideal = estimate(card, batch=3, seq_len=40, engine="ideal", kv_dtype="bf16")
    assert ideal.kv_cache.total_bytes == 3 * (3 * 40 * 2 * 4 * 32 * 2 + 6 * 144 * 3 * 2 + 6 * 8 * 16 * 8 * 2)


def test_ernie_moe_layer_window_and_shared_experts():
    """moe_layer_start_index 0, end 3, interval 2 over 6 layers: layers 1 and 3 MoE (5 is past the end)."""
    card = _card("ernie4.5-moe-window")
    assert [card.is_moe_layer(i) for i in range(6)] == [False, True, False, True, False, False]
    assert card.moe.num_shared_experts == 0 and card.moe.router_bias
    default = _card("ernie4.5-moe")  # start 1, end -1 (the last layer); 2 shared experts as one MLP of 2 x 32
    assert [default.is_moe_layer(i) for i in range(4)] == [False, True, True, True]
    assert (default.moe.num_shared_experts, default.moe.shared_ffn) == (1, 64)
    assert _card("ernie4.5-moe-dense-bias").moe is None


@pytest.mark.parametrize("name", ["zamba", "zamba2-adapters"])
def test_layer_rule_without_layers_block_type_is_the_config_class_rule(name):
    model_type, kwargs = _case(name)
    kwargs = {k: v for k, v in kwargs.items() if k != "layers_block_type"}
    if model_type == "zamba2":  # Zamba2Config's fixed 54-layer list
        kwargs["num_hidden_layers"] = 54
    data = transformers.AutoConfig.for_model(model_type, **kwargs).to_dict()
    rule = {k: v for k, v in data.items() if k not in ("layers_block_type", "hybrid_layer_ids")}
    card = card_from_hf_config(rule)
    assert card == card_from_hf_config(data)
    hybrids = [i for i in range(card.num_layers) if card.mixer(i) == "hybrid"]
    assert hybrids == ([2, 4, 6] if model_type == "zamba" else data["hybrid_layer_ids"])


ERNIE_21B = {  # baidu/ERNIE-4.5-21B-A3B-PT config.json
    "model_type": "ernie4_5_moe", "_name_or_path": "baidu/ERNIE-4.5-21B-A3B-PT", "torch_dtype": "bfloat16",
    "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 12288, "max_position_embeddings": 131072,
    "moe_intermediate_size": 1536, "moe_k": 6, "moe_layer_end_index": 27, "moe_layer_interval": 1,
    "moe_layer_start_index": 1, "moe_num_experts": 64, "moe_num_shared_experts": 2, "num_attention_heads": 20,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "vocab_size": 103424, "tie_word_embeddings": True, "use_bias": False,
}
ZAMBA_7B = {"model_type": "zamba", "_name_or_path": "Zyphra/Zamba-7B-v1", "torch_dtype": "bfloat16",
            **{k: v for k, v in transformers.AutoConfig.for_model("zamba").to_dict().items()
               if k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "max_position_embeddings")}}  # ZambaConfig's defaults are Zamba-7B-v1's


@pytest.mark.parametrize(("config", "total", "active"), [
    (ERNIE_21B, 21e9, 3e9),  # ERNIE 4.5 model card: 21B total, 3B activated per token
    (ZAMBA_7B, 7e9, 7e9),  # Zamba paper (arXiv:2405.16712): a 7B model
])
def test_full_size_configs_match_published_totals(config, total, active):
    p = count_params(full_size_card(config))
    assert p.total == pytest.approx(total, rel=0.05)  # 21.83B; 7.23B
    assert round(p.active / 1e9) * 1e9 == active  # 3.35B; 7.23B


def test_defaults_zamba_are_transformers_defaults():
    check_config_defaults(DEFAULTS_ZAMBA)


@pytest.mark.parametrize(("model_type", "kwargs", "match"), [
    ("zamba", dict(layers_block_type=["mamba", "attention"]), r"layers_block_type: \['mamba', 'attention'\] is not"),
    ("zamba", dict(layers_block_type=["mamba", "hybrid", "mamba"]), "has 3 layers but num_hidden_layers is 2"),
    ("zamba", dict(num_hidden_layers=2), r"layers_block_type \(the config class's default rule\) has 3 layers"),
    ("zamba", dict(num_hidden_layers=3, attention_hidden_size=96), "attention_hidden_size 96: .* allowed: 2 x hidden_size"),
    ("zamba", dict(num_hidden_layers=3, n_mamba_heads=3), r"n_mamba_heads 3 does not divide mamba_expand x hidden_size \(128\)"),
    ("zamba2", dict(layers_block_type=["mamba", "hybrid"], hybrid_layer_ids=[0]),
     r"hybrid_layer_ids \[0\] disagree with layers_block_type \(hybrid at \[1\]\)"),
    ("zamba2", dict(layers_block_type=["mamba", "hybrid"], num_key_value_heads=2, use_shared_attention_adapter=True),
     "shared_blocks.attention_adapters: the q/k/v adapters are 2 x hidden_size"),
    ("zamba2", dict(layers_block_type=["mamba", "hybrid"], num_hidden_layers=54), "has 2 layers but num_hidden_layers"),
    ("ernie4_5_moe", dict(use_bias=True), "use_bias true with MoE layers .* not modelled"),
    ("ernie4_5_moe", dict(moe_layer_end_index=1.5), "moe_layer_end_index: 1.5 is out of range or not an integer"),
])
def test_inconsistent_configs_name_the_keys(model_type, kwargs, match):
    data = {**ATTN, **MOE, "hidden_size": 64, "vocab_size": 128, "num_hidden_layers": 2, **kwargs,
            "model_type": model_type}
    with pytest.raises(KvplanError, match=match):
        card_from_hf_config(data)


def test_verify_refuses_shared_blocks():
    """The reference model has no shared blocks: verify refuses in one line instead of measuring something else."""
    with pytest.raises(KvplanError, match="verify .*not modelled for shared transformer blocks"):
        verify(_card("zamba"))


@pytest.mark.parametrize(("name", "kw", "match"), [
    ("zamba", dict(engine="vllm"), r"--engine vllm: .* Zamba \(v1\) model .* vLLM serves only Zamba2"),
    ("zamba", dict(engine="sglang"), r"--engine sglang: .* Zamba \(v1\) model"),
    ("zamba", dict(engine="ideal", tp=2), r"--tp: .* Zamba v1.* allowed: --tp 1"),
    ("zamba2-adapters", dict(engine="sglang"), "--engine sglang: SGLang serves no Zamba2 model"),
    ("zamba2-adapters", dict(pp=2), "--pp: vLLM's Zamba2ForCausalLM does not support pipeline parallelism"),
    ("zamba2-adapters", dict(tp=4, rank=6), r"--tp: adapter_rank 6 is not divisible by tensor parallel size 4"),
    ("zamba2-blocks-beyond-calls", dict(tp=3), r"--tp: num_attention_heads 4 is not divisible"),
])
def test_plan_refuses_what_is_not_served(name, kw, match):
    kw = dict(kw)
    card = _edited(name, shared_blocks__adapter_rank=kw.pop("rank")) if "rank" in kw else _card(name)
    with pytest.raises(KvplanError, match=match):
        plan(card, gpu="H100-SXM", max_model_len=64, **kw)


def test_memory_sweep_of_shared_blocks_equals_estimate():
    """Memory needs no FLOPs: a sweep without --gpu sizes a Zamba card, each row as estimate() gives it."""
    card = _card("zamba")
    for row in sweep(card, batch="1,3", seq_len=[5, 64]):
        est = estimate(card, batch=row["batch"], seq_len=row["seq_len"])
        assert (row["kv_cache.total_bytes"], row["total_bytes"]) == (est.kv_cache.total_bytes, est.total_bytes)


def _edited(name: str, **changes):
    data = _card(name).model_dump(exclude_none=True)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = data
        for key in parents:
            target = target[key]
        target[leaf] = value
    return card_from_dict(data, origin="card.yaml")


@pytest.mark.parametrize(("name", "changes", "match"), [
    ("zamba", dict(layer_pattern=["mamba", "global"]), "shared_blocks: needs layer_pattern of mamba and hybrid"),
    ("zamba", dict(layer_pattern=["mamba"]), "shared_blocks: needs layer_pattern .* at least one hybrid"),
    ("zamba", dict(mixer_mlp=True), "shared_blocks: the MLP lives in the shared block; needs mixer_mlp false"),
    ("zamba", dict(shared_blocks__adapter_rank=8), "shared_blocks.adapter_rank: required with attention_adapters"),
    ("zamba2-adapters", dict(shared_blocks__adapter_rank=None), "shared_blocks.adapter_rank: required with"),
    ("ernie4.5-moe-window", dict(moe__last_layer=6), r"moe.last_layer: 6 is outside .* \(0..5\)"),
])
def test_card_invariants_name_the_fields(name, changes, match):
    with pytest.raises(KvplanError, match=match):
        _edited(name, **changes)


def test_shrunk_ernie_keeps_its_moe_window_inside_the_layers():
    small, _ = shrink(_card("ernie4.5-moe-window"), layers=2)
    assert (small.num_layers, small.moe.last_layer) == (2, 1)
    assert [small.is_moe_layer(i) for i in range(2)] == [False, True]
