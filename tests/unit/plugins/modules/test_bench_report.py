"""glm.fleet.bench_report: the report's files, and what --check --diff says of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.glm.fleet.plugins.modules.bench_report import main

TIMES = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
LEVEL = {"concurrency": 1, "completed": 4, "requests": 4, "failed": 0, "output_throughput": 150.0,
         "input_throughput": 150.0, "per_user_tps": 150.0, "ttft_ms": TIMES, "itl_ms": TIMES}  # fmt: skip


def args(dest: Path, output_tps: float = 150.0) -> dict[str, Any]:
    return {
        "dest": str(dest), "model": "zai-org/GLM-5.3-Flash", "targets": ["https://gw:443"], "via": "gateway",
        "gpus": 4, "benchmark": {"input_tokens": 10, "output_tokens": 10, "requests_per_client": 4},
        "levels": [{**LEVEL, "output_throughput": output_tps}],
        "recipe": {"output_tps": 2591, "per_user_tps": 140, "gpus": 4}, "gpu_hour_usd": 4.0,
        "cost_min_user_tps": 140.0, "hosted": {"name": "Lyceum", "input": 0.2, "cached_input": 0.05, "output": 0.5},
    }  # fmt: skip


def test_check_mode_shows_what_would_change_and_writes_nothing(
    run_main: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    dest = tmp_path / "report"
    new = run_main(main, args(dest), check_mode=True, diff=True)
    assert new["changed"] is True
    assert not dest.exists()
    assert [d["before_header"] for d in new["diff"]] == [f"{dest}/bench-serving.json (absent)",
                                                         f"{dest}/bench-serving.md (absent)"]  # fmt: skip
    assert json.loads(new["diff"][0]["after"])["levels"][0]["output_throughput"] == 150.0

    written = run_main(main, args(dest), diff=True)
    assert written["changed"] is True
    assert (dest / "bench-serving.png").read_bytes()[:4] == b"\x89PNG"
    again = run_main(main, args(dest), check_mode=True, diff=True)
    assert again["changed"] is False
    assert again["diff"] == []
    assert run_main(main, args(dest), diff=True)["diff"] == []

    other = run_main(main, args(dest, output_tps=140.0), check_mode=True, diff=True)
    assert other["changed"] is True
    assert '"output_throughput": 150.0' in other["diff"][0]["before"]
    assert '"output_throughput": 140.0' in other["diff"][0]["after"]
    assert json.loads((dest / "bench-serving.json").read_text())["levels"][0]["output_throughput"] == 150.0
