# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving benchmark's report: its Markdown, and its chart as a PNG (matplotlib, on the
controller) whose series are also named in the PNG's own metadata."""

from __future__ import annotations

import io
from typing import Any, Mapping

SERIES = ("fleet", "recipe", "ttft_p50", "ttft_p95", "itl_p50", "itl_p95")


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(report: Mapping[str, Any]) -> str:
    bench = report["benchmark"]
    generator = report.get("calibration", {}).get("load_generator") or (report.get("claude_code") or {}).get(
        "calibration", {}
    ).get("load_generator", "builtin")
    lines = [
        "# Serving benchmark",
        "",
        f"{report['model']} through {', '.join(report['targets'])} ({report['via']}); {report['gpus']} GPUs. "
        f"Load generator: {generator}.",
    ]
    if report["levels"]:
        lines += [
            "",
            "## Synthetic profile: throughput and latency per level",
            "",
            f"{bench['input_tokens']} tokens in, {bench['output_tokens']} out per request, no prefix shared; "
            f"{bench['requests_per_client']} requests per client at each level.",
            "",
            _row(["users", "requests", "failed", "output tok/s", "input tok/s", "tok/s per user",
                  "TTFT p50 ms", "TTFT p95 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p95 ms", "ITL p99 ms"]),
            _row(["---:"] * 12),
        ]  # fmt: skip
        for lv in report["levels"]:
            ttft, itl = lv["ttft_ms"], lv["itl_ms"]
            lines.append(_row([lv["concurrency"], lv["requests"], lv["failed"], lv["output_throughput"],
                               lv["input_throughput"], lv["per_user_tps"], ttft["p50"], ttft["p95"], ttft["p99"],
                               itl["p50"], itl["p95"], itl["p99"]]))  # fmt: skip
        lines += [
            "",
            "## Against the deployment recipe (4x B200: 2,591 tok/s, 140 tok/s per user)",
            "",
            _row(["figure", "recipe", "measured", "measured / recipe"]),
            _row(["---", "---:", "---:", "---:"]),
        ]
        for c in report["recipe_comparison"]:
            lines.append(_row([c["figure"], c["recipe"] if c["recipe"] is not None else "-", c["measured"],
                               c["ratio"] if c["ratio"] is not None else "-"]))  # fmt: skip
        lines += ["", "## Cost per million tokens", ""]
        lines += _cost_lines(report, report.get("cost"))
    claude = report.get("claude_code")
    if claude:
        lines += _claude_code_lines(report, claude)
    lines += ["", "Chart: bench-serving.png (fleet output tok/s against tok/s per user, the recipe's point marked; "
              "TTFT and ITL per level).", ""]  # fmt: skip
    return "\n".join(lines)


def _cost_lines(report: Mapping[str, Any], cost: Mapping[str, Any] | None) -> list[str]:
    if not cost:
        return [f"No level reached {report['cost_min_user_tps']} tok/s per user: no operating point to price."]
    mix = cost["mix"]
    return [
        f"At {cost['concurrency']} users ({cost['per_user_tps']} tok/s each, {cost['output_throughput']} output "
        f"and {cost['input_throughput']} input tok/s, {cost['cached_input_throughput']} of it from the prefix cache), "
        f"{cost['gpus']} GPUs at ${cost['gpu_hour_usd']} per GPU-hour (${cost['fleet_hour_usd']} per hour), busy all "
        f"hour. The tokens' mix: {_pct(mix['input'])} input computed, {_pct(mix['cached_input'])} input from the "
        f"cache, {_pct(mix['output'])} output.",
        "",
        _row(["", "self-hosted", report["hosted"]["name"]]),
        _row(["---", "---:", "---:"]),
        _row(["$ per 1M output tokens", cost["usd_per_1m_output"], cost["hosted_usd_per_1m_output"]]),
        _row(["$ per 1M input tokens", cost["usd_per_1m_input"], cost["hosted_usd_per_1m_input"]]),
        _row(["$ per 1M cached input tokens", cost["usd_per_1m_cached_input"], cost["hosted_usd_per_1m_cached_input"]]),
        _row(["$ per 1M output tokens, all cost on output", cost["usd_per_1m_output_only"], "-"]),
        "",
        f"The hour's cost is split between input, cached input and output in the hosted prices' ratios. The same "
        f"tokens would cost ${cost['hosted_hour_usd_at_capacity']} per hour hosted; self-hosting breaks even at "
        f"{round(cost['break_even_utilisation'] * 100, 1)}% utilisation of this capacity"
        + (" (above 100%: the hosted service is cheaper at any load)." if cost["break_even_utilisation"] > 1 else "."),
    ]  # fmt: skip


def _pct(share: float) -> str:
    return f"{round(share * 100, 1)}%"


