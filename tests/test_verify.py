"""kvplan verify: every bundled card, shrunk, matches kvplan exactly on weights and KV bytes (and FLOPs where
kvplan.cost.flops models it), across the engines the reference caches implement, in fp32 and bf16."""

import json

import pytest

from kvplan.errors import KvplanError
from kvplan.model.catalog import bundled_names, load_card
from helpers import tiered
from kvplan.verify.reference.shrink import REFERENCE_SSM_KINDS

pytest.importorskip("torch")

from kvplan.verify.run import verify  # noqa: E402


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("engine", ["ideal", "hf-static", "vllm"])
@pytest.mark.parametrize("name", tiered(bundled_names()))
def test_every_card_verifies(name, engine, dtype):
    ssm = load_card(name).ssm
    run = dict(batch=2, seq_len=10, engine=engine, kv_dtype=dtype, layers=2, scale=1 / 64, decode_steps=3,
               block_size=4)
    if ssm is not None and ssm.kind not in REFERENCE_SSM_KINDS:  # Gated DeltaNet: not in the reference model
        with pytest.raises(KvplanError, match=f"ssm.kind: verify's reference model implements mamba and mamba2 "
                                              f"state mixers; {name}'s are {ssm.kind}"):
            verify(name, **run)
        return
    if engine == "vllm" and load_card(name).architecture == "encoder-decoder":  # vLLM loads no T5: refused
        with pytest.raises(KvplanError, match="^--engine: vLLM cannot load "):
            verify(name, **run)
        return
    r = verify(name, **run)
    checks = {c.name: c for c in r.checks}
    assert checks["weights_bytes"].ok and checks["weights_bytes"].tolerance == 0
    assert checks["kv_cache_bytes"].ok and checks["kv_cache_bytes"].tolerance == 0
    assert r.ok, [c for c in r.checks if c.ok is False]
    for key in ("peak_prefill_bytes", "peak_decode_bytes") if r.decode_steps else ("peak_prefill_bytes",):
        # state cards: the peaks are measured and shown, not predicted (no activation term for a state mixer)
        assert checks[key].ok if ssm is None else (checks[key].ok is None and "state-space" in checks[key].note)


def test_pinned_llama_2_7b():
    # shrunk llama-2-7b: 2 layers, hidden 256, 32 heads x 8, ffn 688, vocab 2000; fp16
    r = verify("llama-2-7b", layers=2, scale=0.0625, seq_len=32)
    checks = {c.name: c for c in r.checks}
    params = 2 * 256 * 2000 + 2 * (4 * 256 * 256 + 3 * 256 * 688 + 2 * 256) + 256
    assert r.params == params == 2_606_336
    assert checks["weights_bytes"].measured == 2 * params
    # KV: 2 layers x 32 tokens x 2 (K, V) x 32 heads x 8 x 2 B
    assert checks["kv_cache_bytes"].measured == 2 * 32 * 2 * 32 * 8 * 2 == 65_536
    assert r.shrunk[:2] == ["num_layers: 32 -> 2", "hidden_size: 4096 -> 256"]


def test_vllm_sliding_frees_blocks():
    # mistral shrunk: window 5 (seq_len 10 // 2); block 2; 10 tokens: cdiv(10, 2) - (10 - 5) // 2 = 3 blocks per
    # layer and sequence, each 2 tokens x 2 (K, V) x 8 heads x 4 x 4 B (fp32)
    r = verify("mistral-7b-v0.1", layers=2, scale=1 / 32, seq_len=10, engine="vllm", kv_dtype="fp32", block_size=2)
    kv = next(c for c in r.checks if c.name == "kv_cache_bytes")
    assert kv.measured == 2 * 3 * (2 * 2 * 8 * 4 * 4) and kv.ok


def test_cli_json_and_exit_codes(cli, monkeypatch):
    code, out, _ = cli("verify", "--model", "qwen3-8b", "--layers", "2", "--scale", "0.03", "--seq-len", "8",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True
    assert [c["name"] for c in data["checks"]] == ["params", "weights_bytes", "kv_cache_bytes", "peak_prefill_bytes",
                                                   "peak_decode_bytes", "prefill_flops", "decode_step_flops"]
    code, out, _ = cli("verify", "--model", "qwen3-8b", "--layers", "2", "--scale", "0.03", "--seq-len", "8")
    assert code == 0 and "kv_cache_bytes" in out and "pass" in out
    # a wrong prediction makes the command fail with exit 1
    import kvplan.verify.run as v
    from dataclasses import replace

    real = v.activation_peaks
    monkeypatch.setattr(v, "activation_peaks", lambda *a, **k: replace(real(*a, **k), peak_prefill_bytes=1))
    code, out, _ = cli("verify", "--model", "qwen3-8b", "--layers", "2", "--scale", "0.03", "--seq-len", "8")
    assert code == 1 and "FAIL" in out


@pytest.mark.parametrize("args, needle", [
    (("--engine", "hf-dynamic"), "--engine"),
    (("--kv-dtype", "int8"), "--kv-dtype"),
    (("--scale", "2"), "--scale"),
    (("--decode-steps", "8"), "--decode-steps"),
    (("--device", "tpu"), "--device"),
])
def test_cli_bad_input(cli, args, needle):
    code, out, err = cli("verify", "--model", "llama-2-7b", "--layers", "2", "--scale", "0.03", "--seq-len", "8",
                         *args)
    assert code == 2 and err.strip().startswith("error: ") and needle in err and "Traceback" not in out + err


@pytest.mark.parametrize("timeout", ["inf", "nan", "0", "-1", "1e9"])
def test_a_sharded_verify_refuses_a_deadline_that_is_no_finite_time(cli, timeout):
    """One line naming --timeout before any rank starts (inf once reached the ranks as an OverflowError)."""
    code, out, err = cli("verify", "--model", "llama-2-7b", "--layers", "2", "--scale", "0.0625", "--tp", "2",
                         "--timeout", timeout)
    assert code == 2, (out, err)
    assert err.startswith("error: --timeout: ") and "allowed: 0 < seconds <= 604800" in err
    assert len(err.splitlines()) == 1


def test_a_verify_error_in_a_pipe_is_one_line_without_a_blank_one(cli):
    code, _, err = cli("verify", "--model", "llama-2-7b", "--layers", "40", "--scale", "1", "--tp", "2")
    assert code == 2 and err.startswith("error: --layers/--scale: ") and len(err.splitlines()) == 1
