"""vLLM's "Model loading took" figure counts the caching allocator's blocks (kvplan.cost.allocator rounding_bytes;
the allocator model itself: tests/test_caching_allocator.py), pinned to public logs printed to 4 decimals."""

from pathlib import Path

import pytest

from kvplan.planning.capacity import plan

MIB, GIB = 2**20, 2**30
LOGS = Path(__file__).resolve().parents[1] / "docs" / "logs"


@pytest.mark.parametrize(("file", "logged", "kw", "tensors"), [
    # "Loading model weights took 0.9276 GB" (vLLM 0.6.6.post1, fp16 on a T4); the parameters as transformers counts
    # them (tests/test_params: count_params) and the rotary cache of max_position_embeddings x head_dim x 2 B
    ("vllm-code69421856836-qwen2.5-0.5b-t4.log", "0.9276", dict(engine="vllm==0.6.6", weight_dtype="fp16"),
     494_032_768 * 2 + 32768 * 64 * 2),
    ("vllm-code55594152188-qwen2.5-1.5b-t4.log", "2.8875", dict(engine="vllm==0.7.2", weight_dtype="fp16"),
     1_543_714_304 * 2 + 32768 * 128 * 2),
])
def test_model_loading_took_counts_the_allocator_blocks(file, logged, kw, tensors):
    """Qwen2.5-0.5B: 494,032,768 parameters x 2 B + the 32,768 x 64 x 2 B rotary cache = 0.92413 GiB; vLLM prints
    0.9276: the blocks whose rest stayed unsplit (the 259.66 MiB embedding takes its 260 MiB segment whole, the rotary
    cache its 4.5 MiB block, gate/up and down rests of later layers) hold 3.6 MiB more."""
    assert f"took {logged} G" in (LOGS / file).read_text(encoding="utf-8")
    model = "tests/data/configs/" + ("qwen2.5-0.5b" if "0.5b" in file else "qwen2.5-1.5b-instruct")
    r = plan(model, gpu="T4", kv_cache_memory="1GiB", kv_cache_memory_what_if=True, max_model_len=4096, **kw)
    assert f"{r.per_gpu.weights_bytes / GIB:.4f}" == logged
    assert f"{tensors / GIB:.4f}" != logged  # the tensors alone fall short
    assert 3 * MIB < r.per_gpu.weights_bytes - tensors < 5 * MIB


def test_tensors_that_fill_their_blocks_leave_nothing():
    """Llama-3.1-8B's weights are whole multiples of 2 MiB (4,096 x 128,256 x 2 B = 1,002 MiB, ...): no rest, the
    "14.9888 GB" of the vLLM 0.6.4 logs is the parameters and the rotary cache alone; Qwen2.5-7B's 259 MiB gate/up
    rows keep their 260 MiB segments."""
    from kvplan.model.hf.config import card_from_hf_config

    llama = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192).per_gpu
    qwen = plan(card_from_hf_config("tests/data/configs/qwen2.5-7b-instruct.json"), gpu="H100-SXM", max_model_len=8192).per_gpu
    assert llama.weights_rounding_bytes == 0
    assert qwen.weights_rounding_bytes > 28 * MIB  # one 1 MiB rest per layer at least (28 layers)
    moe = plan("qwen3-30b-a3b", gpu="H100-SXM", max_model_len=8192).per_gpu
    assert moe.weights_rounding_bytes < 4 * MIB  # fused experts fill theirs
