"""Public on-demand prices in the catalog, `kvplan plan --sort cost|gpus|latency` and the cost of a million output
tokens at the decode bound (issue 21, item 6; issue 20, the catalog)."""

from __future__ import annotations

import pytest

from kvplan.cost.hardware import load_gpu
from kvplan.planning.capacity.search import search


@pytest.fixture(scope="module")
def by_cost():
    return search("llama-3.1-70b", max_model_len=8192, concurrency=16, sort="cost")


def test_sort_cost_ranks_by_gpus_times_price_with_the_source(by_cost):
    priced = [o for o in by_cost.options if o.price_per_hour is not None]
    assert len(priced) >= 5 and by_cost.sort == "cost"
    assert [o.price_per_hour for o in priced] == sorted(o.price_per_hour for o in priced)
    assert by_cost.options[:len(priced)] == priced  # the GPUs without a public price come last
    for o in priced:  # replicas x GPUs x the catalog's price per GPU-hour
        gpu = load_gpu(o.gpu)
        assert o.price_per_gpu_hour == gpu.price_per_hour_usd
        assert o.price_per_hour == pytest.approx(o.tp * o.pp * o.dp * gpu.price_per_hour_usd)
        assert o.price_source == gpu.price_source and o.price_date == gpu.price_date


def test_cost_per_million_tokens_is_price_over_the_decode_bound(by_cost):
    for o in by_cost.options:
        if o.price_per_hour is None:
            assert o.usd_per_million_output_tokens is None
            continue
        tokens_per_hour = 16 / (o.tpot_ms / 1e3) * 3600  # every request a token per decode step
        assert o.usd_per_million_output_tokens == pytest.approx(o.price_per_hour / tokens_per_hour * 1e6)


def test_sort_gpus_and_latency():
    gpus = search("llama-3.1-8b", max_model_len=8192, concurrency=8, gpus=["H100-SXM", "A100-80GB", "L4", "B200"])
    assert [o.num_gpus for o in gpus.options] == sorted(o.num_gpus for o in gpus.options) and gpus.sort == "gpus"
    fast = search("llama-3.1-8b", max_model_len=8192, concurrency=8, gpus=["H100-SXM", "A100-80GB", "L4", "B200"],
                  sort="latency")
    assert [o.tpot_ms for o in fast.options] == sorted(o.tpot_ms for o in fast.options)
    assert fast.options[0].gpu == "B200"  # 8 TB/s: the shortest decode step


def test_a_gpu_file_price_replaces_the_catalogs_and_reorders(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text("gpus:\n  H100-SXM:\n    price_per_hour_usd: 0.5\n")
    r = search("llama-3.1-70b", max_model_len=8192, concurrency=16, sort="cost", gpu_file=str(path),
               gpus=["H100-SXM", "A100-80GB"])
    assert r.options[0].gpu == "H100-SXM" and r.options[0].price_source == "--gpu-file"
    assert r.options[0].price_per_hour == pytest.approx(0.5 * r.options[0].num_gpus)


def test_cli_sort_cost_shows_prices_with_their_source(cli, cli_json):
    args = ("plan", "--max-model-len", "8192", "--concurrency", "16", "-m", "llama-3.1-70b", "--sort", "cost")
    code, out, _ = cli(*args)
    assert code == 0 and "$/h" in out and "https://www.runpod.io/pricing" in out and "per GPU-hour" in out
    d = cli_json(*args)
    assert d["sort"] == "cost" and d["options"][0]["price_source"].startswith("https://")
    code, _, err = cli(*args[:-1], "cheapest")
    assert code == 2 and "--sort" in err and "cost" in err
    code, _, err = cli("plan", "--max-model-len", "8192", "--gpu", "H100-SXM", "-m", "llama-3.1-8b", "--sort", "cost")
    assert code == 2 and "--sort" in err


def test_a_plan_with_a_concurrency_costs_its_gpus_and_a_million_tokens():
    from kvplan.planning.capacity import plan

    p = plan("llama-3.1-70b", gpu="H100-SXM", tp=4, max_model_len=8192, concurrency=16)
    lat = p.latency
    assert lat.price_per_hour == pytest.approx(4 * load_gpu("H100-SXM").price_per_hour_usd)
    assert lat.usd_per_million_output_tokens == pytest.approx(lat.price_per_hour / (16 / (lat.tpot_ms / 1e3) * 3600)
                                                              * 1e6)
    assert f"${lat.price_per_hour:,.2f}/h" in p._repr_html_()
    assert plan("llama-3-8b", gpu="A40", max_model_len=2048, concurrency=4).latency.price_per_hour is None  # unpriced
