"""Hugging Face Hub ids wherever a card name works, against a local stand-in for the Hub (tests/hub_stub.py).

huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE when it is imported; in this process the
``hub`` fixture points its constants at the stand-in and at tmp_path, and the subprocess tests set the real
environment variables, as a user does. Nothing here reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import one_line_error
from hub_stub import FakeHub, safetensors_bytes, serve, sharded, tensor_bytes

hf = pytest.importorskip("huggingface_hub")
import huggingface_hub.constants as hf_constants  # noqa: E402

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "hidden_act": "silu",
          "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def llama_tensors(cfg: dict = CONFIG, dtype: str = "BF16", lm_head: bool = True) -> dict:
    """The tensors of transformers' LlamaForCausalLM for ``cfg``, by name and shape (modeling_llama.py)."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = {"model.embed_tokens.weight": (dtype, [v, h])}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out |= {p + "self_attn.q_proj.weight": (dtype, [q, h]), p + "self_attn.k_proj.weight": (dtype, [kv, h]),
                p + "self_attn.v_proj.weight": (dtype, [kv, h]), p + "self_attn.o_proj.weight": (dtype, [h, q]),
                p + "mlp.gate_proj.weight": (dtype, [i, h]), p + "mlp.up_proj.weight": (dtype, [i, h]),
                p + "mlp.down_proj.weight": (dtype, [h, i]), p + "input_layernorm.weight": (dtype, [h]),
                p + "post_attention_layernorm.weight": (dtype, [h])}
    out["model.norm.weight"] = (dtype, [h])
    if lm_head:
        out["lm_head.weight"] = (dtype, [v, h])
    return out


def repo_files(cfg: dict = CONFIG, tensors: dict | None = None, shards: int = 2) -> dict[str, bytes]:
    tensors = llama_tensors(cfg) if tensors is None else tensors
    weights = sharded(tensors, shards) if shards > 1 else {"model.safetensors": safetensors_bytes(tensors)}
    return {"config.json": json.dumps(cfg).encode(), **weights}


