"""vLLM's serving features: speculative decoding (--speculative-config), LoRA slots (--enable-lora) and prefix
caching (--shared-prefix-len), each pinned to a published log or to a figure computed by hand from vLLM's source."""

from __future__ import annotations

import json

import pytest

import kvplan
from kvplan.cost import serving_vllm as vl
from kvplan.cost.features import concurrency_with_prefix, shared_blocks
from kvplan.errors import KvplanError
from kvplan.units import parse_size

GIB, MIB = 2**30, 2**20
EAGLE = {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}


def test_eagle_log_of_vllm_19996_is_exact():
    """vLLM #19996, Llama-3.1-8B + EAGLE, max_len 131,072: 'Available KV cache memory: 51.63 GiB', 'GPU KV cache
    size: 410,128 tokens', 'Maximum concurrency for 131,072 tokens per request: 3.13x'."""
    kw = dict(gpu="H100-SXM", max_model_len=131072, kv_cache_memory="51.63GiB")
    r = kvplan.plan("llama-3.1-8b", speculative_config=json.dumps(EAGLE), **kw)
    assert r.kv_cache.tokens == 410_128 and f"{r.max_concurrency:.2f}" == "3.13"
    # by hand: the EAGLE head's layer joins the target's 32 in one group: 33 layers x 4,096 B per token x 16
    assert r.kv_cache.num_blocks == parse_size("x", "51.63GiB") // (33 * 4096 * 16)
    assert r.per_gpu.kv_bytes_per_token == 33 * 4096
    assert "--speculative-config" in r.launch_command and r.inputs.speculative.startswith("eagle k=3")
    assert kvplan.plan("llama-3.1-8b", **kw).kv_cache.tokens == 422_944  # without it: 32 layers, +3.1%


def test_draft_weights_count_unless_the_pool_is_given():
    base = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192)
    r = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, speculative_config=EAGLE)
    # one Llama-3.1-8B decoder layer (4h^2 x 3/4 attention with GQA + 3 h x 14336 MLP + 2 norms) + fc 2h x h, bf16
    h, i = 4096, 14336
    layer = h * (4096 + 2 * 1024) + 4096 * h + 3 * h * i + 2 * h
    assert r.per_gpu.weights_bytes - base.per_gpu.weights_bytes == 2 * (layer + 2 * h * h)
    # and the CUDA-graph estimate of decode queries of 1 + 3 tokens (capture sizes from 3, serving_vllm.cudagraph_counts)
    graphs = r.per_gpu.cuda_graph_bytes - base.per_gpu.cuda_graph_bytes
    # and Model Runner V2's grammar bitmask over 4 logits per request instead of 1 (0.29+: serving_vllm.
    # v2_sampler_state_bytes, 1,024 requests x cdiv(128,256, 32) int32 words x 3 more)
    state = vl.v2_sampler_state_bytes(1024, 128_256, 4) - vl.v2_sampler_state_bytes(1024, 128_256)
    assert state == 1024 * 3 * 4008 * 4
    assert base.per_gpu.available_kv_bytes - r.per_gpu.available_kv_bytes == 2 * (layer + 2 * h * h) + graphs + state


def test_mtp_reuses_the_models_mtp_layer():
    kw = dict(gpu="H200", tp=8, max_model_len=8192, weight_dtype="fp8_e4m3")
    r = kvplan.plan("deepseek-v3", speculative_config={"method": "mtp", "num_speculative_tokens": 1}, **kw)
    assert r.per_gpu.kv_bytes_per_token == (61 + 1) * (512 + 64) * 2  # the MTP layer's MLA latent beside 61
    with pytest.raises(KvplanError, match="^--speculative-config: method mtp"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, speculative_config={"method": "mtp"})


def test_mtp_follows_the_checkpoints_num_nextn_predict_layers():
    """GLM-4.5-Air ships one MTP layer (num_nextn_predict_layers 1: vLLM's Glm4MoeMTP draft), not built without
    --speculative-config; Kimi-K2 ships none, so method mtp is refused for it."""
    kw = dict(gpu="H100-SXM", tp=8, max_model_len=32768)
    base = kvplan.plan("glm-4.5-air", **kw)
    r = kvplan.plan("glm-4.5-air", speculative_config={"method": "mtp"}, **kw)
    assert base.per_gpu.kv_bytes_per_token == 46 * 1 * 128 * 2 * 2  # 8 KV heads over TP 8: one per GPU, K and V
    assert r.per_gpu.kv_bytes_per_token == (46 + 1) * 1 * 128 * 2 * 2  # the MTP layer's K/V beside the 46
    assert r.per_gpu.weights_bytes > base.per_gpu.weights_bytes
    with pytest.raises(KvplanError, match="^--speculative-config: method mtp .* kimi-k2-instruct has none"):
        kvplan.plan("kimi-k2-instruct", gpu="H200", tp=8, max_model_len=8192, speculative_config={"method": "mtp"})


