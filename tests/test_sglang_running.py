"""SGLang --max-running-requests: the running cap a given value becomes, release by release (the rule of
kvplan.cost.serving_sglang.GIVEN_RUNNING_RULES, read in the wheels): 0.4.8 - 0.5.9 take it as given (the
ReqToTokenPool is sized at N and tp_worker.py takes min(N, its size)), 0.5.10 - 0.5.13 cap it at resolve_max_num_reqs'
estimate clamp(int(tokens / context_len x 512), 2048, 4096), 0.5.14+ at tokens // 2; a hybrid's state-slot cap
applies after it. The launch line carries it."""

import pytest

from kvplan.errors import KvplanError
from kvplan.planning.capacity import plan

ASKED = 100_000  # above every cap, so each release's own rule shows


@pytest.mark.parametrize("engine", ["sglang==0.4.8", "sglang==0.5.9", "sglang==0.5.12", "sglang==0.5.14", "sglang"])
def test_a_given_cap_below_every_limit_is_the_cap(engine):
    """64 requests at 4,096 tokens on an H100: under tokens // 2 and the 2,048 floor in every release."""
    p = plan("qwen3-8b", gpu="H100-SXM", engine=engine, max_model_len=4096, max_running_requests=64)
    assert p.running_limit == 64 and p.kv_cache.tokens // 2 > 64
    assert p.launch_command.endswith("--max-running-requests 64") or " --max-running-requests 64 " in p.launch_command
    default = plan("qwen3-8b", gpu="H100-SXM", engine=engine, max_model_len=4096)
    assert default.running_limit > 64 and "--max-running-requests" not in default.launch_command
    assert p.kv_cache.tokens == default.kv_cache.tokens  # the pool is sized before the cap


@pytest.mark.parametrize(("engine", "rule"), [("sglang==0.4.8", "as_given"), ("sglang==0.5.9", "as_given"),
                                              ("sglang==0.5.10", "estimate"), ("sglang==0.5.13", "estimate"),
                                              ("sglang==0.5.14", "half_tokens"), ("sglang", "half_tokens")])
def test_each_release_caps_a_large_value_its_way(engine, rule):
    """32,768-token requests on an RTX 4090: a pool of 7k-31k tokens (by release), so the estimate is its 2,048 floor
    and tokens // 2 (3,407 in 0.5.23) is below the asked 100,000 and not 2,048."""
    p = plan("qwen3-8b", gpu="RTX-4090", engine=engine, max_model_len=32768, max_running_requests=ASKED)
    tokens = p.kv_cache.tokens
    assert 0 < tokens // 2 < ASKED and tokens // 2 != 2048 and int(tokens / 32768 * 512) < 2048
    assert p.running_limit == {"as_given": ASKED, "estimate": 2048, "half_tokens": tokens // 2}[rule]


def test_the_state_slot_cap_applies_after_it():
    """Qwen3-Next at TP 2 on H200 (0.5.23, extra_buffer): min(N, tokens // 2, slots // 5)."""
    default = plan("qwen3-next-80b-a3b", gpu="H200", tp=2, engine="sglang", max_model_len=32768)
    slots_cap = default.running_limit  # the state-slot cap sets the default here (tokens // 2 is far above)
    assert slots_cap < default.kv_cache.tokens // 2
    assert plan("qwen3-next-80b-a3b", gpu="H200", tp=2, engine="sglang", max_model_len=32768,
                max_running_requests=50).running_limit == min(50, slots_cap) == 50
    assert plan("qwen3-next-80b-a3b", gpu="H200", tp=2, engine="sglang", max_model_len=32768,
                max_running_requests=ASKED).running_limit == slots_cap


def test_taken_where_sglang_sizes_speculative_states_from_it():
    """A hybrid with speculative decoding: _handle_max_mamba_cache reserves intermediate states per request from it
    (serving_sglang.MAMBA_SPEC_RULES; tests/test_sglang_mamba_hybrids.py); refused before that was modelled."""
    assert plan("qwen3-next-80b-a3b", gpu="H200", tp=2, engine="sglang", max_model_len=32768, max_running_requests=20,
                speculative_algorithm="NEXTN").running_limit == 20
    for bad in (0, -1, True, 2.5):
        with pytest.raises(KvplanError, match="^--max-running-requests: must be an integer"):
            plan("qwen3-8b", gpu="H100-SXM", engine="sglang", max_model_len=4096, max_running_requests=bad)
    with pytest.raises(KvplanError, match="^--max-running-requests: only for --engine sglang"):
        plan("qwen3-8b", gpu="H100-SXM", max_model_len=4096, max_running_requests=8)


def test_cli_flag(cli):
    code, out, err = cli("plan", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--engine", "sglang", "--max-model-len",
                         "4096", "--max-running-requests", "64")
    assert code == 0, err
    assert "runs at most 64 at once per replica (--max-running-requests 64)" in out
