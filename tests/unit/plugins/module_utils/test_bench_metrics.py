"""The serving benchmark's figures: SGLang's definitions, the operating point and the cost per token."""

from __future__ import annotations

import random

import pytest

from ansible_collections.glm.fleet.plugins.module_utils._bench_metrics import (
    busy_throughput,
    cost,
    level_metrics,
    operating_point,
    percentile,
    recipe_comparison,
)
from ansible_collections.glm.fleet.plugins.module_utils._bench_report import markdown, summary

LYCEUM = {"input": 0.20, "cached_input": 0.05, "output": 0.50}


def test_percentiles_interpolate_as_numpy_does() -> None:
    numpy = pytest.importorskip("numpy")
    rng = random.Random(7)  # noqa: S311 - test data
    for size in (1, 2, 3, 10, 101):
        values = [rng.uniform(0, 5) for _value in range(size)]
        for q in (0, 50, 90, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))
    assert percentile([], 50) == 0.0


def sample(ttft: float, latency: float, out: int, inp: int = 100, ok: bool = True) -> dict:
    gap = (latency - ttft) / (out - 1) if out > 1 else 0.0
    return {"ok": ok, "error": None if ok else "HTTP 503: busy", "input_tokens": inp, "output_tokens": out,
            "ttft": ttft, "latency": latency, "itl": [gap] * (out - 1)}  # fmt: skip


def test_a_level_counts_tokens_of_completed_requests_over_its_duration() -> None:
    samples = [sample(0.1, 2.1, 41), sample(0.2, 4.2, 41), sample(0.0, 0.0, 0, ok=False)]
    lv = level_metrics(2, samples, duration=5.0)
    assert (lv["requests"], lv["completed"], lv["failed"]) == (3, 2, 1)
    assert lv["first_error"] == "HTTP 503: busy"
    assert lv["output_throughput"] == pytest.approx(82 / 5)
    assert lv["input_throughput"] == pytest.approx(200 / 5)
    # TPOT: (latency - ttft) / (output - 1): 50 ms and 100 ms; median 75 ms, so 13.33 tok/s per user.
    assert lv["tpot_ms"]["p50"] == pytest.approx(75)
    assert lv["per_user_tps"] == pytest.approx(1000 / 75, abs=0.01)
    assert lv["ttft_ms"]["p50"] == pytest.approx(150)
    assert lv["itl_ms"]["p50"] == pytest.approx(75)


def test_a_level_where_every_request_failed_has_no_speed() -> None:
    lv = level_metrics(4, [sample(0, 0, 0, ok=False)] * 4, duration=1.0)
    assert (lv["completed"], lv["output_throughput"], lv["per_user_tps"]) == (0, 0.0, 0.0)


LEVELS = [
    {"concurrency": 1, "completed": 4, "output_throughput": 150.0, "input_throughput": 150.0, "per_user_tps": 150.0},
    {
        "concurrency": 16,
        "completed": 64,
        "output_throughput": 2200.0,
        "input_throughput": 2200.0,
        "per_user_tps": 141.0,
    },
    {
        "concurrency": 64,
        "completed": 256,
        "output_throughput": 2600.0,
        "input_throughput": 2600.0,
        "per_user_tps": 40.0,
    },
]


def test_the_operating_point_is_the_most_throughput_still_that_fast_per_user() -> None:
    assert operating_point(LEVELS, 140)["concurrency"] == 16
    assert operating_point(LEVELS, 10)["concurrency"] == 64
    assert operating_point(LEVELS, 151) is None


def test_cost_per_million_tokens_splits_the_hour_in_the_hosted_ratio() -> None:
    c = cost(LEVELS[1], gpus=4, gpu_hour_usd=4.0, hosted=LYCEUM)
    hour_out, hour_in = 2200 * 3600, 2200 * 3600
    assert c["fleet_hour_usd"] == 16.0
    assert c["usd_per_1m_output_only"] == pytest.approx(16 / hour_out * 1e6, abs=1e-4)
    # 16 $/h = p_out * out + 0.4 * p_out * in
    p_out = 16 / (hour_out + 0.4 * hour_in) * 1e6
    assert c["usd_per_1m_output"] == pytest.approx(p_out, abs=1e-4)
    assert c["usd_per_1m_input"] == pytest.approx(0.4 * p_out, abs=1e-4)
    assert p_out * hour_out / 1e6 + 0.4 * p_out * hour_in / 1e6 == pytest.approx(16)
    hosted_hour = (hour_out * 0.5 + hour_in * 0.2) / 1e6
    assert c["hosted_hour_usd_at_capacity"] == pytest.approx(hosted_hour, abs=1e-4)
    assert c["break_even_utilisation"] == pytest.approx(16 / hosted_hour, abs=1e-4)


