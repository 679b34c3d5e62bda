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
    lines = [
        "# Serving benchmark",
        "",
        f"{report['model']} through {', '.join(report['targets'])} ({report['via']}); "
        f"{report['gpus']} GPUs; {bench['input_tokens']} tokens in, {bench['output_tokens']} out per request; "
        f"{bench['requests_per_client']} requests per client at each level. Load generator: "
        f"{report.get('calibration', {}).get('load_generator', 'builtin')}.",
        "",
        "## Throughput and latency per level",
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
    cost = report.get("cost")
    if not cost:
        lines.append(f"No level reached {report['cost_min_user_tps']} tok/s per user: no operating point to price.")
    else:
        lines += [
            f"At {cost['concurrency']} users ({cost['per_user_tps']} tok/s each, {cost['output_throughput']} output "
            f"and {cost['input_throughput']} input tok/s), {cost['gpus']} GPUs at ${cost['gpu_hour_usd']} per "
            f"GPU-hour (${cost['fleet_hour_usd']} per hour), busy all hour:",
            "",
            _row(["", "self-hosted", report["hosted"]["name"]]),
            _row(["---", "---:", "---:"]),
            _row(["$ per 1M output tokens", cost["usd_per_1m_output"], cost["hosted_usd_per_1m_output"]]),
            _row(["$ per 1M input tokens", cost["usd_per_1m_input"], cost["hosted_usd_per_1m_input"]]),
            _row(["$ per 1M output tokens, all cost on output", cost["usd_per_1m_output_only"], "-"]),
            "",
            f"The hour's cost is split between input and output in the hosted prices' ratio. The same tokens "
            f"would cost ${cost['hosted_hour_usd_at_capacity']} per hour hosted; self-hosting breaks even at "
            f"{round(cost['break_even_utilisation'] * 100, 1)}% utilisation of this capacity"
            + (" (above 100%: the hosted service is cheaper at any load)." if cost["break_even_utilisation"] > 1
               else "."),
        ]  # fmt: skip
    lines += ["", "Chart: bench-serving.png (fleet output tok/s against tok/s per user, the recipe's point marked; "
              "TTFT and ITL per level).", ""]  # fmt: skip
    return "\n".join(lines)


def summary(report: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{lv['concurrency']} users: {lv['output_throughput']} output tok/s, {lv['per_user_tps']} tok/s per user, "
        f"TTFT p50 {lv['ttft_ms']['p50']} ms, {lv['failed']} failed"
        for lv in report["levels"]
    ]
    cost = report.get("cost")
    if cost:
        even = round(cost["break_even_utilisation"] * 100, 1)
        lines.append(f"$ per 1M tokens at {cost['concurrency']} users: output {cost['usd_per_1m_output']}, input "
                     f"{cost['usd_per_1m_input']} ({report['hosted']['name']}: {cost['hosted_usd_per_1m_output']}, "
                     f"{cost['hosted_usd_per_1m_input']}); break-even at {even}% utilisation")  # fmt: skip
    else:
        lines.append(f"no level reached {report['cost_min_user_tps']} tok/s per user: no cost computed")
    return lines


def chart_png(report: Mapping[str, Any]) -> bytes:
    """Fleet output tok/s against tok/s per user with the recipe's point, and TTFT/ITL per level."""
    import matplotlib  # noqa: PLC0415 - the controller's, only when a report is drawn

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    levels = [lv for lv in report["levels"] if lv["completed"]]
    recipe = report["recipe"]
    fig, (curve, lat) = pyplot.subplots(1, 2, figsize=(13, 5.5))
    curve.plot([lv["per_user_tps"] for lv in levels], [lv["output_throughput"] for lv in levels],
               marker="o", label=f"fleet ({report['gpus']} GPUs)")  # fmt: skip
    for lv in levels:
        curve.annotate(str(lv["concurrency"]), (lv["per_user_tps"], lv["output_throughput"]),
                       textcoords="offset points", xytext=(4, 4), fontsize=8)  # fmt: skip
    curve.scatter([recipe["per_user_tps"]], [recipe["output_tps"]], marker="*", s=180, color="tab:red",
                  label=f"recipe ({recipe['gpus']}x B200)", zorder=3)  # fmt: skip
    curve.set_xlabel("tok/s per user")
    curve.set_ylabel("fleet output tok/s")
    curve.set_title("Throughput against interactivity (labels: concurrent users)")
    curve.grid(alpha=0.3)
    curve.legend()
    users = [lv["concurrency"] for lv in levels]
    for key, metric, q in (("ttft_p50", "ttft_ms", "p50"), ("ttft_p95", "ttft_ms", "p95"),
                           ("itl_p50", "itl_ms", "p50"), ("itl_p95", "itl_ms", "p95")):  # fmt: skip
        lat.plot(users, [lv[metric][q] for lv in levels], marker=".", label=key.replace("_", " ").upper())
    lat.set_xscale("log", base=2)
    lat.set_yscale("log")
    lat.set_xlabel("concurrent users")
    lat.set_ylabel("ms")
    lat.set_title("Time to first token and inter-token latency")
    lat.grid(alpha=0.3)
    lat.legend()
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Title": "glm.fleet serving benchmark",
                                                      "Description": "series: " + ",".join(SERIES)})  # fmt: skip
    pyplot.close(fig)
    return out.getvalue()