def test_draft_model_adds_its_layers_and_weights():
    kw = dict(gpu="H100-SXM", tp=4, max_model_len=8192)
    base = kvplan.plan("llama-3.1-70b", **kw)
    r = kvplan.plan("llama-3.1-70b", speculative_config={"model": "llama-3.1-8b", "num_speculative_tokens": 4}, **kw)
    assert r.per_gpu.kv_bytes_per_token == (80 + 32) * 2 * 128 * 2 * 2  # 2 KV heads per rank, both models
    assert r.inputs.speculative.startswith("draft_model k=4 (32 draft layers")
    assert r.per_gpu.weights_bytes > base.per_gpu.weights_bytes + 3 * GIB  # an 8B model over 4 GPUs, bf16


def test_ngram_holds_nothing_on_the_gpu():
    kw = dict(gpu="H100-SXM", max_model_len=8192)
    r = kvplan.plan("llama-3.1-8b", speculative_config={"method": "ngram", "num_speculative_tokens": 5}, **kw)
    base = kvplan.plan("llama-3.1-8b", **kw)
    assert r.per_gpu.weights_bytes == base.per_gpu.weights_bytes
    assert r.per_gpu.kv_bytes_per_token == base.per_gpu.kv_bytes_per_token
    # only the CUDA graphs differ: FULL decode graphs for 6-token queries start at size 8 (48 of the 51 sizes up to
    # 512 at 1,024 sequences on an H100), three fewer than for 1-token queries (vLLM 0.21 cudagraph_dispatcher.py)
    per_graph = base.per_gpu.cuda_graph_bytes // (51 + 51 - 1)
    assert base.per_gpu.cuda_graph_bytes - r.per_gpu.cuda_graph_bytes == 3 * per_graph
    # and ngram sends the model back to the V1 runner (0.29+: _get_v2_model_runner_unsupported_features), without
    # Model Runner V2's persistent sampler state over 1,024 requests of Llama's 128,256-entry vocabulary
    state = vl.v2_sampler_state_bytes(1024, 128_256)
    assert base.per_gpu.non_torch_bytes - r.per_gpu.non_torch_bytes == state
    # V2's 0.33 warmup-param sampler pass (serving_vllm.v2_warmup_sampler_bytes: the same 12 B of float32 a row and
    # entry as V1's unsorted estimate, + FlashInfer's 1 MiB row-state buffer) beside the forward's output profile_run
    # holds, (8,192 + 1,024) x 4,096 x 2 B
    held = MIB + (8192 + 1024) * 4096 * 2
    assert base.per_gpu.activation_bytes - r.per_gpu.activation_bytes == held
    assert r.per_gpu.available_kv_bytes - base.per_gpu.available_kv_bytes == 3 * per_graph + state + held


@pytest.mark.parametrize("value, match", [
    ("{not json", "not JSON"), ('{"method": "medusa", "num_speculative_tokens": 2}', "method 'medusa'"),
    ('{"method": "eagle", "num_speculative_tokens": 2}', "needs \"model\""),
    ('{"method": "eagle", "model": "x"}', "num_speculative_tokens is required"),
    ('{"method": "eagle", "model": "x", "num_speculative_tokens": 2, "typo": 1}', "unknown key 'typo'"),
])
def test_bad_speculative_config_names_the_flag(value, match):
    with pytest.raises(KvplanError, match=f"^--speculative-config: .*{match}"):
        kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, speculative_config=value)


def test_lora_slots_are_vllms_allocation():
    """serving-features.md 2.2 worked example from vllm/lora/layers create_lora_weights: Llama-3.1-8B, TP1, rank
    16, bf16, one slot = 1,310,720 elements per layer x 32 layers = 80 MiB."""
    kw = dict(gpu="H100-SXM", max_model_len=8192)
    base = kvplan.plan("llama-3.1-8b", **kw)
    one = kvplan.plan("llama-3.1-8b", enable_lora=True, **kw)
    assert one.per_gpu.weights_bytes - base.per_gpu.weights_bytes == 80 * MIB
    four = kvplan.plan("llama-3.1-8b", enable_lora=True, max_loras=4, max_lora_rank=64, **kw)
    assert four.per_gpu.weights_bytes - base.per_gpu.weights_bytes == 4 * 4 * 80 * MIB  # 4 slots x rank 64
    assert base.kv_cache.available_bytes - four.kv_cache.available_bytes == 16 * 80 * MIB
    assert "--enable-lora --max-loras 4 --max-lora-rank 64" in four.launch_command
    with pytest.raises(KvplanError, match="^--max-lora-rank: vLLM allows"):
        kvplan.plan("llama-3.1-8b", enable_lora=True, max_lora_rank=12, **kw)
    with pytest.raises(KvplanError, match="^--max-loras: only with --enable-lora"):
        kvplan.plan("llama-3.1-8b", max_loras=2, **kw)


