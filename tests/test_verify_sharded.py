"""kvplan verify --tp/--pp: the sharded reference model on gloo (CPU), rank by rank against kvplan.cost.parallel.

Every case runs real processes (one per rank) on tiny shrunk cards; each asserts the per-rank checks (exact weights,
KV, FLOPs and collective bytes; peaks within tolerance; logits equal to the unsharded model's) and something the
sharding must change (so a run that silently did not shard fails)."""

import json
import multiprocessing
import os
import time

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # real processes per rank: the slow tier (python -m pytest --tier all)

from kvplan.errors import KvplanError  # noqa: E402
from kvplan.model.catalog import load_card  # noqa: E402
from kvplan.verify import distributed as D  # noqa: E402
from kvplan.verify.run import verify as verify_single  # noqa: E402
from kvplan.cost.runtimes import get_engine  # noqa: E402

SMALL = dict(batch=2, seq_len=10, decode_steps=3, block_size=4, kv_dtype="fp32")


def _checks(rank):
    return {c.name: c for c in rank.checks}


def _assert_all_exact(r, tp, pp):
    assert [(k.tp_rank, k.pp_rank) for k in r.ranks] == [(t, p) for p in range(pp) for t in range(tp)]
    for rank in r.ranks:
        c = _checks(rank)
        for name in ("params", "weights_bytes", "kv_cache_bytes", "prefill_flops", "decode_step_flops"):
            assert c[name].tolerance == 0 and c[name].ok, (rank.rank, c[name])
        assert c["peak_prefill_bytes"].ok and c["peak_decode_bytes"].ok
        comm = [n for n in c if n.startswith("comm_")]
        if tp > 1:
            assert "comm_prefill_all_reduce_bytes" in comm and "comm_decode_all_reduce_bytes" in comm
        if pp > 1:
            assert any(n.endswith(("send_bytes", "recv_bytes")) for n in comm)
        assert all(c[n].ok and c[n].measured > 0 for n in comm)
        if rank.pp_rank == pp - 1:
            assert c["logits_max_abs_error"].ok and c["logits_max_abs_error"].measured <= 1e-4
        else:
            assert "logits_max_abs_error" not in c
    assert r.ok


def test_tp2_llama_shards_every_matrix():
    r = D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, **SMALL)
    _assert_all_exact(r, 2, 1)
    # independent arithmetic: llama-2-7b / 32 = hidden 128, 32 heads x 4, ffn 344, vocab 1000 -> padded 1024
    h, ffn, vp = 128, 344, 1024
    layer = 4 * h * h // 2 + 3 * h * ffn // 2 + 2 * h
    assert r.ranks[0].params == vp // 2 * h * 2 + 2 * layer + h
    single = verify_single("llama-2-7b", layers=2, scale=1 / 32, **SMALL)
    kv1 = next(c.measured for c in single.checks if c.name == "kv_cache_bytes")
    assert all(_checks(k)["kv_cache_bytes"].measured * 2 == kv1 for k in r.ranks)  # 32 KV heads: half per rank


def test_tp_beyond_kv_heads_replicates_them_moe():
    # qwen3-30b-a3b (MoE, qk_norm), 32 query and 4 KV heads, at tp 8 (the example): each KV head is kept by
    # the 2 ranks whose 4 query heads use it (rank r holds KV head r // 2; a wrong pick breaks the logits check)
    r = D.verify_sharded("qwen3-30b-a3b", tp=8, layers=2, scale=1 / 16, **SMALL)
    _assert_all_exact(r, 8, 1)
    single = verify_single("qwen3-30b-a3b", layers=2, scale=1 / 16, **SMALL)
    kv1 = next(c.measured for c in single.checks if c.name == "kv_cache_bytes")
    assert all(_checks(k)["kv_cache_bytes"].measured * 4 == kv1 for k in r.ranks)  # 1 of 4 heads, not 1/8


def test_tp2_mla_moe_deepseek():
    r = D.verify_sharded("deepseek-v2-lite", tp=2, layers=2, scale=1 / 16, engine="vllm", **SMALL)
    _assert_all_exact(r, 2, 1)
    single = verify_single("deepseek-v2-lite", layers=2, scale=1 / 16, engine="vllm", **SMALL)
    kv1 = next(c.measured for c in single.checks if c.name == "kv_cache_bytes")
    assert all(_checks(k)["kv_cache_bytes"].measured == kv1 for k in r.ranks)  # the latent is not split


