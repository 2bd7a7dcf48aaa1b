"""`kvplan check`: the memory and capacity regression gate (config, budgets, baseline, CI outputs)."""

from __future__ import annotations

import re

import pytest

from kvplan.errors import KvplanError
from kvplan.units import parse_size


@pytest.mark.parametrize("text, expected", [
    (1024, 1024), ("1024", 1024), ("40 GiB", 40 * 2**30), ("80GB", 80 * 10**9), ("512MiB", 512 * 2**20),
    ("1.5 KiB", 1536), ("2 kB", 2000), ("3 tib", 3 * 2**40), ("0", 0),
    ("1.0001 KiB", 1024), ("6.51GiB", 651 * 2**30 // 100),  # a logged '6.51 GiB' is rounded: the bytes below it
])
def test_parse_size(text, expected):
    assert parse_size("max_kv_bytes", text) == expected


@pytest.mark.parametrize("text", ["-3", "40 GiBs", "abc", True, 1.5, "", -1, "1.5 B"])
def test_parse_size_rejects(text):
    with pytest.raises(KvplanError, match=r"^max_kv_bytes: "):
        parse_size("max_kv_bytes", text)


# --- a throwaway project: a card and a kvplan.toml --------------------------------------------------------------

import json
from pathlib import Path
from xml.etree import ElementTree as ET

CARD = """\
# a tiny GQA card
name: tiny
source: test
num_layers: 4
hidden_size: 256
num_heads: 8
num_kv_heads: 2
ffn_size: 512
gated_ffn: true
activation: silu
vocab_size: 1000
tie_embeddings: false
norm: rmsnorm
position: rope
max_position_embeddings: 2048
dtype: float16
"""
CARD_KV_LINE = 7  # num_kv_heads:
# tiny, batch 4 x 1024 tokens, fp16: 4 layers x 2 KV heads x 32 head_dim x 2 (K, V) x 2 B = 1024 B per token
KV_BYTES = 4 * 1024 * 1024
CONFIG = """\
# kvplan check gate
baseline = "kvplan-baseline.json"

[[scenarios]]
name = "tiny"
model = "card.yaml"
batch = 4
seq_len = 1024
max_kv_bytes = "{kv}"
max_total_bytes = "{total}"

[[scenarios]]
name = "llama"
model = "llama-2-7b"
seq_len = 4096
gpu = "H100-SXM"
max_tpot_ms = 100
"""
TOTAL_LINE = 10  # max_total_bytes = ... of scenario 'tiny'


@pytest.fixture
def project(tmp_path, monkeypatch):
    """Write the card and a config (budgets as given) into a fresh folder and work there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "card.yaml").write_text(CARD)

    def write(kv: str = "4 MiB", total: str = "16 MiB", config: str | None = None):
        (tmp_path / "kvplan.toml").write_text(config if config is not None else CONFIG.format(kv=kv, total=total))
        return tmp_path

    write()
    return write


def failures(path) -> dict[str, str]:
    suite = ET.parse(path).getroot().find("testsuite")
    return {f"{c.get('classname')} {c.get('name')}": c.find("failure").get("message") for c in suite
            if c.find("failure") is not None}


def test_budgets_that_hold_exit_0(project, cli):
    code, out, err = cli("check")
    assert code == 0, err
    assert "3 of 3 checks hold" in out
    assert "no baseline at kvplan-baseline.json" in out


def test_json_carries_exact_figures(project, cli):
    code, out, _ = cli("check", "--json")
    data = json.loads(out)
    assert code == 0 and data["failed"] == 0
    assert data["figures"]["tiny"]["kv_bytes"] == KV_BYTES
    assert data["figures"]["tiny"]["kv_bytes_per_token"] == 1024
    assert data["figures"]["llama"]["kv_bytes_per_token"] == 524288
    assert data["rows"][0] == {**data["rows"][0], "check": "max_kv_bytes", "limit": KV_BYTES, "delta": 0,
                               "verdict": "pass"}


def test_broken_kv_budget_fails_with_junit_and_annotation_on_the_card_line(project, cli, tmp_path):
    project(kv="4095 KiB")
    code, out, _ = cli("check", "--junit", "report.xml", "--format", "github")
    assert code == 1
    assert failures(tmp_path / "report.xml") == {
        "kvplan.tiny max_kv_bytes kv_bytes": "kv_bytes 4.0 MiB (4,194,304 B); budget max_kv_bytes at most 4.0 MiB "
                                             "(4,193,280 B), over by 1.0 KiB (1,024 B) (card num_kv_heads: 2)"}
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert len(errors) == 1
    assert errors[0].startswith(f"::error file=card.yaml,line={CARD_KV_LINE},title=kvplan check%3A tiny "
                                "max_kv_bytes kv_bytes::kv_bytes 4.0 MiB")


def test_broken_config_budget_points_at_its_line(project, cli, tmp_path, monkeypatch):
    project(total="9 MiB")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = cli("check", "--format", "github")
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert [e.split("::")[1] for e in errors] == [
        f"error file=kvplan.toml,line={TOTAL_LINE},title=kvplan check%3A tiny max_total_bytes total_bytes"]
    text = summary.read_text()
    assert text.startswith("### kvplan check: 1 of 3 checks failed\n")
    assert "| tiny | total_bytes | max_total_bytes <= 9.0 MiB | 9.2 MiB | +236.5 KiB | FAIL |" in text


def test_regression_under_budget_is_caught_by_the_baseline_and_accepted_by_update(project, cli, tmp_path):
    code, out, _ = cli("check", "--update-baseline")
    assert code == 0 and "wrote kvplan-baseline.json" in out
    base = json.loads((tmp_path / "kvplan-baseline.json").read_text())
    assert list(base["scenarios"]) == ["llama", "tiny"]
    assert base["scenarios"]["tiny"]["figures"]["kv_bytes"] == KV_BYTES
    assert base["scenarios"]["tiny"]["card"]["num_kv_heads"] == 2
    project(kv="64 MiB", total="64 MiB")  # generous budgets: only the baseline can catch the change
    (tmp_path / "card.yaml").write_text(CARD.replace("num_kv_heads: 2", "num_kv_heads: 4"))
    code, out, _ = cli("check", "--format", "github")
    assert code == 1
    assert "kv_bytes grew from 4.0 MiB (4,194,304 B) to 8.0 MiB (8,388,608 B) (+100.00%), beyond the tolerance 0 " \
           "(card num_kv_heads changed from 2 to 4). If intended, accept it: `kvplan check --update-baseline`" in out
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert errors and all(e.startswith(f"::error file=card.yaml,line={CARD_KV_LINE},") for e in errors)
    assert cli("check", "--update-baseline")[0] == 0
    assert cli("check")[0] == 0


def test_tolerance_and_a_changed_option(project, cli, tmp_path):
    assert cli("check", "--update-baseline")[0] == 0
    config = CONFIG.format(kv="1 GiB", total="1 GiB").replace("seq_len = 1024", "seq_len = 1040")
    project(config=config)  # 1040/1024: KV +1.6%
    code, out, _ = cli("check", "--format", "github")
    assert code == 1
    assert "::error file=kvplan.toml,line=8," in out  # the seq_len line of scenario 'tiny'
    assert "(seq_len changed from 1024 to 1040)" in out
    project(config=config.replace('name = "tiny"', 'name = "tiny"\ntolerance = 0.02'))
    code, out, _ = cli("check")
    assert code == 0, out


BAD = [
    ('max_kv_byte = "4 GiB"', "kvplan.toml:10: scenario 'x': max_kv_byte: unknown key; did you mean max_kv_bytes?"),
    ('max_kv_bytes = "4 GiBs"', "kvplan.toml:10: scenario 'x': max_kv_bytes: not a size: '4 GiBs'"),
    ("batch = 0", re.compile(r"kvplan\.toml:10: scenario 'x': batch: .+ \(got 0\); allowed: an integer >= 1$")),
    ("batch = true", re.compile(r"kvplan\.toml:10: scenario 'x': batch: .+ \(got True\); allowed: an integer >= 1$")),
    ('kv_dtype = "fp7"', "kvplan.toml:10: scenario 'x': kv_dtype: unknown d"),
    ("max_tpot_ms = 5", "kvplan.toml:10: scenario 'x': max_tpot_ms: needs gpu = NAME"),
    ("max_cache_len = 8", "kvplan.toml:10: scenario 'x': max_cache_len: "),
    ('hf_config = "config.json"', "kvplan.toml:10: scenario 'x': hf_config: give model or hf_config, not both"),
    ("fits = false", re.compile(r"kvplan\.toml:10: scenario 'x': fits: .+ \(got False\); allowed: true$")),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[b[0].split(" ")[0] for b in BAD])
def test_bad_scenario_keys_exit_2(project, cli, extra, message):
    project(config=f'# gate\n\n\n[[scenarios]]\nname = "x"\nmodel = "card.yaml"\nseq_len = 16\n\n\n{extra}\n')
    code, out, err = cli("check")
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in out + err, err
    # a pattern where part of the line is pydantic's wording: only kvplan's parts are asserted
    assert (message.search(err.strip()) if isinstance(message, re.Pattern) else message in err), err


@pytest.mark.parametrize("config, message", [
    ('basline = "b.json"\n[[scenarios]]\nname = "x"\nmodel = "card.yaml"\n',
     "kvplan.toml:1: basline: unknown key; did you mean baseline?"),
    ('[[scenarios]]\nname = "x"\nseq_len = 16\n', "kvplan.toml:1: scenario 'x': model: required"),
    ('[[scenarios]]\nmodel = "card.yaml"\n', "kvplan.toml:1: scenario #1: name: required"),
    ('[[scenarios]]\nname = "x"\nmodel = "lama-2-7b"\nseq_len = 8\n',
     "scenario 'x': model: unknown model 'lama-2-7b'; did you mean llama-2-7b"),
    ('[[scenarios]]\nname = "x"\nmodel = "card.yaml"\nseq_len = 8\n[[scenarios]]\nname = "x"\nmodel = "gpt2"\n',
     "kvplan.toml:6: scenario 'x': name: used twice"),
    ('[[scenarios]]\nname = "x"\nmodel = "card.yaml"\n', "scenario 'x': seq_len: required"),
    ("baseline = 3\n", "kvplan.toml: scenarios: give at least one [[scenarios]] table"),
    ("[[scenarios]\n", "kvplan.toml: not valid TOML"),
])
def test_bad_config_exits_2(project, cli, config, message):
    project(config=config)
    code, _, err = cli("check")
    assert code == 2
    assert message in err


def test_plan_keys_evaluated_by_the_capacity_planner(project, cli):
    from kvplan.model.catalog import load_card
    from kvplan.planning.capacity import plan

    project(config='[[scenarios]]\nname = "x"\nmodel = "card.yaml"\ngpu = "H100-SXM"\ntp = 2\nmax_model_len = 64\n'
                   'min_concurrency = 1000000000\nfits = true\nmax_gpu_bytes = "1 GiB"\n')
    code, out, _ = cli("check", "--json")
    data = json.loads(out)
    expected = plan(load_card("card.yaml"), gpu="H100-SXM", tp=2, max_model_len=64)
    g = expected.per_gpu
    assert data["figures"]["x"] == {"gpu_bytes": g.weights_bytes + g.activation_bytes + g.overhead_bytes + g.context_bytes,
                                    "concurrency": expected.max_concurrency, "fits": True}
    # a tiny card on an H100 fits, its non-KV footprint (CUDA graphs and context included) exceeds 1 GiB, and no
    # GPU holds a billion requests
    assert code == 1 and {r["check"]: r["verdict"] for r in data["rows"]} == {
        "max_gpu_bytes": "fail", "min_concurrency": "fail", "fits": "pass"}
    project(config='[[scenarios]]\nname = "x"\nmodel = "card.yaml"\ngpu = "H100-SXM"\ntp = 2\nbatch = 4\n'
                   'max_model_len = 64\n')
    code, _, err = cli("check")
    assert code == 2 and "scenario 'x': batch: not an option of the capacity planner" in err


def test_schema(cli):
    code, out, _ = cli("check", "--schema")
    schema = json.loads(out)
    assert code == 0
    props = schema["$defs"]["Scenario"]["properties"]
    assert {"max_kv_bytes", "max_total_bytes", "max_gpu_bytes", "min_concurrency", "max_ttft_ms", "max_tpot_ms",
            "fits", "tolerance", "tp", "pp", "max_model_len", "seq_len"} <= set(props)
    assert schema["$defs"]["Scenario"]["additionalProperties"] is False


def test_pyproject_table(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "card.yaml").write_text(CARD)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n\n[tool.kvplan]\nbaseline = "b.json"\n\n'
                                             '[[tool.kvplan.scenarios]]\nname = "t"\nmodel = "card.yaml"\n'
                                             'seq_len = 1024\nbatch = 4\nmax_kv_bytes = "4095 KiB"\n')
    code, out, _ = cli("check", "--format", "github")
    assert code == 1
    assert "::error file=card.yaml,line=7," in out
    project_err = cli("check", "--config", "missing.toml")
    assert project_err[0] == 2 and "--config: missing.toml: no such file" in project_err[2]


def test_ttft_budget_of_an_fp32_checkpoint_served_in_bf16(tmp_path, monkeypatch, cli):
    """A 500 ms TTFT budget for Gemma-2-9B under vLLM on an H100 holds: the prefill runs at the bf16 peak (~0.16 s),
    not the fp32 one (~2.3 s)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "kvplan.toml").write_text('[[scenarios]]\nname = "gemma"\nmodel = "gemma-2-9b"\nseq_len = 8192\n'
                                          'engine = "vllm"\ngpu = "H100-SXM"\nmax_ttft_ms = 500\n')
    code, out, err = cli("check", "--json")
    data = json.loads(out)
    assert code == 0, (out, err)
    assert 140 < data["figures"]["gemma"]["ttft_ms"] < 170


