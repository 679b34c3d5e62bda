"""glm.fleet.monitoring's Grafana dashboard: the committed JSON is what tools/dashboards.py builds,
and every query reads what the fleet's Prometheus has (its job names, SGLang's metric names)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import standin_deps
from conftest import REPO

TOOL = REPO / "tools" / "dashboards.py"
DASHBOARD = REPO / "roles" / "monitoring" / "files" / "dashboards" / "glm-fleet.json"


def queries() -> list[dict[str, str]]:
    out = subprocess.run([sys.executable, str(TOOL), "--queries"], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_the_committed_dashboard_is_the_built_one() -> None:
    result = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_every_panel_queries_the_fleets_prometheus_datasource() -> None:
    board = json.loads(DASHBOARD.read_text())
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert {p["title"] for p in panels} >= {
        "Fleet output tokens/s", "Output tokens/s per server", "Time to first token", "Inter-token latency",
        "Running requests", "Queued requests", "KV-cache usage", "GPU utilisation", "GPU memory used", "GPU power",
        "GPU temperature",
    }  # fmt: skip
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"


def test_queries_use_the_scrape_jobs_and_sglangs_metric_names() -> None:
    source = standin_deps.sglang_source(
        REPO / ".lab" / "cache" / "standin", "sglang/srt/observability/metrics_collector.py"
    ).read_text()
    sglang = set(re.findall(r'name="(sglang:\w+)"', source))
    for query in queries():
        for job in re.findall(r'job="([^"]+)"', query["expr"]):
            assert job in {"glm-sglang", "glm-gateway"}, query
        for name in re.findall(r"sglang:\w+", query["expr"]):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in sglang, (name, query["panel"])
