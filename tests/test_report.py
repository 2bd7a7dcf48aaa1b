"""`kvplan report`: the HTML is self-contained and its tables hold the library's numbers; Markdown links its charts;
bad input is one line and no file; Chromium (where installed) renders a page that is not blank."""

import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from helpers import one_line_error, tiered

pytest.importorskip("matplotlib")

from kvplan import estimate  # noqa: E402
from kvplan.cost.hardware import load_gpu  # noqa: E402
from kvplan.planning.capacity import plan  # noqa: E402
from kvplan.planning.report_data import build_report  # noqa: E402
from kvplan.units import fmt_bytes  # noqa: E402

MODELS = ("llama-3-8b", "gemma-2-9b", "deepseek-v2-lite")


class Doc(HTMLParser):
    """Tables by id (rows of (text, data-value)), svg count, and every src/href/url reference."""

    def __init__(self):
        super().__init__()
        self.tables, self.refs, self.svgs, self.tags = {}, [], 0, set()
        self._table = self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        for k in ("src", "href", "xlink:href"):
            if k in a:
                self.refs.append(a[k])
        if tag == "svg":
            self.svgs += 1
        elif tag == "table":
            self._table = self.tables.setdefault(a.get("id", ""), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag == "td":
            self._cell = [a.get("data-value"), ""]
            self._row.append(self._cell)

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


@pytest.fixture(scope="module")
def html_report(tmp_path_factory):
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    out = tmp_path_factory.mktemp("rep") / "report.html"
    r = CliRunner().invoke(app, ["report", *[f"--model={m}" for m in MODELS], "--gpu", "H100-SXM,A100-40GB",
                                 "--concurrency", "16", "--max-model-len", "8192", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    doc = Doc()
    text = out.read_text()
    doc.feed(text)
    return out, text, doc


def test_self_contained(html_report):
    _, text, doc = html_report
    assert doc.svgs == 5 * len(MODELS) - 1  # deepseek (MLA) has no layout chart
    assert all(r.startswith("#") for r in doc.refs), [r for r in doc.refs if not r.startswith("#")][:5]
    assert "script" not in doc.tags and "link" not in doc.tags and "img" not in doc.tags
    assert "<!DOCTYPE svg" not in text and "@import" not in text and "url(http" not in text
    assert "vllm serve " in text and "not available" not in text  # the capacity sections come from kvplan plan
    assert "concurrent requests at this length (kvplan plan: weights, activation peak" in text  # the verdict too


def test_table_cells_show_their_exact_values(html_report):
    _, _, doc = html_report
    for rows in doc.tables.values():
        for row in rows:
            for value, text in row:
                if value is not None and "." not in value and "e" not in value:
                    n = int(value)
                    assert text in (fmt_bytes(n), f"{n:,}"), (value, text)


def _num(cell):
    return int(cell[0])


def test_tables_equal_library_results(html_report):
    from kvplan.errors import KvplanError
    from kvplan.planning.capacity import plan
    from kvplan.planning.report_data import KV_DTYPES

    _, _, doc = html_report
    for name in MODELS:
        for row in doc.tables[f"{name}-capacity-table"][1:]:
            p = plan(name, gpu=row[0][1], max_model_len=8192, engine="vllm", concurrency=16)
            assert [_num(c) for c in row[1:7]] == [
                p.per_gpu.weights_bytes, p.per_gpu.activation_bytes, p.per_gpu.overhead_bytes,
                p.kv_cache.available_bytes, p.kv_cache.num_blocks, 16 * p.request_kv_bytes]
            assert float(row[7][0]) == p.max_concurrency and float(row[8][0]) == p.max_running
            assert row[9][1] == ("yes" if p.target_met else "no")  # kvplan plan's own verdict
            assert float(row[10][0]) == p.latency.ttft_ms / 1e3 and float(row[11][0]) == p.latency.tpot_ms / 1e3
            assert _num(row[12]) == p.latency.batch_per_replica  # the batch the TPOT is at (QA report A, 13)
        for row in doc.tables[f"{name}-memory-table"][1:]:  # the same plan: one concurrency figure per layout
            p = plan(name, gpu=row[0][1], max_model_len=8192, engine="vllm")
            assert [_num(c) for c in row[1:4]] == [p.inputs.gpu_memory_bytes, p.per_gpu.requested_bytes,
                                                   p.request_kv_bytes]
            assert float(row[4][0]) == p.max_concurrency
        planned = [r[0][1] for r in doc.tables[f"{name}-capacity-table"][1:]]  # the concurrency chart's columns
        for row in doc.tables[f"{name}-concurrency-table"][1:]:
            n = _num(row[0])
            expected = []
            for g in planned:
                try:  # what the engine runs at once: its pool's, capped by its scheduler (--max-num-seqs)
                    expected.append(plan(name, gpu=g, max_model_len=n).max_running)
                except KvplanError:
                    expected.append(None)
            assert [None if c[0] is None else float(c[0]) for c in row[1:]] == expected, n
        kv = doc.tables[f"{name}-kv-table"]
        plans = [plan(name, gpu=g, max_model_len=8192, concurrency=16) for g in ("A100-40GB", "H100-SXM")]
        chosen = next((p for p in plans if p.target_met), plans[-1])  # the smallest GPU that runs the target
        bs = chosen.inputs.block_size  # the chosen layout's pages (vLLM's MLA: 64 on Hopper)
        # after tokens and the model dtype: the others vLLM stores for it (int8/int4_per_token_head: not for MLA)
        first = estimate(name, seq_len=1, engine="vllm").kv_cache.dtype
        mla = estimate(name, seq_len=1).model.attention == "MLA"
        dtypes = [d for d in KV_DTYPES if d != first and not (mla and d in ("int8", "int4"))]
        for row in kv[1:]:
            n = _num(row[0])
            assert len(row) == 2 + len(dtypes)
            assert _num(row[1]) == estimate(name, seq_len=n, engine="vllm",
                                            block_size=bs).kv_cache.bytes_per_sequence
            for dtype, cell in zip(dtypes, row[2:]):  # fp8, and vLLM's int8/int4_per_token_head but for MLA
                assert _num(cell) == estimate(name, seq_len=n, engine="vllm", kv_dtype=dtype,
                                              block_size=bs).kv_cache.bytes_per_sequence
        for row in doc.tables[f"{name}-roofline-table"][1:]:
            r = estimate(name, batch=_num(row[2]), seq_len=8192, engine="vllm", gpu=row[0][1]).roofline
            p = r.prefill if row[1][1] == "prefill" else r.decode_step
            assert float(row[5][0]) == p.time_s and float(row[3][0]) == p.arithmetic_intensity_flops_per_byte
    layouts = doc.tables["llama-3-8b-layouts-table"]
    for row in layouts[1:]:
        att = None if row[0][1] == "card" else row[0][1]
        assert _num(row[3]) == estimate("llama-3-8b", batch=16, seq_len=8192, engine="vllm",
                                        attention=att).kv_cache.total_bytes


def test_tpot_column_names_its_batch_where_layouts_differ(html_report):
    """Gemma-2-9B holds 16 requests on an H100 but 6 on an A100-40GB: its TPOT column is at batches 16 and 6, and
    the report says so below the table; Llama-3-8B runs 16 on both and gets no such note (QA report A, 13)."""
    _, text, doc = html_report
    gemma = doc.tables["gemma-2-9b-capacity-table"]
    assert gemma[0] == [] and {_num(r[12]) for r in gemma[1:]} == {16, 6}
    assert text.count("TPOT compares different batches (6, 16)") == 1
    assert text.index("TPOT compares different batches") > text.index('id="gemma-2-9b-capacity-table"')


def test_no_time_in_exponent_notation_and_no_negative_size(html_report):
    import re

    _, text, doc = html_report
    shown = " ".join(t for rows in doc.tables.values() for row in rows for _, t in row)
    assert not re.search(r"\de[+-]\d+ (ms|s)\b", text) and not re.search(r"\d e[+-]", shown)
    assert not re.search(r"-\d[\d,.]* (B|KiB|MiB|GiB|TiB)\b", shown)
    assert not re.search(r"(?<![\d.,])1 concurrent requests", text)


def test_markdown_links_its_charts(tmp_path, cli):
    out = tmp_path / "r.md"
    code, _, err = cli("report", "-m", "gemma-2-9b", "--gpu", "L4", "-o", str(out))
    assert code == 0, err
    import re

    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", out.read_text())
    assert len(links) == 5
    for link in links:
        assert not link.startswith(("/", "http")) and (tmp_path / link).read_text().startswith("<svg")


_error = one_line_error


@pytest.mark.parametrize("args, words", [
    (("-m", "llama-3-8x",), "llama-3-8b"),
    (("-m", "gpt2", "--engine", "nope"), "--engine"),
    (("-m", "gpt2", "--gpu", "NOPE"), "--gpu"),
    (("-m", "gpt2", "--concurrency", "0"), "--concurrency"),
])
def test_bad_input_one_line_no_file(cli, tmp_path, args, words):
    assert words in _error(cli, "report", *args, "-o", str(tmp_path / "r.html"))
    assert list(tmp_path.iterdir()) == []


def test_unwritable_and_wrong_suffix(cli, tmp_path):
    assert "cannot write" in _error(cli, "report", "-m", "gpt2", "-o", str(tmp_path / "no" / "r.html"))
    assert ".html or .md" in _error(cli, "report", "-m", "gpt2", "-o", str(tmp_path / "r.pdf"))
    assert list(tmp_path.iterdir()) == []


def test_missing_matplotlib_names_the_extra(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert "pip install 'kvplan[report]'" in _error(cli, "report", "-m", "gpt2", "-o", str(tmp_path / "r.html"))


def test_estimate_and_sweep_never_import_matplotlib():
    code = ("import sys, kvplan; kvplan.estimate('gemma-2-9b', seq_len=9, gpu='H100-SXM'); "
            "list(kvplan.sweep('gpt2', seq_len='1..64*2')); "
            "from kvplan.cli.app import app; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'numpy', 'torch')], 'heavy'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_build_report_is_library_data():
    rep = build_report(["deepseek-v2-lite"], gpus=["H200"], max_model_len=4096)
    m = rep.models[0]
    assert m.attention_layouts is None and "MLA" in m.layout_note
    assert m.kv_curve["bf16"][m.kv_lengths.index(4096)] == estimate(
        "deepseek-v2-lite", seq_len=4096, engine="vllm").kv_cache.bytes_per_sequence


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not on PATH (Debian: apt-get install chromium)")
def test_chromium_renders_a_page_that_is_not_blank(html_report, tmp_path):
    from PIL import Image

    out, _, _ = html_report
    png = tmp_path / "r.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", f"--screenshot={png}",
                    "--window-size=800,1600", out.as_uri()], check=True, capture_output=True, timeout=120)
    im = Image.open(png).convert("L")
    colours = im.getcolors(maxcolors=1 << 16) or []
    dark = sum(n for n, v in colours if v < 128)
    assert len(colours) > 16 and dark > 0.005 * im.width * im.height


def test_notebook_reprs_are_html_tables():
    from kvplan.planning.compare import compare

    e = estimate("llama-2-7b", batch=16, seq_len=4096, gpu="H100-SXM")
    doc = Doc()
    doc.feed(e._repr_html_())
    assert "table" in doc.tags and "34,359,738,368 B" in e._repr_html_()
    c = compare("llama-3-8b", attention="mha,mqa", gpu="H100-SXM")
    assert c._repr_html_().count("<tr>") == 1 + 3
    from kvplan.planning.capacity import plan

    p = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192, kv_cache_memory="30GiB")
    html = p._repr_html_()
    assert "24,576 of 16 tokens" in html and "48.00" in html and "vllm serve meta-llama/Llama-3.1-70B" in html


@pytest.mark.parametrize("name", tiered(__import__("kvplan").bundled_names()))
def test_every_bundled_card_reports(name, tmp_path, cli):
    out = tmp_path / "r.html"
    code, _, err = cli("report", "-m", name, "--gpu", "H200", "--max-model-len", "2048", "-o", str(out))
    assert code == 0, err
    doc = Doc()
    doc.feed(out.read_text())
    assert doc.svgs >= 1 and all(r.startswith("#") for r in doc.refs)


def test_refused_layout_keeps_the_engine_reason(tmp_path, cli):
    """llama-2-70b fits no single H100: that layout is refused with the engine's reason; TP 4 is planned."""
    out = tmp_path / "r.html"
    code, _, err = cli("report", "-m", "llama-2-70b", "--gpu", "H100-SXM", "--tp", "1,4", "-o", str(out))
    assert code == 0, err
    doc, text = Doc(), out.read_text()
    doc.feed(text)
    assert [r[0][1] for r in doc.tables["llama-2-70b-capacity-table"][1:]] == ["4x H100-SXM (TP 4)"]
    assert "H100-SXM: refused: --gpu: the weights alone do not fit" in text


def test_tp4_report_describes_one_layout_everywhere(tmp_path, cli):
    """The issue's report: every section is about 4x H100 (TP 4), none about one GPU; one concurrency figure."""
    from kvplan.planning.capacity import plan

    out = tmp_path / "r.html"
    code, _, err = cli("report", "-m", "llama-2-70b", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "8192",
                       "-o", str(out))
    assert code == 0, err
    doc, text = Doc(), out.read_text()
    doc.feed(text)
    p = plan("llama-2-70b", gpu="H100-SXM", tp=4, max_model_len=8192)
    label = "4x H100-SXM (TP 4)"
    for tid in ("capacity", "memory", "roofline"):
        assert {r[0][1] for r in doc.tables[f"llama-2-70b-{tid}-table"][1:]} == {label}, tid
    figures = {float(r[7][0]) for r in doc.tables["llama-2-70b-capacity-table"][1:]}
    figures |= {float(r[4][0]) for r in doc.tables["llama-2-70b-memory-table"][1:]}
    figures |= {float(r[1][0]) for r in doc.tables["llama-2-70b-concurrency-table"][1:] if r[0][1] == "8,192"}
    assert figures == {p.max_concurrency}
    layouts = {r[0][1]: r for r in doc.tables["llama-2-70b-layouts-table"][1:]}
    assert _num(layouts["card"][6]) == int(p.max_concurrency)  # the what-if table plans the same layout
    assert "Not one request fits" not in text and "one GPU, no parallelism" not in text
    assert "Verdict: deploy on 4x H100-SXM (TP 4): 1 request of 8,192 tokens fits" in text


def test_verdict_picks_the_smallest_gpu_among_tp_layouts():
    """Fewest GPUs, then the smallest GPU: 2x L40S before 2x H200, whatever order the GPUs are given in (the
    label '2x H200 (TP 2)' is not split to find the GPU)."""
    from kvplan.planning.report_data import choose

    rep = build_report(["llama-3-8b"], gpus=["H200", "L40S"], tp=(2,), max_model_len=4096)
    m = rep.models[0]
    assert [lay.label for lay in m.layouts] == ["2x H200 (TP 2)", "2x L40S (TP 2)"]
    assert m.chosen.label == "2x L40S (TP 2)" == choose(list(reversed(m.layouts)), 1).label


def test_tensor_parallel_options_and_the_fewest_gpus_verdict(cli, tmp_path):
    from kvplan.planning.capacity import plan

    out = tmp_path / "tp.html"
    code, _, err = cli("report", "-m", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "1,2,4", "--concurrency", "32",
                       "-o", str(out))
    text = out.read_text()
    assert code == 0, err
    # 70B in bf16 (141 GB) fits no single H100: TP 1 is refused, TP 2 and 4 are planned by kvplan plan itself
    two, four = (plan("llama-3.1-70b", gpu="H100-SXM", tp=t, max_model_len=8192) for t in (2, 4))
    assert "2x H100-SXM (TP 2)" in text and "4x H100-SXM (TP 4)" in text
    pick = two if two.max_concurrency >= 32 else four
    assert f"holds {pick.max_concurrency:.2f} concurrent requests" in text


def test_state_card_report_splits_the_cache(cli, tmp_path):
    """Jamba: attention K/V, conv state and recurrent state are their own parts (the estimate's kv_cache groups by
    layer kind); the states are flat in the KV curve; fp8 K/V halves the attention part only, the states staying in
    the model dtype; layouts note the states."""
    out = tmp_path / "r.html"
    code, _, err = cli("report", "-m", "jamba-1.5-mini", "--gpu", "H200", "--concurrency", "4", "--max-model-len",
                       "8192", "-o", str(out))
    assert code == 0, err
    doc, text = Doc(), out.read_text()
    doc.feed(text)
    bs = plan("jamba-1.5-mini", gpu="H200", max_model_len=8192).inputs.block_size  # vLLM's unified hybrid page
    e = estimate("jamba-1.5-mini", batch=4, seq_len=8192, engine="vllm", block_size=bs, gpu="H200")
    groups = {g.kind: g for g in e.kv_cache.groups}
    parts = doc.tables["jamba-1.5-mini-cache-parts-table"][1:]
    # vLLM pads each of the 28 state pages to the attention page (the page padding part; 28 layers in 7 groups of 4:
    # no padding layer slot)
    assert [(r[0][1], _num(r[1]), _num(r[3])) for r in parts] == [
        ("attention K/V", 4, groups["full"].total_bytes), ("conv state", 28, groups["conv_state"].total_bytes),
        ("recurrent state", 28, groups["ssm_state"].total_bytes), ("page padding", 0, groups["padding"].total_bytes)]
    page = 8 * 128 * 2 * 2 * bs  # one attention layer's page: 8 KV heads x 128 x (K,V) x 2 B per token
    # vLLM 0.28+ (the default release): prefix caching on for hybrids, Mamba cache mode "align", 2 pages per state
    # layer and request (serving_vllm.state_pages); conv + SSM states once in their own rows
    assert groups["padding"].bytes_per_sequence == 28 * (2 * page - (8192 * 3 + 8192 * 16) * 2)
    assert sum(_num(r[3]) for r in parts) == e.kv_cache.total_bytes
    rows = doc.tables["jamba-1.5-mini-kv-table"][1:]
    # tokens, bf16, fp32, fp8, int8 and int4 totals (vLLM's int8/int4_per_token_head), then bf16 by part
    assert all(len(r) == 10 for r in rows)
    for r in rows:
        n = _num(r[0])
        assert _num(r[1]) == _num(r[6]) + _num(r[7]) + _num(r[8]) + _num(r[9])
        # 4 attention layers x 8 KV heads x 128 x (K,V) x 2 B, for the tokens of whole pages
        assert _num(r[6]) == 4 * 8 * 128 * 2 * 2 * -(-n // bs) * bs
        for col, dtype, per_head in ((3, "fp8_e4m3", 128), (4, "int8", 128 + 4), (5, "int4", 64 + 4)):
            q = estimate("jamba-1.5-mini", seq_len=n, engine="vllm", kv_dtype=dtype, block_size=bs)
            assert _num(r[col]) == q.kv_cache.bytes_per_sequence < _num(r[1])  # beside bf16 states, paged as vLLM
            # int8: 128 values + one fp32 scale per token, head and K/V; int4: 64 bytes + the scale; the positions
            # of whole pages of the block vLLM raises for that page (a smaller attention page: a longer block)
            full = next(g for g in q.kv_cache.groups if g.kind == "full")
            assert full.bytes_per_sequence == 4 * 8 * per_head * 2 * full.positions_held and full.positions_held >= n
        flat = (_num(r[7]), _num(r[8]), _num(r[9]))
        assert flat == (_num(rows[0][7]), _num(rows[0][8]), _num(rows[0][9]))  # the states are flat
    assert "fp8_e4m3, int8, int4 quantize attention K/V only: the conv and recurrent states" in text
    assert "change the K/V heads of the 4 attention layers only" in text
    assert "KV cache (full attention) = 4 seq x 4 layers x 8 kv_heads" in text
    assert "recurrent state = 4 seq x 28 layers" in text


def test_state_only_card_has_no_layouts_and_no_attention_part():
    import transformers

    from kvplan.model.hf.config import card_from_hf_config
    from kvplan.report.document import build_blocks

    cfg = transformers.AutoConfig.for_model("mamba2", hidden_size=64, vocab_size=128, num_hidden_layers=2,
                                            state_size=8, num_heads=8, head_dim=16, n_groups=2).to_dict()
    rep = build_report([card_from_hf_config(cfg)], gpus=["H200"], max_model_len=1024)
    m = rep.models[0]
    assert m.attention_layouts is None and "no attention layers" in m.layout_note
    assert list(m.kv_parts) == ["conv state", "recurrent state"]
    assert len(set(m.kv_parts["recurrent state"])) == 1 and m.kv_curve["bf16"][0] == m.kv_curve["bf16"][-1]
    assert any(b.kind == "chart" for b in build_blocks(rep))


@pytest.mark.parametrize("seconds, text", [(78.23, "78.2 s"), (0.15824, "158 ms"), (2.3e-5, "23 µs"),
                                            (1234.5, "1,234 s"), (0.0999, "99.9 ms"), (99.97, "100 s"), (5.0, "5 s")])
def test_durations_read_as_people_write_them(seconds, text):
    from kvplan.units import fmt_seconds, plural

    assert fmt_seconds(seconds) == text
    assert (plural(1, "request"), plural(16, "request"), plural(1024, "token")) == ("1 request", "16 requests",
                                                                                    "1,024 tokens")


@pytest.mark.parametrize("seconds, limit, text", [
    (0.01999, 0.020, "19.99 ms"), (0.0199996, 0.020, "19.9996 ms"), (0.0200004, 0.020, "20.0004 ms"),
    (0.020, 0.020, "20 ms"), (123.4, 123.0, "123.4 s"), (123.4, 123.5, "123 s"), (0.01999, None, "20 ms")])
def test_a_duration_beside_its_target_is_never_rounded_onto_it(seconds, limit, text):
    """QA E 10: the decode pool's TPOT of 19.99 ms read "20 ms" against a --tpot-ms 20 target: a figure beside a
    target takes the digits that keep it on its side of the target."""
    from kvplan.units import fmt_seconds

    assert fmt_seconds(seconds, limit) == text


def test_the_disagg_tables_show_a_tpot_under_its_target_under_it(tmp_path):
    """kvplan disagg's decode pool (Llama-3.1-8B on H100, 10 req/s, TPOT <= 20 ms) runs at a TPOT just under the
    target: the report's table and the CLI's show it under the target, as the JSON's figure is."""
    import json

    from typer.testing import CliRunner

    from kvplan.cli.app import app

    args = ["-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--rate", "10", "--isl", "4096", "--osl", "512",
            "--ttft-ms", "500", "--tpot-ms", "20"]
    got = CliRunner().invoke(app, ["disagg", *args, "--json"])
    tpot = json.loads(got.stdout)["decode"]["tpot_ms"]
    assert 19.9 < tpot < 20
    shown = CliRunner().invoke(app, ["disagg", *args], env={"COLUMNS": "200"}).stdout
    assert f"{tpot:.2f} ms" in shown
    out = tmp_path / "r.md"
    assert CliRunner().invoke(app, ["report", *args, "-o", str(out)]).exit_code == 0
    decode = next(line for line in out.read_text().splitlines() if line.startswith("| decode |"))
    assert f"{tpot:.2f} ms" in decode and "| 20 ms |" not in decode


@pytest.mark.slow  # builds whole reports' charts, for every engine / twice: the slow tier (CI)
def test_a_long_report_shows_progress_per_model(monkeypatch):
    """Charts take seconds per model: the CLI's bar (stderr, a terminal only) advances once per model built."""
    from kvplan.planning.report_data import build_report
    from kvplan.report.document import build_blocks

    seen: list[int] = []
    rep = build_report(["llama-2-7b", "qwen3-8b"], gpus=["H100-SXM"])
    blocks = build_blocks(rep, seen.append)
    assert seen == [1, 1] and blocks == build_blocks(rep)


def _cells(html: str) -> list[list[str]]:
    """The rows of an HTML table, each a list of its cell texts (stdlib parser)."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = Rows()
    parser.feed(html)
    return parser.rows


def test_search_sweep_and_check_have_notebook_tables():
    from kvplan.planning.check import run_check
    from kvplan.planning.capacity.search import search
    from kvplan.planning.sweep import sweep

    r = search("llama-3.1-8b", max_model_len=8192, concurrency=8, gpus=["H100-SXM", "L4"], sort="cost")
    rows = _cells(r._repr_html_())
    assert [row[0] for row in rows[1:]] == [o.gpu for o in r.options] and rows[0][-2:] == ["$/h", "$/Mtok"]
    assert f"{r.options[0].price_per_hour:,.2f}" in rows[1] and "runpod.io/pricing" in r._repr_html_()
    s = sweep("llama-3-8b", batch="1,2", seq_len="1024,2048")
    rows = _cells(s._repr_html_())
    assert rows[0] == list(s.columns) and len(rows) == 1 + len(s) == 5
    first = next(iter(s))
    assert rows[1][s.columns.index("kv_cache.total_bytes")] == f"{first['kv_cache.total_bytes']:,}"
    big = sweep("llama-3-8b", batch="1..512+1", seq_len="1024,2048")
    assert len(_cells(big._repr_html_())) == 1 + 100 and f"first 100 of {len(big):,} rows" in big._repr_html_()
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    c = run_check(str(root / "kvplan.toml"), cwd=root)
    rows = _cells(c._repr_html_())
    assert len(rows) == 1 + len(c.rows) and rows[0][-1] == "verdict"
    assert f"{c.failed} failed" in c._repr_html_()
    from kvplan.planning.disagg import disagg

    d = disagg("llama-3-8b", gpu="L40S", rate=5, isl=4096, osl=512, ttft_ms=1000, tpot_ms=40)
    rows = _cells(d._repr_html_())
    assert [row[0] for row in rows[1:]] == ["prefill", "decode"] and rows[2][4] == str(d.decode.gpus)


def test_charts_keep_their_natural_size_and_the_page_states_the_visible_total(html_report):
    import re

    _, text, _ = html_report
    svgs = re.findall(r"<svg [^>]*>", text)
    assert svgs and all(re.search(r'style="max-width: min\(100%, \d+px\)"', s) for s in svgs)
    for s in svgs:  # the cap is the viewBox's width in points as pixels (1 pt = 4/3 px): 10-pt text at 13.3 px
        width_pt = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', s)[1])
        assert int(re.search(r"min\(100%, (\d+)px\)", s)[1]) == round(width_pt * 4 / 3)
    visible = __import__("kvplan").cost.hardware.load_gpu("H100-SXM").visible_memory_bytes
    assert f"{visible:,} B as torch sees it" in text and "--seq-len" not in text


def test_report_disagg_section_is_kvplan_disagg(cli, tmp_path):
    """--rate --isl --osl --ttft-ms --tpot-ms add kvplan disagg's section (HTML and Markdown): both pools as
    disagg() computes them, the exact hand-over per request and the link it needs; a partial set exits 2."""
    from kvplan.planning.disagg import disagg
    from kvplan.report.document import build_blocks

    targets = dict(rate=10, isl=2048, osl=256, ttft_ms=2000, tpot_ms=50)
    rep = build_report(["llama-3.1-70b"], gpus=["H100-SXM"], tp=(4,), max_model_len=4096, disagg=targets)
    r = disagg("llama-3.1-70b", gpu="H100-SXM", **targets)
    assert rep.models[0].disagg == r
    blocks = build_blocks(rep)
    table = next(b.table for b in blocks if b.kind == "table" and b.table.id.endswith("-disagg-table"))
    cells = {row[0].text: row for row in table.rows}
    assert cells["prefill"][5].value == r.prefill.gpus and cells["decode"][4].value == r.decode.replicas
    assert any("671,088,640 B" in b.text for b in blocks if b.kind == "p")
    out = tmp_path / "r.html"
    args = ("report", "-m", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "4096")
    code, _, err = cli(*args, "--rate", "10", "--isl", "2048", "--osl", "256", "--ttft-ms", "2000", "--tpot-ms",
                       "50", "-o", str(out))
    assert code == 0, err
    html = out.read_text()
    assert "Disaggregated serving" in html and "671,088,640 B" in html
    code, _, err = cli(*args, "--rate", "10", "-o", str(out))
    assert code == 2 and "--isl" in err


def _weights_sum(line: str) -> tuple[int, int]:
    """(the terms of ``weights = ... = N B`` evaluated, N): each term ``P params x b B`` or ``N B what``; text in
    parentheses names a term and is left out."""
    import re
    from fractions import Fraction

    lhs, total = re.fullmatch(r"weights(?: \([^)]*\))? = (.*) = ([\d,]+) B", line).groups()
    while (bare := re.sub(r"\([^()]*\)", "", lhs)) != lhs:
        lhs = bare
    value = Fraction(0)
    for term in lhs.split(" + "):
        m = re.fullmatch(r"([\d,]+) params x ([\d.]+) B", term.strip()) or re.fullmatch(r"([\d,]+) B( [a-z_]+)?",
                                                                                       term.strip())
        assert m, (term, line)
        n = int(m[1].replace(",", ""))
        value += n * Fraction(m[2]) if "params" in term else n
    return value, int(total.replace(",", ""))


@pytest.mark.parametrize("name, engine, named", [
    ("gpt-oss-20b", "sglang", "mxfp4 (MoE experts"), ("qwen3-8b-awq", "sglang", "awq int4"),
    ("deepseek-v3-fp8", "vllm", "fp8 (block 128x128"), ("llama-3-8b", "sglang", "params x 2 B (bf16)"),
    ("deepseek-v3", "hf-dynamic", "x 4 B (fp32"),  # transformers keeps the MoE router in float32
])
def test_the_weights_formula_adds_up_and_names_the_quantization(name, engine, named):
    """`weights = 20,914,757,184 params x bf16 = 14,678,736,000 B` was false for a quantized card (20.9e9 x 2 B is
    41.8 GB): the line now adds up, term by term, to the estimate's bytes and names the checkpoint's format."""
    from kvplan.report.document import formulas

    rep = build_report([name], gpus=["H100-SXM"], engine=engine)
    line = next(f for f in formulas(rep, rep.models[0]) if f.startswith("weights ("))
    value, total = _weights_sum(line)
    assert value == total == estimate(name, seq_len=8192, engine=engine, gpu="H100-SXM").weights.bytes, line
    assert named in line


def test_the_weights_formula_counts_fp8_kv_scales():
    from kvplan.report.document import weights_equation

    w = estimate("llama-3-8b", seq_len=16, engine="vllm", kv_dtype="fp8").weights
    line = weights_equation(w)
    assert w.kv_scale_bytes and "B (fp8 KV scales)" in line and _weights_sum(line) == (w.bytes, w.bytes)


@pytest.mark.parametrize("name, stored", [
    ("gpt-oss-20b", "mxfp4 (MoE experts: e2m1 values + an e8m0 scale per 32), the rest bf16"),
    ("qwen3-8b-awq", "awq int4 (group 128), the rest fp16"), ("llama-3-8b", "bf16")])
def test_the_plans_weights_row_names_the_quantization(name, stored):
    """`kvplan plan -m gpt-oss-20b`'s weights row said "bf16" for MXFP4 experts."""
    import io

    from rich.console import Console

    from kvplan.planning.capacity import plan
    from kvplan.report.plan import render_plan

    p = plan(name, gpu="H100-SXM", max_model_len=8192)
    assert p.per_gpu.weights_format == stored
    out = io.StringIO()
    render_plan(p, Console(file=out, width=400))
    row = next(line for line in out.getvalue().splitlines() if "- weights" in line)
    assert f"layers), {stored}; + rotary cache" in row


@pytest.mark.parametrize("engine, caps", [("sglang", False), ("trtllm", False), ("vllm", True), ("hf-dynamic", True)])
def test_the_kv_curve_text_follows_the_engines_window_rule(engine, caps):
    """SGLang's estimate counts gpt-oss's sliding layers in full: its report said they stop growing at their window
    beside a table that grows linearly; and the formulas printed two identical `KV cache = 1 seq x 12 layers` lines
    without saying which group is which."""
    from kvplan.report.document import _kv_curve, formulas

    rep = build_report(["gpt-oss-20b"], gpus=["H100-SXM"], engine=engine)
    m = rep.models[0]
    text = " ".join(b.text for b in _kv_curve(rep, m) if b.kind == "p")
    assert ("Sliding-window layers stop growing at their window" in text) == caps, text
    assert ("holds every token of the sliding-window layers too" in text) == (not caps), text
    first, last = (m.kv_lengths[i] for i in (0, -1))
    curve = m.kv_curve[m.estimate.kv_cache.dtype]
    assert (curve[-1] * first == curve[0] * last) == (not caps)  # the table beside it: linear, or bent at the window
    kv = [f for f in formulas(rep, m) if f.startswith("KV cache")]
    assert [f.split(" = ")[0] for f in kv] == ["KV cache (sliding window 128)", "KV cache (full attention)"]


def test_estimate_table_compares_with_the_visible_total(tmp_path, cli):
    """Where no layout holds the weights the report falls back to the estimate's table: its GPU memory is the total
    the engines start from (an H200's 139.8 GiB as torch sees it, which the verdict beside it quotes), not the
    datasheet's 141 GB (131.3 GiB); the chart's free part and "fits" compare with that total."""
    from kvplan.cost.hardware import load_gpu

    out = tmp_path / "r.html"
    code, _, err = cli("report", "-m", "deepseek-v3", "--gpu", "H200,RTX-4090", "--max-model-len", "8192",
                       "-o", str(out))
    assert code == 0, err
    doc, text = Doc(), out.read_text()
    doc.feed(text)
    rows = {r[0][1]: r for r in doc.tables["deepseek-v3-memory-table"][1:]}
    assert set(rows) == {"H200", "RTX-4090"}
    for name, row in rows.items():
        gpu = load_gpu(name)
        assert gpu.visible_memory_bytes is not None and gpu.visible_memory_bytes != gpu.memory_bytes
        assert int(row[1][0]) == gpu.visible_memory_bytes and row[5][1] == "no"
    assert "which holds 139.8 GiB" in text


def test_a_refused_or_failed_markdown_report_leaves_no_charts(tmp_path, cli, monkeypatch):
    """docs/errors.md: nothing written half-way. The charts folder was renamed into place before the .md target was
    checked or written: a symlink target (exit 2) and a full device left X_charts/ behind; a name that is not UTF-8
    ended in an internal error (exit 3) with the charts written (QA E 7)."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.md").write_text("orig")
    os.symlink("keep.md", tmp_path / "link.md")
    args = ("report", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "-o")
    code, out, err = cli(*args, "link.md")
    assert code == 2 and "symbolic link" in err and not (tmp_path / "link_charts").exists()
    if os.path.exists("/dev/full"):
        os.symlink("/dev/full", tmp_path / "full.md")
        code, out, err = cli(*args, "full.md")
        assert code == 2 and err.startswith("error: full.md: ") and not (tmp_path / "full_charts").exists()
    bad = os.fsdecode(b"bad\xff.md")
    code, out, err = cli(*args, bad)
    assert code == 2 and err.startswith("error: --output: ") and "UTF-8" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["keep.md", "link.md"]
                                                                + (["full.md"] if os.path.exists("/dev/full") else []))
    assert (tmp_path / "keep.md").read_text() == "orig"