def test_scenarios_take_the_serving_features(tmp_path, monkeypatch, cli):
    """A check scenario takes plan's serving-feature flags (prefix caching, LoRA slots, a speculative config): its
    concurrency is kvplan plan's with them."""
    import kvplan

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    eagle = '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}'
    (tmp_path / "kvplan.toml").write_text(
        '[[scenarios]]\nname = "prefix"\nmodel = "llama-3.1-8b"\ngpu = "L40S"\nmax_model_len = 8192\n'
        'shared_prefix_len = 4096\nmin_concurrency = 1\n\n'
        '[[scenarios]]\nname = "lora-eagle"\nmodel = "llama-3.1-8b"\ngpu = "H100-SXM"\nmax_model_len = 8192\n'
        f"enable_lora = true\nmax_loras = 4\nspeculative_config = '{eagle}'\nmin_concurrency = 1\n")
    code, out, err = cli("check", "--json")
    assert code == 0, out + err
    got = {r["scenario"]: r["value"] for r in json.loads(out)["rows"] if r["figure"] == "concurrency"}
    prefix = kvplan.plan("llama-3.1-8b", gpu="L40S", max_model_len=8192, shared_prefix_len=4096)
    both = kvplan.plan("llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, enable_lora=True, max_loras=4,
                       speculative_config=eagle)
    assert got == {"prefix": prefix.max_concurrency, "lora-eagle": both.max_concurrency}
    assert prefix.max_concurrency > kvplan.plan("llama-3.1-8b", gpu="L40S", max_model_len=8192).max_concurrency