def _forget() -> None:
    """Drop what this process remembers of Hub reads (the memo of hub.py, the checkpoints of catalog.py)."""
    from kvplan.model import catalog
    from kvplan.model.hf import hub

    hub._load.cache_clear()
    catalog._CHECKPOINTS.clear()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A FakeHub served on localhost, huggingface_hub pointed at it, its caches in tmp_path."""
    fake = FakeHub()
    server, _ = serve(fake)
    for name, value in (("ENDPOINT", fake.url), ("HUGGINGFACE_CO_URL_TEMPLATE",
                                                 fake.url + "/{repo_id}/resolve/{revision}/{filename}"),
                        ("HF_HUB_CACHE", str(tmp_path / "hub")), ("HF_ASSETS_CACHE", str(tmp_path / "assets")),
                        ("HF_HUB_OFFLINE", False)):
        monkeypatch.setattr(hf_constants, name, value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    _forget()
    yield fake
    _forget()
    server.shutdown()
    server.server_close()


def offline(monkeypatch) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    _forget()


def test_a_hub_id_estimates_byte_exactly_as_the_same_config_read_locally(hub, cli_json, tmp_path):
    hub.add("acme/tiny-llama", repo_files())
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "config.json").write_text(json.dumps(CONFIG))
    remote = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "4096", "--batch", "8")
    local = cli_json("estimate", "--hf-config", str(tmp_path / "local"), "--seq-len", "4096", "--batch", "8")
    for key in ("kv_cache", "total_bytes", "flops"):
        assert remote[key] == local[key]
    mine = {k: v for k, v in remote["weights"].items() if not k.startswith("checkpoint")}
    assert mine == {k: v for k, v in local["weights"].items() if not k.startswith("checkpoint")}
    assert local["weights"]["checkpoint_bytes"] is None and remote["weights"]["checkpoint_bytes"] > 0


def test_the_checkpoint_total_is_the_tensors_served_and_no_weights_are_fetched(hub, cli_json):
    tensors = llama_tensors()
    commit = hub.add("acme/tiny-llama", repo_files(tensors=tensors))
    r = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "128")
    w = r["weights"]
    assert w["checkpoint_bytes"] == tensor_bytes(tensors) == w["checkpoint"]["index_total_bytes"]
    c = w["checkpoint"]
    assert (c["repo"], c["commit"], c["tensors"]) == ("acme/tiny-llama", commit, len(tensors))
    # kvplan's own count of a Llama with these shapes is the checkpoint's bytes: nothing to explain
    assert (c["kvplan_bytes"], c["difference_bytes"], c["explained"], c["warning"]) == (w["bytes"], 0, [], None)
    assert r["model"]["source"] == f"{hub.url}/acme/tiny-llama/blob/{commit}/config.json"
    shards = [f for f in hub.repos["acme/tiny-llama"].files if f.endswith(".safetensors")]
    assert hub.refused == [] and len(shards) == 2
    for f in shards:  # huggingface_hub reads a shard's first 100,000 bytes (its header) and never the rest
        size = len(hub.repos["acme/tiny-llama"].files[f])
        assert 0 < hub.sent[f] <= 100_001 < size
    assert all(rng for method, path, rng in hub.requests if method == "GET" and path.endswith(".safetensors"))


def test_single_file_checkpoint_read_from_its_header(hub, cli_json):
    tensors = llama_tensors()
    hub.add("acme/one-file", repo_files(tensors=tensors, shards=1))
    c = cli_json("estimate", "--model", "acme/one-file", "--seq-len", "64")["weights"]["checkpoint"]
    assert (c["bytes"], c["index_total_bytes"], c["difference_bytes"]) == (tensor_bytes(tensors), None, 0)


def test_differences_kvplan_can_explain(hub, cli_json):
    cfg = {**CONFIG, "tie_word_embeddings": True}
    tensors = llama_tensors(cfg)  # lm_head.weight stored although tied
    for n in range(2):  # fp32 norms in a bf16 checkpoint
        tensors[f"model.layers.{n}.input_layernorm.weight"] = ("F32", [64])
    tensors["model.layers.2.mlp.up_proj.weight"] = ("BF16", [128, 64])  # an MTP layer past num_hidden_layers
    tensors["model.rotary_emb.inv_freq"] = ("F32", [8])  # a buffer
    hub.add("acme/tied", repo_files(cfg, tensors))
    c = cli_json("estimate", "--model", "acme/tied", "--seq-len", "64")["weights"]["checkpoint"]
    parts = {p["reason"].split(" ")[0]: (p["bytes"], p["tensors"]) for p in c["explained"]}
    assert parts == {"lm_head.weight": (32000 * 64 * 2, 1), "multi-token-prediction": (128 * 64 * 2, 1),
                     "buffers": (8 * 4, 1), "tensors": (2 * 64 * 2, 2)}
    assert c["difference_bytes"] == sum(b for b, _ in parts.values()) and c["unexplained_bytes"] == 0
    assert c["warning"] is None


def test_a_multimodal_checkpoint_is_counted_whole(hub, cli_json):
    """A gemma3 checkpoint with its SigLIP tower: the card counts the tower, so nothing is left to explain; the
    text-only reading of the same file explains the tower's tensors as what kvplan leaves out."""
    text = {k: CONFIG[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                   "num_key_value_heads", "vocab_size")}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 48,
              "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 28, "patch_size": 7}
    cfg = {"model_type": "gemma3", "torch_dtype": "bfloat16", "mm_tokens_per_image": 4, "vision_config": vision,
           "text_config": {**text, "model_type": "gemma3_text", "head_dim": 16, "max_position_embeddings": 2048}}
    tensors = {f"language_model.{k}": v for k, v in llama_tensors(lm_head=False).items()}
    for n in range(2):  # gemma3: q/k norms and four norms per layer
        p = f"language_model.model.layers.{n}."
        tensors |= {p + "self_attn.q_norm.weight": ("BF16", [16]), p + "self_attn.k_norm.weight": ("BF16", [16]),
                    p + "pre_feedforward_layernorm.weight": ("BF16", [64]),
                    p + "post_feedforward_layernorm.weight": ("BF16", [64])}
    from kvplan.model.hf.config import card_from_hf_config
    from kvplan.cost.params import count_params

    tower = count_params(card_from_hf_config(cfg)).vision
    tensors["vision_tower.vision_model.all.weight"] = ("BF16", [tower])  # the tower's and projector's elements
    hub.add("acme/tiny-gemma3", repo_files(cfg, tensors))
    c = cli_json("estimate", "--model", "acme/tiny-gemma3", "--seq-len", "64")["weights"]["checkpoint"]
    assert (c["difference_bytes"], c["unexplained_bytes"], c["explained"]) == (0, 0, [])


