"""Write glm.fleet.monitoring's Grafana dashboard, built with grafana-foundation-sdk.

    python tools/dashboards.py          rewrite roles/monitoring/files/dashboards/glm-fleet.json
    python tools/dashboards.py --check  exit 1 when the file differs from what this builds
    python tools/dashboards.py --queries  print each panel's PromQL, one JSON object per line

Every query reads the job names and labels glm.fleet.monitoring's scrape configuration gives
(`glm-sglang`, `glm-gateway`, the `node` label) and SGLang's, SMG's and DCGM's metric names; the
lab checks that each one parses (promtool) and that those of the servers and the gateway return
data from its Prometheus.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "roles" / "monitoring" / "files" / "dashboards" / "glm-fleet.json"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SERVERS = 'job="glm-sglang", node=~"$node"'


def quantile(q: float, histogram: str) -> str:
    """A fleet-wide quantile of one of SGLang's histograms over 5 minutes."""
    return f"histogram_quantile({q}, sum by (le) (rate(sglang:{histogram}_bucket{{{SERVERS}}}[5m])))"


def per_developer(counter: str) -> list[tuple[str, str]]:
    """One of SGLang's token counters as a rate per developer (the label the gateway's header sets)."""
    return [("{{developer}}", f"sum by (developer) (rate(sglang:{counter}{{{SERVERS}}}[5m]))")]


# (row, title, unit, [(legend, PromQL)]); DCGM's panels have data once a DCGM exporter is scraped.
PANELS: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("Throughput", "Fleet output tokens/s", "short", [
        ("fleet", f"sum(rate(sglang:generation_tokens_total{{{SERVERS}}}[1m]))"),
    ]),
    ("Throughput", "Output tokens/s per server", "short", [
        ("{{node}} {{instance}}", f"sum by (node, instance) (rate(sglang:generation_tokens_total{{{SERVERS}}}[1m]))"),
    ]),
    ("Throughput", "Input tokens/s per server", "short", [
        ("{{node}} {{instance}}", f"sum by (node, instance) (rate(sglang:prompt_tokens_total{{{SERVERS}}}[1m]))"),
    ]),
    ("Latency", "Time to first token", "s", [
        ("p50", quantile(0.5, "time_to_first_token_seconds")),
        ("p95", quantile(0.95, "time_to_first_token_seconds")),
    ]),
    ("Latency", "Inter-token latency", "s", [
        ("p50", quantile(0.5, "inter_token_latency_seconds")),
        ("p95", quantile(0.95, "inter_token_latency_seconds")),
    ]),
    ("Load", "Running requests", "short", [
        ("{{node}} {{instance}}", f"sum by (node, instance) (sglang:num_running_reqs{{{SERVERS}}})"),
    ]),
    ("Load", "Queued requests", "short", [
        ("{{node}} {{instance}}", f"sum by (node, instance) (sglang:num_queue_reqs{{{SERVERS}}})"),
    ]),
    ("Load", "KV-cache usage", "percentunit", [
        ("{{node}} {{instance}}", f"max by (node, instance) (sglang:token_usage{{{SERVERS}}})"),
    ]),
    ("Load", "Servers up, and out of the gateway's rotation", "short", [
        ("up", f"sum(up{{{SERVERS}}})"),
        # SMG sets smg_worker_health when a worker's health changes; 0 is out of rotation
        ("unhealthy at the gateway", 'count(smg_worker_health{job="glm-gateway"} == 0) or vector(0)'),
    ]),
    # The servers count each request's tokens under the developer the gateway named (an empty name:
    # a request that did not come through the gateway).
    ("Developers", "Input tokens/s per developer (cached included)", "short", per_developer("prompt_tokens_total")),
    ("Developers", "Cached input tokens/s per developer", "short", per_developer("cached_tokens_total")),
    ("Developers", "Output tokens/s per developer", "short", per_developer("generation_tokens_total")),
    ("GPUs", "GPU utilisation", "percent", [
        ("{{node}} GPU {{gpu}}", 'DCGM_FI_DEV_GPU_UTIL{node=~"$node"}'),
    ]),
    ("GPUs", "GPU memory used", "decmbytes", [
        ("{{node}} GPU {{gpu}}", 'DCGM_FI_DEV_FB_USED{node=~"$node"}'),
    ]),
    ("GPUs", "GPU power", "watt", [
        ("{{node}} GPU {{gpu}}", 'DCGM_FI_DEV_POWER_USAGE{node=~"$node"}'),
    ]),
    ("GPUs", "GPU temperature", "celsius", [
        ("{{node}} GPU {{gpu}}", 'DCGM_FI_DEV_GPU_TEMP{node=~"$node"}'),
    ]),
]  # fmt: skip


def build() -> dict:
    board = (
        dashboard.Dashboard("GLM-5.3-Flash fleet")
        .uid("glm-fleet")
        .tags(["glm.fleet", "sglang"])
        .time("now-1h", "now")
        .refresh("30s")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            dashboard.QueryVariable("node")
            .label("Node")
            .datasource(DATASOURCE)
            .query('label_values(up{job="glm-sglang"}, node)')
            .multi(True)
            .include_all(True)
        )
    )
    row = None
    for row_title, title, unit, queries in PANELS:
        if row_title != row:
            board = board.with_row(dashboard.Row(row_title))
            row = row_title
        panel = timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).height(8).span(12)
        for ref, (legend, expr) in zip("ABCDEFGH", queries, strict=False):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref))
        board = board.with_panel(panel)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def queries() -> list[dict[str, str]]:
    return [
        {"panel": title, "legend": legend, "expr": expr} for _row, title, _unit, qs in PANELS for legend, expr in qs
    ]


def main(argv: list[str]) -> int:
    if "--queries" in argv:
        for query in queries():
            print(json.dumps(query))
        return 0
    text = render()
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(REPO)} is out of date: run `make dashboards`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
