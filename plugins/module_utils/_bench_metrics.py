# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A serving benchmark's figures, from the timings of its requests, and what a token costs.

The definitions are those of SGLang's own benchmark (sglang/benchmark/serving.py, 0.5.23,
calculate_metrics): time to first token (TTFT) is the time to the first chunk that carries text;
inter-token latency (ITL) the gaps between the chunks that follow; time per output token (TPOT) a
request's (latency - TTFT) / (output tokens - 1); output throughput the level's output tokens over
its duration; percentiles interpolate linearly, as numpy.percentile does. The speed a user sees,
"tok/s per user" in the deployment recipe's headline, is 1000 / median TPOT in ms.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """numpy.percentile's default (linear) interpolation; 0.0 for no values, as SGLang's `or 0`."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _ms(values: Iterable[float]) -> dict[str, float]:
    seconds = list(values)
    out = {"mean": round(_mean(seconds) * 1000, 2)}
    for q in PERCENTILES:
        out[f"p{q}"] = round(percentile(seconds, q) * 1000, 2)
    return out


def busy_throughput(samples: Sequence[Mapping[str, Any]], window: tuple[float, float]) -> float:
    """Output tok/s while every client was busy (window: its start and end on the samples' clock),
    without the ramp-down at the level's end when the last requests run alone. Each chunk's arrival
    is start + ttft + the gaps before it; a chunk counts for output_tokens / chunks tokens."""
    begin, end = window
    if end <= begin:
        return 0.0
    tokens = 0.0
    for s in samples:
        if not s.get("ok") or "start" not in s:
            continue
        chunks = len(s.get("itl", [])) + 1
        at = s["start"] + s["ttft"]
        arrivals = [at]
        for gap in s.get("itl", []):
            at += gap
            arrivals.append(at)
        tokens += sum(1 for t in arrivals if begin <= t <= end) * s["output_tokens"] / chunks
    return tokens / (end - begin)