def test_cost_at_a_cached_mix_splits_the_hour_in_the_three_hosted_prices() -> None:
    # Claude Code's shape: 1,000 output tok/s, 20,000 input tok/s of which 18,000 came from the cache.
    point = {**LEVELS[1], "output_throughput": 1000.0, "input_throughput": 20000.0, "cached_input_throughput": 18000.0}
    c = cost(point, gpus=4, gpu_hour_usd=4.0, hosted=LYCEUM)
    out, fresh, cached = 1000 * 3600, 2000 * 3600, 18000 * 3600
    # 16 $/h = p_out * out + 0.4 * p_out * fresh + 0.1 * p_out * cached
    p_out = 16 / (out + 0.4 * fresh + 0.1 * cached) * 1e6
    assert c["usd_per_1m_output"] == pytest.approx(p_out, abs=1e-4)
    assert c["usd_per_1m_input"] == pytest.approx(0.4 * p_out, abs=1e-4)
    assert c["usd_per_1m_cached_input"] == pytest.approx(0.1 * p_out, abs=1e-4)
    assert (p_out * out + 0.4 * p_out * fresh + 0.1 * p_out * cached) / 1e6 == pytest.approx(16)
    hosted_hour = (out * 0.5 + fresh * 0.2 + cached * 0.05) / 1e6
    assert c["hosted_hour_usd_at_capacity"] == pytest.approx(hosted_hour, abs=1e-4)
    assert c["break_even_utilisation"] == pytest.approx(16 / hosted_hour, abs=1e-4)
    assert c["mix"] == {"input": round(2 / 21, 4), "cached_input": round(18 / 21, 4), "output": round(1 / 21, 4)}
    # Priced as if none of it were cached, the same tokens would cost far more hosted.
    uncached = cost({**point, "cached_input_throughput": 0.0}, gpus=4, gpu_hour_usd=4.0, hosted=LYCEUM)
    assert uncached["hosted_hour_usd_at_capacity"] > 2 * c["hosted_hour_usd_at_capacity"]


def test_conversations_are_reported_turn_by_turn() -> None:
    samples = [
        {"ok": True, "input_tokens": 1000 + 500 * turn, "cached_tokens": 400 * turn, "output_tokens": 10,
         "ttft": 0.1 + 0.01 * turn, "latency": 0.5, "itl": [0.04] * 9, "start": 0.0, "session": s, "turn": turn}
        for s in range(2) for turn in range(3)
    ]  # fmt: skip
    level = level_metrics(2, samples, 3.0)
    assert level["input_tokens"] == 2 * (1000 + 1500 + 2000)
    assert level["cached_input_tokens"] == 2 * (0 + 400 + 800)
    assert level["cached_input_share"] == round(2400 / 9000, 4)
    assert level["cached_input_throughput"] == 800.0
    rows = [(t["turn"], t["requests"], t["mean_input_tokens"], t["mean_cached_input_tokens"]) for t in level["turns"]]
    assert rows == [(0, 2, 1000.0, 0.0), (1, 2, 1500.0, 400.0), (2, 2, 2000.0, 800.0)]
    assert "turns" not in level_metrics(2, [{k: v for k, v in s.items() if k != "turn"} for s in samples], 3.0)


def test_the_recipe_is_compared_line_by_line_and_per_gpu() -> None:
    rows = {
        r["figure"]: r for r in recipe_comparison(LEVELS, {"output_tps": 2591, "per_user_tps": 140, "gpus": 4}, gpus=8)
    }
    assert rows["maximum output throughput (tok/s)"]["measured"] == 2600.0
    assert rows["output throughput per GPU (tok/s)"]["recipe"] == pytest.approx(2591 / 4)
    assert rows["output throughput per GPU (tok/s)"]["measured"] == 325.0
    assert rows["output throughput at >= 140 tok/s per user"]["measured"] == 2200.0
    assert rows["fastest per-user speed (tok/s)"]["ratio"] == pytest.approx(150 / 140, abs=1e-3)


def test_busy_throughput_counts_the_tokens_that_arrived_while_every_client_was_busy() -> None:
    # Two requests of 5 tokens: one token a second from t=11 and from t=13; the window is 10-14.
    first = {**sample(1.0, 5.0, 5), "start": 10.0}
    second = {**sample(1.0, 5.0, 5), "start": 12.0}
    assert [first["start"] + first["ttft"] + sum(first["itl"][:k]) for k in range(5)] == [11, 12, 13, 14, 15]
    # 4 of the first's tokens (11-14) and 2 of the second's (13, 14) in 4 seconds.
    assert busy_throughput([first, second], (10.0, 14.0)) == pytest.approx(6 / 4)
    assert level_metrics(2, [first, second], 7.0, (10.0, 14.0))["busy_output_throughput"] == pytest.approx(1.5)
    assert level_metrics(2, [first, second], 7.0)["busy_output_throughput"] is None


def test_the_report_says_so_when_no_level_is_fast_enough_to_price() -> None:
    report = {
        "model": "m", "targets": ["https://gw"], "via": "gateway", "gpus": 4,
        "benchmark": {"input_tokens": 10, "output_tokens": 10, "requests_per_client": 1},
        "levels": [{**LEVELS[2], "requests": 1, "failed": 0, "ttft_ms": {"p50": 1, "p95": 2, "p99": 3},
                    "itl_ms": {"p50": 1, "p95": 2, "p99": 3}}],
        "recipe_comparison": [], "hosted": {"name": "Lyceum"}, "cost_min_user_tps": 140, "cost": None,
    }  # fmt: skip
    assert "No level reached 140 tok/s per user: no operating point to price." in markdown(report)
    assert summary(report)[-1] == "synthetic: no level reached 140 tok/s per user: no cost computed"