def test_tp_x_pp_gpt2_tied_biases_learned_positions():
    # gpt2: tied head (the last stage holds its own embedding shard), row-parallel biases, learned positions
    r = D.verify_sharded("gpt2", tp=2, pp=2, layers=2, scale=1 / 16, **SMALL)
    _assert_all_exact(r, 2, 2)
    first, last = _checks(r.ranks[0]), _checks(r.ranks[2])
    assert first["comm_prefill_send_bytes"].measured == last["comm_prefill_recv_bytes"].measured == 2 * 7 * 48 * 4


def test_pp_remainder_sliding_window():
    # 5 layers over 2 stages: vLLM get_pp_indices gives [0, 3) and [3, 5); mistral slides (window 5 of 10 tokens)
    r = D.verify_sharded("mistral-7b-v0.1", pp=2, layers=5, scale=1 / 32, engine="vllm", **SMALL)
    _assert_all_exact(r, 1, 2)
    assert [k.layers for k in r.ranks] == [[0, 3], [3, 5]]
    kv = [_checks(k)["kv_cache_bytes"].measured for k in r.ranks]
    assert kv[0] * 2 == kv[1] * 3  # bytes follow the layers held


def test_tp2_gpt_oss_splits_the_sinks_by_head():
    # gpt-oss: one learned sink logit per query head; each rank keeps its heads' sinks (a rank holding all of them
    # crashed in attend: shape '[1, 4, 8, 1, 1]' is invalid for input of size 64)
    for engine in ("ideal", "vllm"):
        r = D.verify_sharded("gpt-oss-20b", tp=2, layers=2, scale=1 / 32, engine=engine, **SMALL)
        _assert_all_exact(r, 2, 1)
    single = verify_single("gpt-oss-20b", layers=2, scale=1 / 32, engine="vllm", **SMALL)
    p1 = next(c.measured for c in single.checks if c.name == "params")
    assert r.ranks[0].params < p1


@pytest.mark.parametrize("tp, pp", [(2, 1), (1, 2), (2, 2)])
def test_sharded_llama4_caches_chunked_layers_as_unsharded(tp, pp):
    # llama-4's chunked local-attention layers hold only the current chunk (ideal); the ranks kept every token
    r = D.verify_sharded("llama-4-scout-17b-16e", tp=tp, pp=pp, layers=2, scale=1 / 16, **SMALL)
    _assert_all_exact(r, tp, pp)
    single = verify_single("llama-4-scout-17b-16e", layers=2, scale=1 / 16, **SMALL)
    kv1 = next(c.measured for c in single.checks if c.name == "kv_cache_bytes")
    per_stage = [sum(_checks(k)["kv_cache_bytes"].measured for k in r.ranks if k.pp_rank == s) for s in range(pp)]
    assert sum(per_stage) == kv1  # the KV heads split over TP, the layers over PP: the whole is the unsharded cache


def test_wrong_prediction_fails_the_rank(monkeypatch):
    real = D.rank_weights

    def off_by_one(*a, **k):
        w = real(*a, **k)
        return type(w)(w.tp_rank, w.pp_rank, w.layers, w.params, w.bytes + (w.tp_rank == 1), w.buffers_bytes,
                       w.breakdown)

    monkeypatch.setattr(D, "rank_weights", off_by_one)
    r = D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, seq_len=6)
    assert [k.ok for k in r.ranks] == [True, False] and not r.ok
    assert not _checks(r.ranks[1])["weights_bytes"].ok