def test_scenarios_take_sglangs_pool_flags(tmp_path, monkeypatch, cli):
    """mem_fraction_static and the hybrid SWA pool's flags reach the plan as `kvplan plan` takes them."""
    import kvplan

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "kvplan.toml").write_text(
        '[[scenarios]]\nname = "oss"\nmodel = "gpt-oss-20b"\nengine = "sglang"\ngpu = "H100-SXM"\n'
        'max_model_len = 8192\nmem_fraction_static = 0.8\nswa_full_tokens_ratio = 0.5\nmin_concurrency = 1\n\n'
        '[[scenarios]]\nname = "one-pool"\nmodel = "gpt-oss-20b"\nengine = "sglang"\ngpu = "H100-SXM"\n'
        'max_model_len = 8192\ndisable_hybrid_swa_memory = true\nmin_concurrency = 1\n')
    code, out, err = cli("check", "--json")
    assert code == 0, out + err
    got = {r["scenario"]: r["value"] for r in json.loads(out)["rows"] if r["figure"] == "concurrency"}
    oss = kvplan.plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang", mem_fraction_static=0.8,
                      swa_full_tokens_ratio=0.5)
    one = kvplan.plan("gpt-oss-20b", gpu="H100-SXM", max_model_len=8192, engine="sglang",
                      disable_hybrid_swa_memory=True)
    assert got == {"oss": oss.max_concurrency, "one-pool": one.max_concurrency} and got["oss"] != got["one-pool"]