def _shared_requests(blocks: int, per_request: int, shared: int) -> int:
    """Block sharing simulated: admit requests while the pool holds the shared blocks once and each request's own."""
    n, used = 0, shared
    while used + (per_request - shared) <= blocks:
        used += per_request - shared
        n += 1
    return n


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "tgi"])
def test_shared_prefix_raises_concurrency_as_block_sharing_does(engine):
    kw = dict(gpu="H100-SXM", max_model_len=8192, engine=engine)
    base = kvplan.plan("llama-3.1-8b", **kw)
    r = kvplan.plan("llama-3.1-8b", shared_prefix_len=4000, **kw)
    block, blocks, per_req = r.kv_cache.block_size, r.kv_cache.num_blocks, r.kv_cache.blocks_per_request
    shared = 4000 // block  # only full blocks are shared
    assert int(r.max_concurrency) == _shared_requests(blocks, per_req, shared)
    assert r.max_concurrency > 1.9 * base.max_concurrency and r.inputs.shared_prefix_len == 4000


def test_a_prefix_hit_covers_at_most_l_minus_1_tokens():
    assert shared_blocks(10_000, 8192, 16) == 8191 // 16 == 511
    assert concurrency_with_prefix(1000, 512, 511) == 489.0  # each request keeps its last block
    assert concurrency_with_prefix(100, 512, 0) == 100 / 512


def test_cli_takes_the_engines_flags(cli):
    code, out, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "131072",
                         "--kv-cache-memory", "51.63GiB", "--speculative-config", json.dumps(EAGLE), "--json")
    assert code == 0, err
    assert json.loads(out)["kv_cache"]["tokens"] == 410_128
    code, out, err = cli("plan", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
                         "--engine", "sglang", "--enable-lora")
    assert code == 2 and "--enable-lora" in err


# ---- speculative decoding in the latency bounds (--acceptance-rate) -----------------------------------------------

def test_expected_tokens_per_step_is_leviathan_eq_1():
    """Leviathan, Kalman & Matias 2023, eq. 1: E = (1 - a^(k+1)) / (1 - a); k + 1 at a = 1, 1 at a = 0."""
    from kvplan.cost.features import expected_tokens_per_step

    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / 0.2) == pytest.approx(3.3616)
    assert expected_tokens_per_step(1.0, 3) == 4.0 and expected_tokens_per_step(0.0, 5) == 1.0
    with pytest.raises(KvplanError, match="--acceptance-rate"):
        expected_tokens_per_step(1.5, 3)


def test_speculative_tpot_verifies_k_plus_1_for_the_price_of_a_memory_bound_step():
    """A memory-bound decode (one 8B request on an H100) verifies k+1 tokens in about the time of one step (the
    weights are read once): ngram (no draft on the GPU), k = 3, every draft accepted: TPOT = step / 4 (+ 3 K/V
    writes). A draft model as large as the target, nothing accepted: the verify plus 3 draft steps, about 4 steps
    per token. EAGLE in between; --acceptance-rate without a speculative config exits naming it."""
    from kvplan.planning.capacity import plan

    kw = dict(gpu="H100-SXM", max_model_len=8192, concurrency=1)
    base = plan("llama-3.1-8b", **kw).latency
    ngram = plan("llama-3.1-8b", speculative_config='{"method": "ngram", "num_speculative_tokens": 3}',
                 acceptance_rate=1.0, **kw).latency
    assert ngram.tokens_per_step == 4.0 and 1.0 <= ngram.tpot_ms * 4 / base.tpot_ms < 1.01
    draft = plan("llama-3.1-8b", speculative_config='{"method": "draft_model", "model": "llama-3.1-8b", '
                 '"num_speculative_tokens": 3}', acceptance_rate=0.0, **kw).latency
    assert 4.0 <= draft.tpot_ms / base.tpot_ms < 4.04
    eagle = '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}'
    e = plan("llama-3.1-8b", speculative_config=eagle, acceptance_rate=0.7, **kw).latency
    assert e.tokens_per_step == pytest.approx(1 + 0.7 + 0.49 + 0.343) and e.tpot_ms < base.tpot_ms
    assert plan("llama-3.1-8b", speculative_config=eagle, acceptance_rate=0.0, **kw).latency.tpot_ms > base.tpot_ms
    with pytest.raises(KvplanError, match="--acceptance-rate"):
        plan("llama-3.1-8b", acceptance_rate=0.5, **kw)


