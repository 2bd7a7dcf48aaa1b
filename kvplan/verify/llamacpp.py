"""The measured proof for llama.cpp: small GGUFs with random weights, loaded by the real llama.cpp (through
llama-cpp-python, the optional extra ``kvplan[llamacpp]``), its logged buffers against kvplan's prediction.

Each case writes a GGUF with gguf-py (a tiny model of the architecture, tensors in F16/F32 with the shapes
``llama_model::load_tensors`` creates), loads it on the CPU with the case's flags, collects llama.cpp's log through
``llama_log_set`` and compares every buffer and cache line kvplan predicts (``kvplan.cost.llamacpp``) with the line
llama.cpp printed: model, KV (full and sliding), recurrent state, output buffers exact; compute buffers are kvplan's
estimate and not compared.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from kvplan.cost.llamacpp import LlamaFlags, memory
from kvplan.errors import KvplanError
from kvplan.model.gguf import load_gguf

_LINE = re.compile(r"(?P<prefix>\w+):\s+(?P<dev>\S+)\s+(?P<kind>model|KV|RS|output|LoRA) buffer size =\s+"
                   r"(?P<mib>[\d.]+) MiB")
_CACHE = re.compile(r"(?P<prefix>llama_kv_cache|llama_memory_recurrent)(?:_\w+)?: size =\s+(?P<mib>[\d.]+) MiB \(\s*"
                    r"(?P<cells>\d+) cells,\s+(?P<layers>\d+) layers")


@dataclass
class Case:
    name: str
    arch: str
    kv: dict
    tensors: list = field(default_factory=list)  # (name, ne) in F32 (1-D) or F16
    kvplan: dict = field(default_factory=dict)  # LlamaFlags: the context llama.cpp builds and kvplan predicts
    lora: list = field(default_factory=list)  # (name, ne) of an f16 LoRA adapter llama.cpp loads beside the model


class Check(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    case: str
    what: str
    predicted: str
    measured: str
    ok: bool


class LlamaVerifyResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    llama_cpp_python: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def _dense_tensors(n_layer: int, h: int, heads: int, kv: int, hd: int, ff: int, vocab: int, extra=()) -> list:
    t = [("token_embd.weight", (h, vocab)), ("output_norm.weight", (h,)), ("output.weight", (h, vocab))]
    for i in range(n_layer):
        t += [(f"blk.{i}.attn_norm.weight", (h,)), (f"blk.{i}.attn_q.weight", (h, heads * hd)),
              (f"blk.{i}.attn_k.weight", (h, kv * hd)), (f"blk.{i}.attn_v.weight", (h, kv * hd)),
              (f"blk.{i}.attn_output.weight", (heads * hd, h)), (f"blk.{i}.ffn_norm.weight", (h,))]
        t += [(f"blk.{i}.{n}", shape) for n, shape in extra]
    return t


def _ffn(n_layer: int, h: int, ff: int) -> list:
    return [(f"blk.{i}.{n}.weight", s) for i in range(n_layer)
            for n, s in (("ffn_gate", (h, ff)), ("ffn_up", (h, ff)), ("ffn_down", (ff, h)))]


def _moe(n_layer: int, h: int, ff: int, n_exp: int) -> list:
    return [(f"blk.{i}.{n}.weight", s) for i in range(n_layer)
            for n, s in (("ffn_gate_inp", (h, n_exp)), ("ffn_gate_exps", (h, ff, n_exp)),
                         ("ffn_up_exps", (h, ff, n_exp)), ("ffn_down_exps", (ff, h, n_exp)))]


def _deci_tensors(kvs: list[int], h: int, heads: int, hd: int, ff: int, vocab: int) -> list:
    """deci (Nemotron-51B/49B/253B): K/V heads per layer; a layer of 0 heads has no attention tensors (llama-model.cpp
    LLM_ARCH_DECI: n_head_kv(i) == 0 && n_head(i) == 0 skips them)."""
    t = [("token_embd.weight", (h, vocab)), ("output_norm.weight", (h,)), ("output.weight", (h, vocab))]
    for i, kv in enumerate(kvs):
        if kv:
            t += [(f"blk.{i}.attn_norm.weight", (h,)), (f"blk.{i}.attn_q.weight", (h, heads * hd)),
                  (f"blk.{i}.attn_k.weight", (h, kv * hd)), (f"blk.{i}.attn_v.weight", (h, kv * hd)),
                  (f"blk.{i}.attn_output.weight", (heads * hd, h))]
        t.append((f"blk.{i}.ffn_norm.weight", (h,)))
    return t + _ffn(len(kvs), h, ff)


def cases() -> list[Case]:
    """Seven architectures: Llama (dense GQA: f16 and q8_0 K/V, several n_ctx, 3 streams, a unified cache; MoE; a
    LoRA adapter), Qwen3 (q/k norms, q4_0 K and V over 4 streams), Mamba (recurrent), DeepSeek-2 MLA, LFM2
    (short-conv hybrid, per-layer head_count_kv, q8_0), deci (K/V heads per layer, an attention-free layer) and
    Gemma-3 (sliding window, --swa-full)."""
    h, heads, kv, hd, ff, vocab, n = 256, 8, 2, 32, 512, 512, 4
    base = {"context_length": 4096, "embedding_length": h, "block_count": n, "feed_forward_length": ff,
            "attention.head_count": heads, "attention.head_count_kv": kv, "rope.dimension_count": hd,
            "attention.layer_norm_rms_epsilon": 1e-5, "vocab_size": vocab}
    dense = _dense_tensors(n, h, heads, kv, hd, ff, vocab) + _ffn(n, h, ff)
    out = [
        Case("dense-f16", "llama", base, dense, dict(n_ctx=1000, n_parallel=1, flash_attn="off")),
        Case("dense-q8_0-fa", "llama", base, dense, dict(n_ctx=2048, n_parallel=1, type_k="q8_0", type_v="q8_0",
                                                         flash_attn="on")),
        Case("dense-np3", "llama", base, dense, dict(n_ctx=3000, n_parallel=3, flash_attn="on")),
        Case("dense-np2-unified", "llama", base, dense, dict(n_ctx=3000, n_parallel=2, kv_unified=True)),
        Case("moe", "llama", {**base, "expert_count": 4, "expert_used_count": 2},
             _dense_tensors(n, h, heads, kv, hd, ff, vocab) + _moe(n, h, ff, 4), dict(n_ctx=512, n_parallel=1)),
    ]
    g3 = {**base, "block_count": 6, "attention.key_length": hd, "attention.value_length": hd,
          "attention.sliding_window": 128, "rope.freq_base": 10000.0}
    norms = [("attn_q_norm.weight", (hd,)), ("attn_k_norm.weight", (hd,)), ("post_attention_norm.weight", (h,)),
             ("post_ffw_norm.weight", (h,))]
    gt = [t for t in _dense_tensors(6, h, heads, kv, hd, ff, vocab, norms) if t[0] != "output.weight"] + _ffn(6, h, ff)
    mamba = {"context_length": 4096, "embedding_length": h, "block_count": n, "feed_forward_length": 0,
             "attention.head_count": 0, "attention.head_count_kv": 0, "attention.layer_norm_rms_epsilon": 1e-5,
             "ssm.conv_kernel": 4, "ssm.inner_size": 2 * h, "ssm.state_size": 16, "ssm.time_step_rank": 16,
             "vocab_size": vocab}
    mt = [("token_embd.weight", (h, vocab)), ("output_norm.weight", (h,)), ("output.weight", (h, vocab))]
    for i in range(n):
        mt += [(f"blk.{i}.{nm}", sh) for nm, sh in (
            ("attn_norm.weight", (h,)), ("ssm_in.weight", (h, 4 * h)), ("ssm_conv1d.weight", (4, 2 * h)),
            ("ssm_conv1d.bias", (2 * h,)), ("ssm_x.weight", (2 * h, 16 + 32)), ("ssm_dt.weight", (16, 2 * h)),
            ("ssm_dt.bias", (2 * h,)), ("ssm_a", (16, 2 * h)), ("ssm_d", (2 * h,)), ("ssm_out.weight", (2 * h, h)))]
    out.append(Case("mamba", "mamba", mamba, mt, dict(n_ctx=512, n_parallel=2)))
    rank, rope, nope, vd = 64, 16, 32, 32
    ds = {**base, "attention.head_count_kv": 1, "attention.key_length": rank + rope, "attention.value_length": rank,
          "attention.key_length_mla": nope + rope, "attention.value_length_mla": vd, "attention.kv_lora_rank": rank,
          "attention.q_lora_rank": 64, "rope.dimension_count": rope, "leading_dense_block_count": n,
          "expert_count": 0, "expert_used_count": 0, "expert_shared_count": 0, "expert_feed_forward_length": ff}
    dt = [("token_embd.weight", (h, vocab)), ("output_norm.weight", (h,)), ("output.weight", (h, vocab))]
    for i in range(n):
        dt += [(f"blk.{i}.{nm}", sh) for nm, sh in (
            ("attn_norm.weight", (h,)), ("attn_q_a_norm.weight", (64,)), ("attn_kv_a_norm.weight", (rank,)),
            ("attn_q_a.weight", (h, 64)), ("attn_q_b.weight", (64, heads * (nope + rope))),
            ("attn_kv_a_mqa.weight", (h, rank + rope)), ("attn_k_b.weight", (nope, rank, heads)),
            ("attn_v_b.weight", (rank, vd, heads)), ("attn_output.weight", (heads * vd, h)),
            ("ffn_norm.weight", (h,)))]
    dt += _ffn(n, h, ff)
    out.append(Case("deepseek2-mla", "deepseek2", ds, dt, dict(n_ctx=1024, n_parallel=1)))
    lfm = {**base, "attention.head_count_kv": [0, kv, 0, kv], "shortconv.l_cache": 3}
    lt = [("token_embd.weight", (h, vocab)), ("token_embd_norm.weight", (h,))] + _ffn(n, h, ff)
    for i in range(n):
        lt += [(f"blk.{i}.attn_norm.weight", (h,)), (f"blk.{i}.ffn_norm.weight", (h,))]
        lt += [(f"blk.{i}.{nm}", sh) for nm, sh in (
            ("attn_q.weight", (h, heads * hd)), ("attn_k.weight", (h, kv * hd)), ("attn_v.weight", (h, kv * hd)),
            ("attn_output.weight", (heads * hd, h)), ("attn_q_norm.weight", (hd,)), ("attn_k_norm.weight", (hd,))
        ) if i % 2] + [(f"blk.{i}.{nm}", sh) for nm, sh in (
            ("shortconv.conv.weight", (3, h)), ("shortconv.in_proj.weight", (h, 3 * h)),
            ("shortconv.out_proj.weight", (h, h))) if not i % 2]
    out.append(Case("lfm2-hybrid", "lfm2", lfm, lt, dict(n_ctx=2048, n_parallel=2, type_k="q8_0", type_v="q8_0",
                                                         flash_attn="on")))
    q3 = {**base, "attention.key_length": hd, "attention.value_length": hd}  # Qwen3: q/k RMSNorm per head
    qt = _dense_tensors(n, h, heads, kv, hd, ff, vocab, norms[:2]) + _ffn(n, h, ff)
    out.append(Case("qwen3-q4_0", "qwen3", q3, qt, dict(n_ctx=2048, n_parallel=4, type_k="q4_0", type_v="q4_0",
                                                        flash_attn="on")))
    out += [Case(f"deci-{tag}", "deci", {**base, "attention.head_count": [heads if k else 0 for k in kvs],
                                          "attention.head_count_kv": kvs}, _deci_tensors(kvs, h, heads, hd, ff, vocab),
                 dict(n_ctx=1024, n_parallel=1)) for tag, kvs in (("per-layer", [4, 2, 1, 2]), ("attn-free", [4, 0, 1, 2]))]
    out.append(Case("gemma3-swa", "gemma3", g3, gt, dict(n_ctx=4096, n_parallel=1)))
    out.append(Case("gemma3-swa-full", "gemma3", g3, gt, dict(n_ctx=4096, n_parallel=2, swa_full=True)))
    r = 64  # a rank-64 adapter on attn_q, attn_v, ffn_down of every layer (convert_lora_to_gguf.py: lora_a ne0 x r,
    # lora_b r x ne1 of the base tensor ne0 x ne1)
    lora = [(f"blk.{i}.{t}.weight.lora_{ab}", (ne0, r) if ab == "a" else (r, ne1)) for i in range(n)
            for t, ne0, ne1 in (("attn_q", h, heads * hd), ("attn_v", h, kv * hd), ("ffn_down", ff, h)) for ab in "ab"]
    out.append(Case("dense-lora", "llama", base, dense, dict(n_ctx=512, n_parallel=1), lora))
    return out


def write_lora(case: Case, path: Path) -> Path:
    """The case's adapter as convert_lora_to_gguf.py writes it: general.type adapter, adapter.type lora, f16."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), case.arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", 16.0)
    rng = np.random.default_rng(1)
    for name, ne in case.lora:
        w.add_tensor(name, (rng.standard_normal(tuple(reversed(ne))) * 0.02).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_case(case: Case, path: Path) -> Path:
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), case.arch)
    w.add_string("general.name", case.name)
    for key, v in case.kv.items():
        full = f"{case.arch}.{key}"
        if isinstance(v, list):
            w.add_array(full, v)
        else:
            (w.add_float32 if isinstance(v, float) else w.add_uint32)(full, v)
    vocab = case.kv["vocab_size"]
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(vocab - 3)])
    w.add_array("tokenizer.ggml.scores", [0.0] * vocab)
    w.add_array("tokenizer.ggml.token_type", [2, 3, 3] + [1] * (vocab - 3))
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    rng = np.random.default_rng(0)
    for name, ne in case.tensors:
        dtype = np.float32 if len(ne) == 1 or "ffn_gate_inp" in name else np.float16
        w.add_tensor(name, (rng.standard_normal(tuple(reversed(ne))) * 0.02).astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}