@pytest.mark.parametrize("body, key", [('max_model_len = 8192\n', "gpu"),
                                       ('gpu = "H100-SXM"\ntp = 2\n', "max_model_len"),
                                       ('fits = true\ngpu = "H100-SXM"\n', "max_model_len")])
def test_a_capacity_scenario_without_its_gpu_or_length_names_the_key(cli, tmp_path, body, key):
    """It was an internal error (exit 3, plan() missing gpu); now one line naming the file, line and key."""
    cfg = tmp_path / "kvplan.toml"
    cfg.write_text('[[scenarios]]\nname = "a"\nmodel = "llama-3-8b"\n' + body)
    code, out, err = cli("check", "--config", str(cfg))
    assert code == 2 and f"kvplan.toml:1: scenario 'a': {key}: required" in err and len(err.strip().splitlines()) == 1


def test_a_baseline_the_figures_improved_past_is_named_stale(project, cli, tmp_path):
    """QA F2 14: kvplan's own baseline held gpt-oss-120b's weights at 65.9 GiB while they are 60.8 GiB, so a 5 GiB
    regression would have passed; an improvement past the tolerance is named, with the command that locks it in."""
    assert cli("check", "--update-baseline")[0] == 0
    path = tmp_path / "kvplan-baseline.json"
    base = json.loads(path.read_text())
    base["scenarios"]["tiny"]["figures"]["kv_bytes"] = 2 * KV_BYTES  # the figure has halved since
    path.write_text(json.dumps(base))
    code, out, _ = cli("check")
    text = " ".join(out.split())
    assert code == 0 and "1 figure improved past the baseline by more than the tolerance (tiny kv_bytes)" in text
    assert "`kvplan check --update-baseline` locks the improvement in" in text
    assert cli("check", "--update-baseline")[0] == 0
    assert "improved past" not in cli("check")[1]