def level_metrics(
    concurrency: int,
    samples: Sequence[Mapping[str, Any]],
    duration: float,
    window: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One concurrency level's figures. A sample: ok, error, input_tokens, output_tokens, start,
    ttft, latency (seconds) and itl (a list of seconds)."""
    done = [s for s in samples if s.get("ok")]
    output = sum(int(s["output_tokens"]) for s in done)
    inputs = sum(int(s["input_tokens"]) for s in done)
    cached = sum(int(s.get("cached_tokens") or 0) for s in done)
    tpots = [(s["latency"] - s["ttft"]) / (s["output_tokens"] - 1) for s in done if s["output_tokens"] > 1]
    itls = [gap for s in done for gap in s.get("itl", [])]
    tpot = _ms(tpots)
    errors = [str(s.get("error")) for s in samples if not s.get("ok")]
    return {
        "concurrency": concurrency,
        "requests": len(samples),
        "completed": len(done),
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "duration_s": round(duration, 3),
        "input_tokens": inputs,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "cached_input_share": round(cached / inputs, 4) if inputs else 0.0,
        "mean_input_tokens": round(inputs / len(done), 1) if done else 0.0,
        "mean_output_tokens": round(output / len(done), 1) if done else 0.0,
        "request_throughput": round(len(done) / duration, 3) if duration > 0 else 0.0,
        "input_throughput": round(inputs / duration, 2) if duration > 0 else 0.0,
        "cached_input_throughput": round(cached / duration, 2) if duration > 0 else 0.0,
        "output_throughput": round(output / duration, 2) if duration > 0 else 0.0,
        "busy_output_throughput": round(busy_throughput(samples, window), 2) if window else None,
        "per_user_tps": round(1000 / tpot["p50"], 2) if tpot["p50"] > 0 else 0.0,
        "ttft_ms": _ms(s["ttft"] for s in done),
        "itl_ms": _ms(itls),
        "tpot_ms": tpot,
        "e2e_ms": _ms(s["latency"] for s in done),
        **({"turns": by_turn(done)} if any("turn" in s for s in done) else {}),
    }


def by_turn(done: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Conversations' requests by their place in the conversation: how the prompt grows and how
    much of it the server found cached, turn by turn (the first turn is 0)."""
    turns: dict[int, list[Mapping[str, Any]]] = {}
    for s in done:
        turns.setdefault(int(s.get("turn") or 0), []).append(s)
    return [
        {
            "turn": turn,
            "requests": len(group),
            "mean_input_tokens": round(_mean([s["input_tokens"] for s in group]), 1),
            "mean_cached_input_tokens": round(_mean([s.get("cached_tokens") or 0 for s in group]), 1),
            "ttft_ms_p50": round(percentile([s["ttft"] for s in group], 50) * 1000, 2),
        }
        for turn, group in sorted(turns.items())
    ]


def operating_point(levels: Sequence[Mapping[str, Any]], min_user_tps: float) -> Mapping[str, Any] | None:
    """The level of most output throughput among those whose users still get min_user_tps each
    (the throughput the fleet can sell at that speed); None when no level is that fast."""
    fast = [lv for lv in levels if lv["completed"] and lv["per_user_tps"] >= min_user_tps]
    return max(fast, key=lambda lv: lv["output_throughput"]) if fast else None


def cost(point: Mapping[str, Any], gpus: int, gpu_hour_usd: float, hosted: Mapping[str, float]) -> dict[str, Any]:
    """$ per 1M tokens at an operating point, with the fleet busy all hour, at the point's own mix
    of input the servers computed, input they found in their prefix cache, and output.

    - output_only: the whole hour's cost charged to output tokens;
    - output, input and cached input: the hour's cost split in the hosted price list's ratios
      (`hosted`'s `input`, `cached_input` and `output`, $ per 1M), so that each compares with
      the hosted price line by line;
    - break_even_utilisation: the share of this capacity a team must use for the hosted bill of the
      same tokens to equal the fleet's cost (above 1: the hosted service is cheaper at any load).
    """
    hourly = gpus * gpu_hour_usd
    out_hour = point["output_throughput"] * 3600
    cached_hour = point.get("cached_input_throughput", 0.0) * 3600
    fresh_hour = point["input_throughput"] * 3600 - cached_hour
    ratio = hosted["input"] / hosted["output"]
    cached_ratio = hosted.get("cached_input", hosted["input"]) / hosted["output"]
    weighted = out_hour + ratio * fresh_hour + cached_ratio * cached_hour
    output = hourly / weighted * 1e6 if weighted else math.inf
    hosted_hour = (
        out_hour * hosted["output"]
        + fresh_hour * hosted["input"]
        + cached_hour * hosted.get("cached_input", hosted["input"])
    ) / 1e6
    tokens = out_hour + fresh_hour + cached_hour
    return {
        "gpus": gpus,
        "gpu_hour_usd": gpu_hour_usd,
        "fleet_hour_usd": round(hourly, 4),
        "concurrency": point["concurrency"],
        "output_throughput": point["output_throughput"],
        "input_throughput": point["input_throughput"],
        "cached_input_throughput": point.get("cached_input_throughput", 0.0),
        "per_user_tps": point["per_user_tps"],
        "mix": {
            "input": round(fresh_hour / tokens, 4) if tokens else 0.0,
            "cached_input": round(cached_hour / tokens, 4) if tokens else 0.0,
            "output": round(out_hour / tokens, 4) if tokens else 0.0,
        },
        "usd_per_1m_output_only": round(hourly / out_hour * 1e6, 4) if out_hour else None,
        "usd_per_1m_output": round(output, 4),
        "usd_per_1m_input": round(output * ratio, 4),
        "usd_per_1m_cached_input": round(output * cached_ratio, 4),
        "hosted_usd_per_1m_output": hosted["output"],
        "hosted_usd_per_1m_input": hosted["input"],
        "hosted_usd_per_1m_cached_input": hosted.get("cached_input", hosted["input"]),
        "hosted_hour_usd_at_capacity": round(hosted_hour, 4),
        "break_even_utilisation": round(hourly / hosted_hour, 4) if hosted_hour else None,
    }


def recipe_comparison(
    levels: Sequence[Mapping[str, Any]], recipe: Mapping[str, Any], gpus: int
) -> list[dict[str, Any]]:
    """The recipe's headline against the measurement, line by line: peak output throughput (fleet
    and per GPU) and the throughput at the recipe's per-user speed."""
    done = [lv for lv in levels if lv["completed"]]
    peak = max((lv["output_throughput"] for lv in done), default=0.0)
    at_speed = operating_point(done, recipe["per_user_tps"])
    per_gpu = recipe["output_tps"] / recipe["gpus"]
    rows = [
        ("maximum output throughput (tok/s)", recipe["output_tps"], peak),
        ("output throughput per GPU (tok/s)", per_gpu, peak / gpus if gpus else 0.0),
        (f"output throughput at >= {recipe['per_user_tps']} tok/s per user", None,
         at_speed["output_throughput"] if at_speed else 0.0),
        ("fastest per-user speed (tok/s)", recipe["per_user_tps"],
         max((lv["per_user_tps"] for lv in done), default=0.0)),
    ]  # fmt: skip
    return [
        {"figure": name, "recipe": want, "measured": round(got, 2),
         "ratio": round(got / want, 3) if want else None}
        for name, want, got in rows
    ]  # fmt: skip