def test_cli_json_ranks(cli):
    code, out, _ = cli("verify", "--model", "gemma-2-9b", "--layers", "2", "--scale", "0.03", "--seq-len", "8",
                       "--tp", "2", "--engine", "vllm", "--block-size", "2", "--kv-dtype", "fp32", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["tp"] == 2 and data["pp"] == 1
    assert [(k["tp_rank"], k["pp_rank"]) for k in data["ranks"]] == [(0, 0), (1, 0)]
    names = [c["name"] for c in data["ranks"][0]["checks"]]
    assert names[:7] == ["params", "weights_bytes", "kv_cache_bytes", "peak_prefill_bytes", "peak_decode_bytes",
                         "prefill_flops", "decode_step_flops"]
    assert "logits_max_abs_error" in names and all(c["ok"] for k in data["ranks"] for c in k["checks"])


@pytest.mark.parametrize("args, needle", [
    (("--model", "llama-2-7b", "--tp", "3"), "--tp"),  # 32 heads
    (("--model", "llama-2-7b", "--pp", "3"), "--pp"),  # 2 layers after --layers 2
    (("--model", "bert-base-uncased", "--tp", "2"), "--tp"),  # encoder-only
    (("--model", "llama-2-7b", "--tp", "0"), "--tp"),
    (("--model", "llama-2-7b", "--tp", "2", "--timeout", "0"), "--timeout"),
])
def test_cli_bad_layout(cli, args, needle):
    code, out, err = cli("verify", *args, "--layers", "2", "--scale", "0.03", "--seq-len", "8")
    assert code == 2 and err.strip().startswith("error: ") and needle in err and "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1


def test_all_heads_qk_norm_refuses_tp(cli):
    # OLMo-2's q/k norms span all heads: vLLM all-gathers q and k for them, which the sharded reference does not do
    code, out, err = cli("verify", "--model", "olmo-2-13b", "--tp", "2", "--layers", "2", "--scale", "0.015625",
                         "--seq-len", "8")
    assert code == 2 and "--tp: olmo-2-13b-shrunk's q/k norms span all heads" in err and "Traceback" not in out + err


def test_dead_rank_is_named_and_nothing_outlives_the_run(monkeypatch):
    monkeypatch.setenv("KVPLAN_TEST_RANK_FAULT", "1:die")
    t0 = time.monotonic()
    with pytest.raises(D.RankFailure, match=r"^rank 1 \(tp_rank 1, pp_rank 0\) failed with exit code 7"):
        D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, seq_len=6, timeout=60)
    assert time.monotonic() - t0 < 60
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("kvplan-rank")]


def test_rank_crash_is_an_internal_error_with_the_rank_traceback(monkeypatch, cli):
    # an unexpected exception inside a rank is a bug: exit 3 and one line; --debug shows the rank's own traceback
    monkeypatch.setenv("KVPLAN_TEST_RANK_FAULT", "1:raise")
    with pytest.raises(D.RankCrash, match=r"^rank 1 \(tp_rank 1, pp_rank 0\) failed with exit code 1: RuntimeError: "
                                          r"test fault") as info:
        D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, seq_len=6, timeout=60)
    assert not isinstance(info.value, KvplanError) and "in _fault" in str(info.value.__cause__)
    args = ("verify", "--model", "llama-2-7b", "--layers", "2", "--scale", "0.03", "--seq-len", "6", "--tp", "2")
    code, out, err = cli(*args)
    assert code == 3 and err.strip().startswith("internal error: RankCrash: rank 1") and "Traceback" not in out + err
    code, out, err = cli("--debug", *args)
    assert code == 3 and "rank 1's traceback:" in err and 'in _fault\n    raise RuntimeError("test fault' in err
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("kvplan-rank")]


class _Stuck:
    """A process that never ends (what _wait sees of a hung rank)."""

    exitcode = None


def test_hung_rank_is_named_by_its_progress(tmp_path):
    # rank 1 never got past 'started'; rank 0 is blocked in a collective waiting for it
    (tmp_path / "rank0.phase").write_text("prefill")
    (tmp_path / "rank1.phase").write_text("started")
    with pytest.raises(D.RankFailure, match=r"^rank 1 \(tp_rank 1, pp_rank 0\) did not finish within 0.2 s "
                                            r"\(hung at 'started'"):
        D._wait([_Stuck(), _Stuck()], tmp_path, 2, 0.2)
    with pytest.raises(KvplanError):  # RankFailure is one line, exit 2 in the CLI
        D._wait([_Stuck()], tmp_path, 1, 0.0)


@pytest.mark.parametrize("name", ["llama-2-7b", "deepseek-v2-lite", "gemma-2-9b", "qwen3-30b-a3b", "gpt2"])
def test_rank_flops_add_up_to_the_single_device_model(name):
    # one TP rank over all stages = kvplan.cost.flops' single-device count, except the LM head over the padded rows
    from kvplan.cost import flops
    from kvplan.cost.parallel import Layout, pad_vocab
    from kvplan.verify.rank_predict import rank_flops
    from kvplan.verify.reference.shrink import shrink

    card, _ = shrink(load_card(name), layers=4, scale=1 / 16, seq_len=12)
    pad = 2 * 2 * card.hidden_size * (pad_vocab(card.vocab_size) - card.vocab_size)
    for engine in ("ideal", "vllm"):
        kw = dict(batch=2, prompt_len=9, seq_len=12, engine=engine)
        stages = sum(rank_flops(card, Layout(1, 2), s, phase="prefill", **kw) for s in range(2))
        assert stages == flops.prefill_flops(card, batch=2, prompt_len=9, engine=get_engine(engine)).total + pad
        dec = sum(rank_flops(card, Layout(1, 2), s, phase="decode", **kw) for s in range(2))
        assert dec == flops.decode_step_flops(card, batch=2, cache_len=11, engine=get_engine(engine)).total + pad