def run_case(case: Case, path: Path) -> list[str]:
    """llama.cpp's log lines while loading ``path`` on the CPU and creating a context with the case's flags (through
    llama-cpp-python's bindings of llama.h: llama_model_load_from_file, llama_init_from_model)."""
    import ctypes

    import llama_cpp

    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def _log(level, text, user_data):  # noqa: ARG001 - llama.cpp's callback signature
        lines.append(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0
    # llama.cpp's --no-repack: on a CPU with AMX (or ARM's repacked layouts) llama.cpp would move the weights its
    # kernels repack into an extra buffer type ("AMX model buffer size", "CPU_REPACK"), beside a smaller CPU_Mapped
    # one; kvplan models the plain CPU buffer, so the run keeps every weight there, on any host alike
    # (llama_model_params.use_extra_bufts, src/llama-model.cpp make_cpu_buft_list).
    if "use_extra_bufts" in {n for n, _ in mp._fields_}:
        mp.use_extra_bufts = False
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise KvplanError(f"llama.cpp could not load the {case.name} GGUF: {''.join(lines)[-300:]}")
    adapter = None
    if case.lora:  # llama_adapter_lora_init logs its buffers per buffer type
        adapter = llama_cpp.llama_adapter_lora_init(model, str(_lora_path(path)).encode())
        if not adapter:
            raise KvplanError(f"llama.cpp could not load the {case.name} adapter: {''.join(lines)[-300:]}")
    cp = llama_cpp.llama_context_default_params()
    f = LlamaFlags(**case.kvplan)
    names = {n for n, _ in cp._fields_}
    cp.n_ctx, cp.n_seq_max, cp.n_batch, cp.n_ubatch = f.n_ctx, f.n_parallel or 1, f.n_batch, f.n_ubatch
    cp.type_k, cp.type_v = GGML_TYPES[f.type_k], GGML_TYPES[f.type_v]
    if "flash_attn_type" in names:
        cp.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[f.flash_attn]
    else:
        cp.flash_attn = f.flash_attn == "on"
    for name, value in (("swa_full", f.swa_full), ("kv_unified", bool(f.kv_unified)), ("n_threads", 1),
                        ("n_threads_batch", 1)):
        if name in names:
            setattr(cp, name, value)
    ctx = llama_cpp.llama_init_from_model(model, cp)
    if not ctx:
        raise KvplanError(f"llama.cpp refused the {case.name} context: {''.join(lines)[-300:]}")
    llama_cpp.llama_free(ctx)
    if adapter:
        llama_cpp.llama_adapter_lora_free(adapter)
    llama_cpp.llama_model_free(model)
    return "".join(lines).splitlines()


def compare(case: Case, log: list[str], path: Path) -> list[Check]:
    flags = dict(case.kvplan)
    flags.setdefault("n_gpus", 0)
    lora = ()
    if case.lora:
        from kvplan.model.gguf import load_lora

        lora = load_lora(str(_lora_path(path)))
    m = memory(load_gguf(str(path)).hparams, LlamaFlags(**flags), lora=lora)
    measured: dict[tuple[str, str], list[str]] = {}
    for ln in log:
        g = _LINE.search(ln)
        if g:
            dev = "CPU" if g["dev"] == "CPU_Mapped" else g["dev"]
            kind = {"KV": "kv", "RS": "recurrent", "LoRA": "lora"}.get(g["kind"], g["kind"])
            measured.setdefault((dev, kind), []).append(g["mib"])
    predicted: dict[tuple[str, str], list[str]] = {}
    for b in m.buffers:
        if b.kind != "compute":  # measured by llama.cpp, estimated by kvplan: not compared
            predicted.setdefault((b.device, b.kind), []).append(f"{b.bytes / 2**20:.2f}")
    checks = []
    for (dev, kind), want in predicted.items():
        got = measured.get((dev, kind), [])
        checks.append(Check(case=case.name, what=f"{dev} {kind} buffer(s)", predicted=" + ".join(sorted(want)),
                            measured=" + ".join(sorted(got)) or "-", ok=sorted(got) == sorted(want)))
    caches = [(g["mib"], g["cells"], g["layers"]) for g in map(_CACHE.search, log) if g]
    for c, got in zip(m.caches, caches + [None] * len(m.caches)):
        want = (f"{c.bytes / 2**20:.2f}", str(c.cells), str(c.layers))
        checks.append(Check(case=case.name, what=f"{c.kind} cache (MiB, cells, layers)", predicted=" ".join(want),
                            measured=" ".join(got) if got else "-", ok=got == want))
    return checks


def _lora_path(path: Path) -> Path:
    return path.with_name(path.stem + "-lora.gguf")


def verify_llamacpp(names: list[str] | None = None) -> LlamaVerifyResult:
    try:
        import llama_cpp
    except ImportError as e:
        raise KvplanError("--engine llamacpp: verify needs llama-cpp-python: pip install 'kvplan[llamacpp]'") from e
    chosen = [c for c in cases() if names is None or c.name in names]
    checks: list[Check] = []
    with tempfile.TemporaryDirectory() as d:
        for case in chosen:
            path = write_case(case, Path(d) / f"{case.name}.gguf")
            if case.lora:
                write_lora(case, _lora_path(path))
            load_gguf.cache_clear()
            checks += compare(case, run_case(case, path), path)
    return LlamaVerifyResult(llama_cpp_python=getattr(llama_cpp, "__version__", "?"), checks=checks)
