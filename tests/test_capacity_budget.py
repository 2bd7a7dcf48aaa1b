"""Capacity from launch flags (issue 20): the GPU total torch sees, engine versions, the profile-run peak, weights as
the engine loads them, and public start-up logs reproduced from their flags alone."""

from __future__ import annotations

import pytest

from kvplan.cost.hardware import load_gpu, load_gpus
from kvplan.planning.capacity import plan

GIB, MIB = 2**30, 2**20


def test_a_default_h100_plan_starts_from_what_torch_sees():
    # vLLM logs "total_gpu_memory (79.19GiB)" on an H100 80GB; the datasheet's 80e9 B is 74.5 GiB
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192)
    assert r.inputs.gpu_memory_bytes == 85_030_322_176
    assert f"{r.inputs.gpu_memory_bytes / GIB:.2f}" == "79.19"
    assert r.per_gpu.requested_bytes == -(-85_030_322_176 * 92 // 100)  # ceil(total x 0.92)
    assert any("torch sees" in n for n in r.notes)


def test_gpu_memory_still_overrides_the_visible_total():
    r = plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, gpu_memory="80GB")
    assert r.inputs.gpu_memory_bytes == 80_000_000_000


def test_a_gpu_without_a_visible_total_plans_from_the_datasheet_and_says_so():
    gpu = load_gpu("A100-80GB")
    assert gpu.visible_memory_bytes is None and gpu.engine_memory_bytes == gpu.memory_bytes
    r = plan("llama-3.1-8b", gpu="A100-80GB", max_model_len=8192)
    assert r.inputs.gpu_memory_bytes == 80_000_000_000
    assert any("no visible total" in n for n in r.notes)


@pytest.mark.parametrize("name", sorted(load_gpus()))
def test_every_visible_total_has_a_source_and_sits_between_datasheet_and_nvidia_smi(name):
    gpu = load_gpu(name)
    if gpu.visible_memory_bytes is None:
        return
    assert gpu.visible_memory_source
    # the HBM/GDDR stacks come in GiB: what torch sees is below the binary capacity, above 90% of it
    assert 0.9 * gpu.memory_bytes < gpu.visible_memory_bytes
    if gpu.nvidia_smi_memory_mib is not None:
        assert gpu.visible_memory_bytes <= gpu.nvidia_smi_memory_mib * MIB


def test_gpus_list_shows_the_visible_total(cli):
    code, out, _ = cli("gpus", "list")
    assert code == 0 and "79.2 GiB" in out and "visible" in out