def test_a_difference_kvplan_cannot_explain_is_a_warning_naming_the_tensors(hub, cli, cli_json):
    tensors = llama_tensors()
    for n in range(2):
        tensors[f"model.layers.{n}.self_attn.sinks"] = ("BF16", [4])  # a tensor kvplan's llama card lacks
    hub.add("acme/odd", repo_files(tensors=tensors))
    r = cli_json("estimate", "--model", "acme/odd", "--seq-len", "64")
    c = r["weights"]["checkpoint"]
    assert c["unexplained_bytes"] == 2 * 4 * 2
    assert "model.layers.*.self_attn.sinks" in c["warning"] and "exactly" in c["warning"]
    assert c["warning"].startswith("checkpoint acme/odd: the checkpoint holds 16 B more than kvplan counts")
    code, out, _ = cli("estimate", "--model", "acme/odd", "--seq-len", "64")
    assert code == 0 and "+16 B unexplained" in out and "warning: checkpoint acme/odd" in out


def test_plan_sweep_compare_and_cards_take_hub_ids(hub, cli, cli_json, tmp_path):
    commit = hub.add("acme/tiny-llama", repo_files())
    plan = cli_json("plan", "--model", "acme/tiny-llama", "--gpu", "H100-SXM", "--max-model-len", "2048")
    assert plan["launch_command"].startswith(f"vllm serve acme/tiny-llama --revision {commit} ")
    est = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    assert plan["checkpoint"] == est["weights"]["checkpoint"] and plan["checkpoint"]["commit"] == commit
    assert cli_json("plan", "--model", "llama-2-7b", "--gpu", "H100-SXM", "--max-model-len", "2048")["checkpoint"] is None
    code, text, _ = cli("plan", "--model", "acme/tiny-llama", "--gpu", "H100-SXM", "--max-model-len", "2048")
    assert code == 0 and f"acme/tiny-llama @ {commit[:12]}" in text and f"{plan['checkpoint']['bytes']:,} B" in text
    sglang = cli_json("plan", "--model", "acme/tiny-llama", "--gpu", "H100-SXM", "--max-model-len", "2048",
                      "--engine", "sglang")
    assert f"--model-path acme/tiny-llama --revision {commit} " in sglang["launch_command"]
    rows = cli("sweep", "-m", "acme/tiny-llama,llama-2-7b", "--seq-len", "1024", "--format", "jsonl")
    assert rows[0] == 0 and [json.loads(x)["model"] for x in rows[1].splitlines()] == ["tiny-llama", "llama-2-7b"]
    assert cli("compare", "--model", "acme/tiny-llama", "--attention", "mha,mqa", "--seq-len", "512")[0] == 0
    out = tmp_path / "card.yaml"
    code, _, err = cli("cards", "import", "acme/tiny-llama", "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    assert f"{hub.url}/acme/tiny-llama/blob/" in text and "name: tiny-llama" in text
    same = cli_json("estimate", "--model", str(out), "--seq-len", "256")
    assert same["weights"]["bytes"] == cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "256")[
        "weights"]["bytes"]


def test_a_pinned_revision_and_a_bad_one(hub, cli_json, cli):
    commit = hub.add("acme/tiny-llama", repo_files(), tags=("v1.0",))
    for rev in ("v1.0", commit):
        r = cli_json("estimate", "--model", f"acme/tiny-llama@{rev}", "--seq-len", "64")
        assert r["weights"]["checkpoint"]["commit"] == commit
    line = one_line_error(cli, "estimate", "--model", "acme/tiny-llama@nope", "--seq-len", "64")
    assert "acme/tiny-llama@nope" in line and "no revision 'nope'" in line


def test_offline_answers_from_the_cache(hub, cli_json, cli, monkeypatch):
    hub.add("acme/tiny-llama", repo_files())
    online = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "2048")
    seen = len(hub.requests)
    offline(monkeypatch)
    cached = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "2048")
    assert cached == online and len(hub.requests) == seen  # the same numbers, the checkpoint's too, no request
    line = one_line_error(cli, "estimate", "--model", "acme/other", "--seq-len", "64")
    assert "acme/other" in line and "HF_HUB_OFFLINE" in line


@pytest.mark.parametrize("repo, setup, expect", [
    ("acme/missing", None, "no such repository"),
    ("acme/gated", "gated", "gated repository"),
    ("acme/no-config", "no-config", "no config.json"),
])
def test_each_hub_error_is_one_line_naming_the_repo(hub, cli, repo, setup, expect):
    if setup == "gated":
        hub.add(repo, repo_files(), gated=True)
    elif setup == "no-config":
        hub.add(repo, {"README.md": b"hello"})
    line = one_line_error(cli, "estimate", "--model", repo, "--seq-len", "64")
    assert repo in line and expect in line
    assert hub.refused == []


def test_a_token_opens_a_gated_repo(hub, cli_json, monkeypatch):
    hub.add("acme/gated", repo_files(), gated=True)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")
    assert cli_json("estimate", "--model", "acme/gated", "--seq-len", "64")["weights"]["checkpoint_bytes"] > 0