def test_a_disagg_scenario_without_a_key_names_the_file_line_and_key(cli, tmp_path):
    cfg = tmp_path / "kvplan.toml"
    cfg.write_text('[[scenarios]]\nname = "d"\nmodel = "llama-3-8b"\ngpu = "H100-SXM"\nrate = 1.0\nisl = 512\n'
                   'osl = 64\nttft_ms = 2000.0\n')
    code, _, err = cli("check", "--config", str(cfg))
    assert code == 2 and "kvplan.toml:1: scenario 'd': tpot_ms: required by a disagg scenario" in err


@pytest.mark.parametrize("key, value, line", [("model", "cards/nope.yaml", 6), ("hf_config", "nope/config.json", 6),
                                              ("gpu_file", "nope.yaml", 7)])
def test_a_file_a_scenario_cannot_read_is_named_at_its_key(cli, tmp_path, key, value, line):
    """QA F2 8: a card, config.json or GPU file that cannot be read was reported at the scenario's header line
    without its key; docs/check.md: the message names the file, line, scenario and key."""
    model = "" if key == "hf_config" else 'model = "llama-3-8b"\n' if key == "gpu_file" else ""
    cfg = tmp_path / "kvplan.toml"
    cfg.write_text(f'# c\n\n[[scenarios]]\nname = "a"\nseq_len = 1024\n{model}{key} = "{value}"\n')
    code, _, err = cli("check", "--config", str(cfg))
    assert code == 2 and f"kvplan.toml:{line}: scenario 'a': {key}: " in " ".join(err.split())


# --- the baseline is never a file the check reads, nor inside .git (QA B, D1) ------------------------------------