# ---- SGLang speculative decoding: the draft's K/V in the token pool -----------------------------------------------

def test_sglang_eagle_draft_scales_the_cell_size(cli_json, cli):
    """sgl-project/sglang pool_configurator.py DefaultPoolConfigurator: with EAGLE / STANDALONE the target's cell size
    becomes int(cell x (1 + draft_layers / num_layers)) and the draft worker inherits max_total_num_tokens. Llama-3.1-8B
    bf16: 131,072 B per token over 32 layers; one EAGLE layer makes it 135,168 B; the pool bytes are unchanged (the
    draft loads after the pool is sized)."""
    args = ("plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", "sglang")
    plain = cli_json(*args)
    eagle = cli_json(*args, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path",
                     "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "--speculative-num-steps", "3")
    assert plain["kv_cache"]["available_bytes"] == eagle["kv_cache"]["available_bytes"]
    avail = eagle["kv_cache"]["available_bytes"]
    assert plain["kv_cache"]["tokens"] == avail // 131_072
    assert eagle["kv_cache"]["tokens"] == avail // 135_168 < plain["kv_cache"]["tokens"]
    assert "eagle k=3" in eagle["inputs"]["speculative"]
    assert ("--speculative-algorithm EAGLE --speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
            ) in eagle["launch_command"] and "--speculative" not in plain["launch_command"]
    tree = cli_json(*args, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "x/EAGLE",
                    "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
                    "--speculative-num-draft-tokens", "8")
    assert tree["launch_command"].endswith("--speculative-eagle-topk 4 --speculative-num-draft-tokens 8")
    own = cli_json(*args, "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "llama-3.1-8b")
    assert own["kv_cache"]["tokens"] == avail // 262_144  # a 32-layer draft: the cell twice
    lat = cli_json(*args, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "x/EAGLE",
                   "--concurrency", "1", "--acceptance-rate", "0.5")["latency"]
    # no --speculative-num-steps: kvplan's chain of 3, which the line gives (features.SGLANG_DEFAULT_STEPS)
    assert lat["tokens_per_step"] == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    code, _, err = cli(*args, "--speculative-algorithm", "NEXTN")
    assert code == 2 and "NEXTN" in err
    code, _, err = cli(*args, "--speculative-algorithm", "MEDUSA")
    assert code == 2 and "--speculative-algorithm" in err
    code, _, err = cli(*args, "--speculative-num-steps", "3")
    assert code == 2 and "--speculative-algorithm" in err
    code, _, err = cli(*args[:-1], "vllm", "--speculative-algorithm", "EAGLE")
    assert code == 2 and "--speculative-algorithm" in err and "sglang" in err


def test_a_draft_model_kvplan_cannot_read_is_named_by_its_flag():
    for kw, flag in ((dict(speculative_config={"method": "draft_model", "model": "nosuch", "num_speculative_tokens": 3}),
                      "--speculative-config"),
                     (dict(engine="sglang", speculative_algorithm="STANDALONE",
                           speculative_draft_model_path="nosuch"), "--speculative-draft-model-path")):
        with pytest.raises(KvplanError, match="^" + flag + ".*unknown model 'nosuch'"):
            kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, **kw)


def test_nextn_and_mtp_read_the_cards_mtp_layers_alike():
    """Kimi-K2's card says num_nextn_predict_layers 0: vLLM's mtp and SGLang's NEXTN both have nothing to draft with."""
    for kw in (dict(speculative_config={"method": "mtp"}), dict(engine="sglang", speculative_algorithm="NEXTN")):
        with pytest.raises(KvplanError, match="multi-token-prediction layers"):
            kvplan.plan("kimi-k2-instruct", gpu="H200", tp=8, max_model_len=8192, **kw)


@pytest.mark.parametrize("where", ["args", "command"])
def test_from_log_reads_the_speculative_config(tmp_path, where):
    """--from-log takes --speculative-config from the log (non-default args' dict, or the launch line's JSON) as it
    takes every other flag: the logged pool of vLLM #19996 then comes out exact (410,128 tokens, 3.13x), where the
    same log without the flag gives the 32-layer 422,944."""
    from kvplan.planning.capacity.fromlog import from_log

    args = {"model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 131072}
    cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072"
    if where == "args":
        args["speculative_config"] = EAGLE
    else:
        cmd += f" --speculative-config '{json.dumps(EAGLE)}'"
    body = (f"# gpu: H100-SXM\n# model: llama-3.1-8b\n# command: {cmd}\n"
            f"INFO 06-20 10:00:00 [utils.py:326] non-default args: {args!r}\n"
            "INFO 06-20 10:00:30 [gpu_worker.py:227] Available KV cache memory: 51.63 GiB\n"
            "INFO 06-20 10:00:31 [kv_cache_utils.py:716] GPU KV cache size: 410,128 tokens\n"
            "INFO 06-20 10:00:31 [kv_cache_utils.py:720] Maximum concurrency for 131,072 tokens per request: 3.13x\n")
    log = tmp_path / "eagle.log"
    log.write_text(body)
    rows = {r.figure: r for r in from_log(str(log)).rows}
    tokens = next(r for f, r in rows.items() if "tokens" in f)
    assert tokens.pool_verdict in ("exact", "within rounding"), tokens
    bare = tmp_path / "bare.log"
    bare.write_text(body.replace(f" --speculative-config '{json.dumps(EAGLE)}'", "").replace(
        f", 'speculative_config': {EAGLE!r}", ""))
    rows = {r.figure: r for r in from_log(str(bare)).rows}
    assert next(r for f, r in rows.items() if "tokens" in f).pool_verdict == "off"


@pytest.mark.parametrize("engine, model, algo, steps", [
    # server_args.py auto_choose_speculative_params: 0.4.8 gives every architecture but DeepSeek V2/V3 (5, 4, 8)
    ("sglang==0.4.8", "llama-3.1-8b", "EAGLE", 5), ("sglang==0.4.8", "qwen3-8b", "EAGLE", 5),
    ("sglang==0.5.7", "qwen3-8b", "EAGLE3", 5),
    # 0.5.8+ (0.5.23: arg_groups/speculative_hook.py _auto_choose_speculative_params): (3, 1, 4) but for Llama/Grok
    ("sglang==0.5.8", "qwen3-8b", "EAGLE3", 3), ("sglang==0.5.23", "qwen3-8b", "EAGLE", 3),
    ("sglang==0.5.23", "llama-3.1-8b", "EAGLE", 5), ("sglang==0.5.23", "llama-3.1-8b", "STANDALONE", 3),
])
def test_sglang_speculative_default_chain_cap_48_and_the_releases_own_choice_noted(cli_json, engine, model, algo, steps):
    """Without --max-running-requests SGLang sets max_running_requests to 48 with speculative decoding (0.4.8
    server_args.py line 451 ... 0.5.23 speculative_hook.py _handle_eagle_family); kvplan assumed the pool's estimate
    (>= 2,048). Without the steps kvplan plans its chain (3 steps, top-k 1, 4 draft tokens) and the line gives all three
    (SGLang refuses steps alone: tests/test_sglang_spec_lines.py); where SGLang's own auto-choice for the release and
    architecture differs (``steps``), a note names it."""
    draft = "llama-3.1-8b" if algo == "STANDALONE" else "x/EAGLE"
    r = cli_json("plan", "-m", model, "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", engine,
                 "--speculative-algorithm", algo, "--speculative-draft-model-path", draft)
    assert r["inputs"]["speculative"].startswith(f"{algo.lower()} k=3 ")
    assert r["running_limit"] == 48
    assert ("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
            in r["launch_command"])
    auto = [n for n in r["notes"] if "would choose" in n]
    assert (auto[0].count(f"would choose {steps} steps") == 1) if steps != 3 else auto == []
    given = cli_json("plan", "-m", model, "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", engine,
                     "--speculative-algorithm", algo, "--speculative-draft-model-path", draft,
                     "--speculative-num-steps", "2", "--max-running-requests", "64")
    assert given["inputs"]["speculative"].startswith(f"{algo.lower()} k=2 ") and given["running_limit"] == 64
    assert ("--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3"
            in given["launch_command"]) and not [n for n in given["notes"] if "would choose" in n]
    tree = cli_json("plan", "-m", model, "--gpu", "H100-SXM", "--max-model-len", "8192", "--engine", engine,
                    "--speculative-algorithm", algo, "--speculative-draft-model-path", draft,
                    "--speculative-num-steps", "5", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")
    assert [n for n in tree["notes"] if "a draft tree (top-k 4, 8 draft tokens" in n and "verifying 6 tokens" in n]