def test_rank_kv_allocations_sum_to_rank_kv_bytes():
    from kvplan.cost.parallel import Layout
    from kvplan.model.dtypes import parse_dtype
    from kvplan.verify.rank_predict import rank_kv_bytes, rank_kv_tensor_bytes
    from kvplan.verify.reference.shrink import shrink

    card, _ = shrink(load_card("gemma-2-9b"), layers=2, scale=1 / 16, seq_len=12)
    for engine in ("ideal", "vllm"):
        kw = dict(batch=2, seq_len=12, block_size=4)
        sizes = rank_kv_tensor_bytes(card, parse_dtype("bf16"), engine, Layout(2, 2), 1, **kw)
        assert sizes and sum(sizes) == rank_kv_bytes(card, parse_dtype("bf16"), engine, Layout(2, 2), 1, **kw)


def test_missing_backend_and_too_big_runs_are_refused(monkeypatch):
    import torch.distributed as dist

    import kvplan.verify.limits as limits

    with monkeypatch.context() as m:
        m.setattr(dist, "is_gloo_available", lambda: False)
        with pytest.raises(KvplanError, match="no gloo backend"):
            D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, seq_len=6)
    monkeypatch.setattr(limits, "available_memory_bytes", lambda device: 4 << 20)  # 4 MiB: 2 ranks need more
    with pytest.raises(KvplanError, match="--layers/--scale"):
        D.verify_sharded("llama-2-7b", tp=2, layers=2, scale=1 / 32, seq_len=6)


def test_unguarded_caller_script_and_no_torch_at_import(tmp_path):
    # multiprocessing re-runs an unguarded main script in each child unless verify hides it
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text("import sys\nfrom kvplan.verify.distributed import verify_sharded\n"
                      "print('torch' in sys.modules)\n"
                      "r = verify_sharded('llama-2-7b', pp=2, layers=2, scale=1 / 32, seq_len=6)\nprint(r.ok)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def _session(sid: int) -> list[str]:
    """Live processes of session ``sid`` (zombies aside: their parent has gone, the system's init reaps them)."""
    import subprocess

    rows = subprocess.run(["ps", "-ww", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True).stdout.splitlines()
    return [r for r in rows if r.split()[1] == str(sid) and not r.split()[2].startswith("Z")]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("when", ["forkserver starting", "ranks started", "ranks running"])
def test_a_signal_while_ranks_start_stops_every_rank_quietly(tmp_path, sig, when):
    """Ctrl-C (to the whole process group, as a terminal sends it) or SIGTERM at three points of a sharded run's
    start: exit 130 / 143, no traceback from any process, no rank left running, no run folder left."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "kvplan", "verify", "-m", "llama-2-7b", "--tp", "2", "--layers", "2", "--scale",
         "0.0625"], env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.getcwd()}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ready = {"forkserver starting": lambda: any("forkserver" in r for r in _session(proc.pid)),
             "ranks started": lambda: any(tmp_path.glob("kvplan-verify-*/rank*.log")),
             "ranks running": lambda: any(p.read_text().strip() not in ("", "started")
                                          for p in tmp_path.glob("kvplan-verify-*/rank*.phase"))}[when]
    deadline = time.monotonic() + 120
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, f"the run ended before {when!r}"
    if when == "forkserver starting":
        # the forkserver exists as soon as ensure_running returns, and the parent ignores SIGINT until then
        # (_start_forkserver_deaf: a Ctrl-C in those few milliseconds is lost, which a test under load can hit);
        # 0.2 s later the forkserver is still importing torch (seconds), the point this case is about
        time.sleep(0.2)
    os.killpg(proc.pid, getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[sig], err
    assert "Traceback" not in err and "Error" not in err, err
    deadline = time.monotonic() + 30  # a forkserver mid-import notices its parent's exit when the import ends
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session(proc.pid) == [] and list(tmp_path.glob("kvplan-*")) == []  # (torch keeps its compile cache there)