def _one_error(cli, *args) -> str:
    code, out, err = cli(*args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out + err, (
        code, out[-500:], err)
    return lines[0]


def _snapshot(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("baseline, what", [
    ("kvplan.toml", "is the config file, which --update-baseline would overwrite"),
    ("pyproject.toml", "is a pyproject.toml (a config file's name)"),
    ("sub/kvplan.toml", "is a kvplan.toml (a config file's name)"),
    ("card.yaml", "kvplan.toml:6), a file the scenarios read, which --update-baseline would overwrite"),
    ("./sub/../card.yaml", "is the model of scenario 'tiny'"),
    ("llama-2-7b", "is the model of scenario 'llama'"),  # a file by a bundled card's name would be read as the card
    ("hf/config.json", "kvplan.toml:21), a folder the scenarios read"),
    ("hf/other.json", "is inside the hf_config of scenario 'hf'"),
    ("gpus.yaml", "is the gpu_file of scenario 'hf'"),
    (".git/kvplan-baseline.json", "inside .git"),
    ("sub/.git/b.json", "inside .git"),
])
def test_update_baseline_never_replaces_a_file_the_check_reads(project, cli, tmp_path, baseline, what):
    """--update-baseline replaced kvplan.toml, pyproject.toml or the scenario's own card with JSON, or wrote into
    .git; now the config is refused (exit 2) naming its baseline line, and nothing is written."""
    import shutil

    (tmp_path / ".git").mkdir()
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    shutil.copytree(Path(__file__).parent / "data" / "configs" / "qwen3-0.6b", tmp_path / "hf")
    (tmp_path / "gpus.yaml").write_text("gpus:\n  H100-SXM:\n    price_per_hour_usd: 2.0\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    project(config=f'# gate\nbaseline = "{baseline}"\n' + CONFIG.format(kv="1 GiB", total="1 GiB").split("\n", 2)[2]
            + '\n[[scenarios]]\nname = "hf"\nhf_config = "hf"\nseq_len = 64\ngpu_file = "gpus.yaml"\n')
    before = _snapshot(tmp_path)
    for args in (("check", "--update-baseline"), ("check",)):
        line = _one_error(cli, *args)
        assert "kvplan.toml:2: baseline: " in line and what in line, line
    assert _snapshot(tmp_path) == before


def test_update_baseline_in_pyproject_never_replaces_pyproject(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "card.yaml").write_text(CARD)
    text = ('[project]\nname = "p"\n\n[tool.other]\nbaseline = "x"\n\n[tool.kvplan]\nbaseline = "pyproject.toml"\n\n'
            '[[tool.kvplan.scenarios]]\nname = "t"\nmodel = "card.yaml"\nseq_len = 16\n')
    (tmp_path / "pyproject.toml").write_text(text)
    line = _one_error(cli, "check", "--update-baseline")
    assert "pyproject.toml:8: baseline: " in line  # the [tool.kvplan] line, not [tool.other]'s
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_update_baseline_replaces_only_a_baseline(project, cli, tmp_path):
    """An existing file that is not a kvplan baseline (package.json) is refused; a damaged baseline is rewritten."""
    project(config='baseline = "package.json"\n' + CONFIG.format(kv="4 MiB", total="16 MiB").split("\n", 2)[2])
    (tmp_path / "package.json").write_text('{"name": "web", "version": "1.0.0"}\n')
    line = _one_error(cli, "check", "--update-baseline")
    assert "package.json: exists and is not a kvplan baseline" in line
    assert (tmp_path / "package.json").read_text() == '{"name": "web", "version": "1.0.0"}\n'
    (tmp_path / "package.json").write_text('<<<<<<< HEAD\n{\n  "schema_version": 1,\n=======\n')  # a merge conflict
    assert cli("check", "--update-baseline")[0] == 0
    assert json.loads((tmp_path / "package.json").read_text())["schema_version"] == 1


# --- every output path is checked before any is written (QA B, D9) ------------------------------------------------

@pytest.mark.parametrize("junit, message", [
    ("jdir", "--junit: jdir: is a directory"),
    ("no/such/j.xml", "--junit: no/such/j.xml: cannot write in no/such: no such folder"),
    ("card.yaml", "--junit: card.yaml is the model of scenario 'tiny'"),
    ("kvplan.toml", "--junit: kvplan.toml is the config"),
    ("kvplan-baseline.json", "--junit: kvplan-baseline.json is the baseline"),
])
def test_a_bad_junit_path_is_refused_before_the_baseline_is_written(project, cli, tmp_path, junit, message):
    (tmp_path / "jdir").mkdir()
    before = _snapshot(tmp_path)
    line = _one_error(cli, "check", "--update-baseline", "--junit", junit)
    assert message in line, line
    assert _snapshot(tmp_path) == before and not (tmp_path / "kvplan-baseline.json").exists()


# --- a plan the memory cannot hold fails the check, exit 1 (QA B, D12) --------------------------------------------

def test_fits_budget_of_weights_that_outgrow_the_gpu_fails_with_exit_1(tmp_path, monkeypatch, cli):
    """The 70B weights exceed an L4: that is the regression `fits = true` exists to catch. It was exit 2 with no
    annotation nor JUnit failure; now fits is false, no request is served, and the row says why."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "kvplan.toml").write_text('[[scenarios]]\nname = "big"\nmodel = "llama-3.1-70b"\ngpu = "L4"\n'
                                          'max_model_len = 8192\nfits = true\nmin_concurrency = 1\n')
    code, out, _ = cli("check", "--format", "github", "--junit", "j.xml")
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert [e.split("::")[1] for e in errors] == [
        "error file=kvplan.toml,line=7,title=kvplan check%3A big min_concurrency concurrency",
        "error file=kvplan.toml,line=6,title=kvplan check%3A big fits fits"]
    assert failures(tmp_path / "j.xml")["kvplan.big fits fits"].startswith(
        "fits is false (gpu: the weights alone do not fit: ")
    data = json.loads(cli("check", "--json")[1])
    figures = data["figures"]["big"]
    assert figures["fits"] is False and figures["concurrency"] == 0
    assert figures["gpu_bytes"] > 80 * 2**30 * 1.5  # the 70B's bf16 weights on one GPU: more than an L4's 24 GB
    assert cli("check", "--update-baseline")[0] == 1  # a failing plan is still a baseline to record


def test_a_budget_that_leaves_nothing_for_the_cache_fails_but_a_bad_layout_is_input(project, cli):
    project(config='[[scenarios]]\nname = "low"\nmodel = "llama-3-8b"\ngpu = "H100-SXM"\nmax_model_len = 4096\n'
                   'gpu_memory_utilization = 0.1\nfits = true\n')
    code, out, _ = cli("check", "--json")
    row = json.loads(out)["rows"][0]
    assert code == 1 and row["verdict"] == "fail" and "no available memory for the cache blocks" in row["message"]
    project(config='[[scenarios]]\nname = "tp3"\nmodel = "card.yaml"\ngpu = "H100-SXM"\nmax_model_len = 64\n'
                   'tp = 3\nfits = true\n')
    assert "scenario 'tp3': tp: " in _one_error(cli, "check")  # 8 heads over TP 3: the input, not the memory


# --- reporting (QA B, D15) -----------------------------------------------------------------------------------------

def test_a_first_run_with_nothing_to_check_says_what_to_do(project, cli, tmp_path, monkeypatch):
    project(config='[[scenarios]]\nname = "x"\nmodel = "card.yaml"\nseq_len = 16\n')
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = cli("check")
    assert code == 0 and "0 of 0" not in out and out.rstrip().endswith("nothing was checked")
    assert "`kvplan check --update-baseline`" in out and "set budgets" in out
    assert "verdict" not in out and "┏" not in out  # no empty table
    assert summary.read_text().startswith("### kvplan check: nothing was checked\n")
    assert "| scenario |" not in summary.read_text()


def test_new_figures_are_not_counted_as_checks_that_hold(project, cli, tmp_path, monkeypatch):
    assert cli("check", "--update-baseline")[0] == 0
    project(config=CONFIG.format(kv="4 MiB", total="16 MiB") + '\n[[scenarios]]\nname = "more"\nmodel = "card.yaml"\n'
                                                                 'seq_len = 8\n')
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = cli("check")
    # tiny: 2 budgets + 4 baseline figures; llama: 1 budget + 6 baseline figures; more: 4 new figures
    assert code == 0 and "13 of 13 checks hold; 4 new, not compared (not in the baseline yet)" in out
    assert summary.read_text().startswith("### kvplan check: all 13 checks hold; 4 new, not compared\n")


def test_a_scenario_removed_from_the_config_is_named(project, cli):
    assert cli("check", "--update-baseline")[0] == 0
    project(config=CONFIG.format(kv="4 MiB", total="16 MiB").split("[[scenarios]]\nname = \"llama\"")[0])
    code, out, _ = cli("check")
    assert code == 0 and "also holds scenario 'llama', no longer in kvplan.toml" in " ".join(out.split())
    code, out, _ = cli("check", "--update-baseline")
    assert code == 0 and "dropped scenario 'llama'" in " ".join(out.split())


def test_baseline_symlinks_are_named_as_such(project, cli, tmp_path):
    project(config=CONFIG.format(kv="4 MiB", total="16 MiB").split("\n", 2)[2])  # no baseline key: the default
    (tmp_path / ".git").mkdir()
    (tmp_path / "kvplan-baseline.json").symlink_to(tmp_path.parent / "nonexistent-target.json")
    line = _one_error(cli, "check")
    # the key is not set: no line number is claimed for it
    assert "kvplan.toml: baseline (not set: the default kvplan-baseline.json): " in line
    assert "is a symbolic link to " in line and "dangling" in line and "outside the repository" in line
    (tmp_path / "kvplan-baseline.json").unlink()
    (tmp_path / "kvplan-baseline.json").symlink_to("missing.json")  # inside the repository, dangling
    line = _one_error(cli, "check")
    assert "kvplan-baseline.json: a symbolic link to missing.json, which does not exist" in line


def test_config_that_is_a_folder_or_not_a_table(project, cli, tmp_path):
    assert "--config: sub: a directory; allowed: a TOML file" in _one_error(
        cli, "check", "--config", str((tmp_path / "sub").mkdir() or "sub"))
    (tmp_path / "kvplan.toml").unlink()
    (tmp_path / "pyproject.toml").write_text("[tool]\nkvplan = 3\n")
    assert "pyproject.toml:2: tool.kvplan: 3 is not a table" in _one_error(cli, "check")


def test_a_gpu_file_is_read_relative_to_the_config_by_every_figure(tmp_path, monkeypatch, cli):
    """The estimate read gpu_file beside the config, the capacity planner beside the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "card.yaml").write_text(CARD)
    (tmp_path / "sub" / "gpus.yaml").write_text("gpus:\n  H100-SXM:\n    price_per_hour_usd: 2.0\n")
    (tmp_path / "sub" / "kvplan.toml").write_text('[[scenarios]]\nname = "x"\nmodel = "card.yaml"\n'
                                                  'gpu = "H100-SXM"\ngpu_file = "gpus.yaml"\nmax_model_len = 64\n'
                                                  'fits = true\n')
    code, out, err = cli("check", "--config", "sub/kvplan.toml", "--json")
    assert code == 0, err
    assert json.loads(out)["figures"]["x"]["fits"] is True


@pytest.mark.parametrize("baseline, what", [("kvplan.toml", "the config file"), ("pyproject.toml", "a pyproject.toml"),
                                            ("card.yaml", "a file the scenarios read"),
                                            (".git/b.json", "inside .git")])
def test_update_baseline_never_overwrites_the_config_or_what_it_reads(tmp_path, monkeypatch, cli, baseline, what):
    """QA B D1: `baseline = "kvplan.toml"` made --update-baseline replace the config with JSON (exit 0)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "card.yaml").write_text(CARD)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    config = f'baseline = "{baseline}"\n\n[[scenarios]]\nname = "t"\nmodel = "card.yaml"\nseq_len = 1024\n'
    (tmp_path / "kvplan.toml").write_text(config)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, _, err = cli("check", "--update-baseline")
    assert code == 2 and what in err and "kvplan.toml:1: baseline:" in err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing written
