"""The Hub checkpoint check explains every buffer transformers 5.24 saves with the weights (kvplan.planning.checkpoint
``_BUFFERS``): the persistent buffers of the meta model of each model_type kvplan reads are exactly what the rule
matches, and a DeepSeek-V3 checkpoint written from the model's own ``state_dict()`` leaves nothing unexplained."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

from kvplan.cost.engines import IDEAL_RULES  # noqa: E402
from kvplan.model.dtypes import parse_dtype  # noqa: E402
from kvplan.model.hf.checkpoint import Checkpoint, Tensor  # noqa: E402
from kvplan.model.hf.config import card_from_hf_config  # noqa: E402
from kvplan.model.hf.families import READERS  # noqa: E402
from kvplan.model.hf.vision import MULTIMODAL  # noqa: E402
from kvplan.planning.checkpoint import _BUFFERS, checkpoint_check  # noqa: E402
from kvplan.planning.estimate import weights_result  # noqa: E402

_AUTO = ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModelForSeq2SeqLM", "AutoModel")
# persistent buffers by model_type (transformers 5.24): what the checkpoint check must explain
_EXPECTED = {"deepseek_v3": {"e_score_correction_bias"}, "glm4_moe": {"e_score_correction_bias"},
             "nemotron_h": {"e_score_correction_bias"},
             "lfm2_moe": {"expert_bias"}, "kimi_linear": {"e_score_correction_bias"},
             "minimax": {"slope_rate", "query_decay", "key_decay", "diagonal_decay"}}
# defaults transformers 5.24 cannot build from alone (NemotronConfig num_key_value_heads None, Lfm2MoeConfig
# layer_types None): the keys every real file sets
_BUILDABLE = {"nemotron": {"num_key_value_heads": 8}, "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 16}}


def _meta_model(config):
    for auto in _AUTO:
        try:
            with torch.device("meta"):
                return getattr(transformers, auto).from_config(config)
        except (ValueError, KeyError):
            continue
    return None


@pytest.mark.parametrize("model_type", sorted(set(READERS) | set(MULTIMODAL)))
def test_every_saved_buffer_is_explained(model_type):
    try:  # asked here, not at collection (every xdist worker collects; each config class imports its model module)
        config = transformers.AutoConfig.for_model(model_type, **_BUILDABLE.get(model_type, {}))
    except ValueError:  # a reader for remote-code files (RefinedWeb, kimi_k2): no transformers class
        pytest.skip(f"{model_type}: no transformers class (a reader for remote-code files)")
    model = _meta_model(config)
    if model is None:
        pytest.skip(f"no transformers 5.24 model class builds {model_type} from its defaults")
    params = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    saved = [k for k in model.state_dict() if k not in params]
    assert {k.rsplit(".", 1)[-1] for k in saved} == _EXPECTED.get(model_type, set())
    assert all(_BUFFERS.search(k) for k in saved)
    assert not any(_BUFFERS.search(n) for n in params)  # no parameter is taken for a buffer (ERNIE-4.5's
    # moe_statics.e_score_correction_bias is an nn.Parameter)


def test_deepseek_v3_checkpoint_of_its_state_dict_has_nothing_unexplained():
    config = transformers.DeepseekV3Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
        vocab_size=128, kv_lora_rank=32, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
        first_k_dense_replace=1, n_group=1, topk_group=1, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    names = {torch.bfloat16: "BF16", torch.float32: "F32"}
    tensors = tuple(Tensor(n, names[t.dtype], t.numel(), t.numel() * t.element_size())
                    for n, t in model.state_dict().items())
    card = card_from_hf_config({**config.to_dict(), "torch_dtype": "bfloat16"})
    stored = parse_dtype(card.dtype)
    check = checkpoint_check(card, Checkpoint("acme/dsv3", "0" * 40, None, tensors, 1),
                             weights_result(card, stored, stored, IDEAL_RULES).bytes)
    biases = [t for t in tensors if t.name.endswith("e_score_correction_bias")]
    assert len(biases) == 2 and check.unexplained_bytes == 0 and check.warning is None
    buffers = next(p for p in check.explained if p.reason.startswith("buffers"))
    assert buffers.bytes == sum(t.nbytes for t in biases) == 2 * 4 * 4  # whole: 4 experts x F32
    assert buffers.names == ["model.layers.*.mlp.gate.e_score_correction_bias"]