def _claude_code_lines(report: Mapping[str, Any], claude: Mapping[str, Any]) -> list[str]:
    shape = claude["benchmark"]
    lines = [
        "",
        "## Claude Code profile: conversations that grow a shared prefix",
        "",
        f"Conversations of {shape['turns']} requests: a system prompt of {shape['system_tokens']} tokens that every "
        f"conversation shares, {shape['context_tokens']} of its own, then {shape['turn_tokens']} more each turn, every "
        f"turn sending the whole conversation with the servers' answers of {shape['output_tokens']} tokens; "
        f"{shape['sessions_per_client']} conversation(s) per user at each level.",
        "",
        _row(["users", "requests", "failed", "output tok/s", "input tok/s", "cached input tok/s", "cached share",
              "tok/s per user", "TTFT p50 ms", "TTFT p95 ms", "ITL p50 ms"]),
        _row(["---:"] * 11),
    ]  # fmt: skip
    for lv in claude["levels"]:
        lines.append(_row([lv["concurrency"], lv["requests"], lv["failed"], lv["output_throughput"],
                           lv["input_throughput"], lv["cached_input_throughput"], _pct(lv["cached_input_share"]),
                           lv["per_user_tps"], lv["ttft_ms"]["p50"], lv["ttft_ms"]["p95"],
                           lv["itl_ms"]["p50"]]))  # fmt: skip
    busiest = max(claude["levels"], key=lambda lv: lv["concurrency"], default=None)
    if busiest and busiest.get("turns"):
        lines += [
            "",
            f"Turn by turn at {busiest['concurrency']} users: the prompt grows, the cache serves the most of it.",
            "",
            _row(["turn", "requests", "mean input tokens", "mean cached input tokens", "TTFT p50 ms"]),
            _row(["---:"] * 5),
        ]
        for t in busiest["turns"]:
            lines.append(_row([t["turn"], t["requests"], t["mean_input_tokens"], t["mean_cached_input_tokens"],
                               t["ttft_ms_p50"]]))  # fmt: skip
    lines += ["", "### Cost at Claude Code's mix", ""]
    return lines + _cost_lines(report, claude.get("cost"))


def summary(report: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{lv['concurrency']} users: {lv['output_throughput']} output tok/s, {lv['per_user_tps']} tok/s per user, "
        f"TTFT p50 {lv['ttft_ms']['p50']} ms, {lv['failed']} failed"
        for lv in report["levels"]
    ]
    lines += _cost_summary(report, "synthetic", report.get("cost")) if report["levels"] else []
    claude = report.get("claude_code")
    if claude:
        lines += [
            f"claude_code, {lv['concurrency']} users: {lv['output_throughput']} output tok/s, "
            f"{_pct(lv['cached_input_share'])} of input cached, TTFT p50 {lv['ttft_ms']['p50']} ms, "
            f"{lv['failed']} failed"
            for lv in claude["levels"]
        ]
        lines += _cost_summary(report, "claude_code", claude.get("cost"))
    return lines


def _cost_summary(report: Mapping[str, Any], profile: str, cost: Mapping[str, Any] | None) -> list[str]:
    if not cost:
        return [f"{profile}: no level reached {report['cost_min_user_tps']} tok/s per user: no cost computed"]
    even = round(cost["break_even_utilisation"] * 100, 1)
    return [
        f"{profile}: $ per 1M tokens at {cost['concurrency']} users: output {cost['usd_per_1m_output']}, input "
        f"{cost['usd_per_1m_input']}, cached input {cost['usd_per_1m_cached_input']} ({report['hosted']['name']}: "
        f"{cost['hosted_usd_per_1m_output']}, {cost['hosted_usd_per_1m_input']}, "
        f"{cost['hosted_usd_per_1m_cached_input']}); break-even at {even}% utilisation"
    ]


def chart_png(report: Mapping[str, Any]) -> bytes:
    """Fleet output tok/s against tok/s per user with the recipe's point, and TTFT/ITL per level."""
    import matplotlib  # noqa: PLC0415 - the controller's, only when a report is drawn

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    levels = [lv for lv in report["levels"] if lv["completed"]]
    claude = [lv for lv in (report.get("claude_code") or {}).get("levels", []) if lv["completed"]]
    recipe = report["recipe"]
    fig, (curve, lat) = pyplot.subplots(1, 2, figsize=(13, 5.5))
    for name, points in (("fleet", levels), ("claude_code", claude)):
        if not points:
            continue
        curve.plot([lv["per_user_tps"] for lv in points], [lv["output_throughput"] for lv in points], marker="o",
                   label=f"{'synthetic' if name == 'fleet' else 'Claude Code'} ({report['gpus']} GPUs)")  # fmt: skip
        for lv in points:
            curve.annotate(str(lv["concurrency"]), (lv["per_user_tps"], lv["output_throughput"]),
                           textcoords="offset points", xytext=(4, 4), fontsize=8)  # fmt: skip
    curve.scatter([recipe["per_user_tps"]], [recipe["output_tps"]], marker="*", s=180, color="tab:red",
                  label=f"recipe ({recipe['gpus']}x B200)", zorder=3)  # fmt: skip
    curve.set_xlabel("tok/s per user")
    curve.set_ylabel("fleet output tok/s")
    curve.set_title("Throughput against interactivity (labels: concurrent users)")
    curve.grid(alpha=0.3)
    curve.legend()
    shown = levels or claude
    users = [lv["concurrency"] for lv in shown]
    for key, metric, q in (("ttft_p50", "ttft_ms", "p50"), ("ttft_p95", "ttft_ms", "p95"),
                           ("itl_p50", "itl_ms", "p50"), ("itl_p95", "itl_ms", "p95")):  # fmt: skip
        lat.plot(users, [lv[metric][q] for lv in shown], marker=".", label=key.replace("_", " ").upper())
    if levels and claude:
        lat.plot([lv["concurrency"] for lv in claude], [lv["ttft_ms"]["p50"] for lv in claude], marker="x",
                 linestyle="--", label="TTFT P50, CLAUDE CODE")  # fmt: skip
    lat.set_xscale("log", base=2)
    lat.set_yscale("log")
    lat.set_xlabel("concurrent users")
    lat.set_ylabel("ms")
    lat.set_title("Time to first token and inter-token latency")
    lat.grid(alpha=0.3)
    lat.legend()
    fig.tight_layout()
    out = io.BytesIO()
    series = [name for name in SERIES if name != "fleet" or levels] + (["claude_code"] if claude else [])
    fig.savefig(out, format="png", dpi=100, metadata={"Title": "glm.fleet serving benchmark",
                                                      "Description": "series: " + ",".join(series)})  # fmt: skip
    pyplot.close(fig)
    return out.getvalue()