def test_no_network_is_one_line(hub, cli, monkeypatch):
    import time

    monkeypatch.setattr(hf_constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(time, "sleep", lambda s: None)  # huggingface_hub's retries, without their waits
    line = one_line_error(cli, "estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    assert "acme/tiny-llama" in line and "cannot reach" in line


def test_bundled_names_and_local_paths_win_over_hub_ids(hub, cli_json, tmp_path, monkeypatch):
    hub.add("acme/tiny-llama", repo_files())
    folder = tmp_path / "acme" / "tiny-llama"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": 3}))
    monkeypatch.chdir(tmp_path)
    r = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    assert r["model"]["num_layers"] == 3 and r["weights"]["checkpoint"] is None and hub.requests == []


def test_without_huggingface_hub_a_hub_id_names_the_extra(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    line = one_line_error(cli, "estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    assert "pip install 'kvplan[hub]'" in line and "acme/tiny-llama" in line


def _kvplan(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=os.path.dirname(os.path.dirname(__file__)))


@pytest.mark.slow
def test_the_environment_variables_a_user_sets(hub, tmp_path):
    """HF_ENDPOINT and HF_HUB_CACHE online, then HF_HUB_OFFLINE=1 from the cache, in fresh interpreters."""
    hub.add("acme/tiny-llama", repo_files())
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "c"),
           "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    args = ("plan", "--model", "acme/tiny-llama", "--gpu", "H100-SXM", "--max-model-len", "2048")
    first = _kvplan(env, *args)
    assert first.returncode == 0 and "vllm serve acme/tiny-llama" in first.stdout, first.stderr
    est = _kvplan(env, "estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    assert "checkpoint" in est.stdout and "acme/tiny-llama" in est.stdout, est.stderr
    seen = len(hub.requests)
    again = _kvplan({**env, "HF_HUB_OFFLINE": "1"}, *args)
    assert again.stdout == first.stdout and len(hub.requests) == seen


def test_check_scenarios_name_hub_ids(hub, cli, tmp_path, monkeypatch):
    commit = hub.add("acme/tiny-llama", repo_files())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # 2 layers x 2 KV heads x 16 head_dim x 2 (K, V) x 2 B = 256 B per token; 4 x 1024 tokens: 1 MiB
    (tmp_path / "kvplan.toml").write_text(f'[[scenarios]]\nname = "hub"\nmodel = "acme/tiny-llama@{commit}"\n'
                                          'batch = 4\nseq_len = 1024\nmax_kv_bytes = "1 MiB"\n')
    code, out, err = cli("check", "--json")
    assert code == 0, err
    assert json.loads(out)["figures"]["hub"]["kv_bytes"] == 4 * 1024 * 256


@pytest.mark.slow
def test_verify_takes_a_hub_id(hub, cli):
    pytest.importorskip("torch")
    hub.add("acme/tiny-llama", repo_files())
    code, out, err = cli("verify", "--model", "acme/tiny-llama", "--seq-len", "64", "--layers", "1",
                         "--scale", "0.25", "--batch", "1")
    assert code == 0, out + err


def test_offline_without_the_headers_cached_falls_back_to_the_index(hub, cli_json, monkeypatch, tmp_path):
    import shutil

    tensors = llama_tensors()
    hub.add("acme/tiny-llama", repo_files(tensors=tensors))
    cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    shutil.rmtree(tmp_path / "assets")  # the headers' summary gone; config.json and the index stay in the Hub cache
    offline(monkeypatch)
    c = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64")["weights"]["checkpoint"]
    assert (c["read_from"], c["bytes"], c["tensors"], c["difference_bytes"]) == (
        "model.safetensors.index.json metadata.total_size", tensor_bytes(tensors), 0, 0)


def test_a_damaged_headers_cache_is_read_again(hub, cli_json, tmp_path):
    hub.add("acme/tiny-llama", repo_files())
    first = cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64")
    for f in (tmp_path / "assets").rglob("safetensors.json"):
        f.write_text("{not json")
    _forget()
    assert cli_json("estimate", "--model", "acme/tiny-llama", "--seq-len", "64") == first


@pytest.mark.slow
def test_report_takes_a_hub_id(hub, cli, tmp_path):
    pytest.importorskip("matplotlib")
    hub.add("acme/tiny-llama", repo_files())
    out = tmp_path / "report.md"
    code, _, err = cli("report", "-m", "acme/tiny-llama", "--gpu", "H100-SXM", "--max-model-len", "2048",
                       "-o", str(out))
    assert code == 0, err
    assert "acme/tiny-llama" in out.read_text()
