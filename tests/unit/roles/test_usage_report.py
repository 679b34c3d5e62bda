"""The daily usage file (glm.fleet.monitoring's files/usage_report.py): each developer's tokens from
the servers' counters as Prometheus scraped them, a series born in the window counted from 0, a
server's new process counted whole (even where its counter has passed the old one's value), and the
hosted prices applied to uncached input, cached input and output."""

from __future__ import annotations

import csv
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO, load_file

START = 1_800_000_000.0
DAY = 86400.0
PRICES = {"name": "Lyceum GLM-5.3-Flash", "input": 0.20, "cached_input": 0.05, "output": 0.50}


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return load_file(REPO / "roles/monitoring/files/usage_report.py")


@pytest.mark.parametrize(
    ("samples", "new_processes", "expected"),
    [
        ([(START - 60, 1000), (START + 60, 1500), (START + 120, 1700)], [], 700),  # from the last sample before
        ([(START + 60, 300), (START + 120, 800)], [], 800),  # born in the window: counts from 0
        ([(START - 60, 1000), (START + 60, 1200), (START + 120, 50), (START + 180, 90)], [], 290),  # it fell
        ([(START - 60, 156), (START + 120, 900)], [START + 30], 900),  # a new process, already past 156
        ([(START - 60, 156), (START + 120, 900)], [START - 90], 744),  # the process before the baseline's
        ([(START - 120, 10), (START - 60, 20)], [], 0),  # nothing in the window
    ],
)
def test_a_counters_growth_over_the_window(
    report: ModuleType, samples: list, new_processes: list, expected: float
) -> None:
    assert report.growth(samples, START, new_processes) == expected


A, B = ("sglang:prompt_tokens_total", ("developer", "alice")), ("sglang:prompt_tokens_total", ("developer", ""))


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        ({1: {A: 5, B: 9}, 2: {A: 6, B: 9}, 3: {A: 6, B: 12}}, []),  # one process, growing
        ({1: {A: 5, B: 9}, 2: {B: 9}, 3: {A: 7, B: 9}}, [2]),  # alice's series gone while it answered
        ({1: {A: 5, B: 9}, 2: {}, 3: {A: 7}}, [2]),  # up with none of them: a new process
        ({1: {A: 5, B: 9}, 3: {A: 7, B: 10}}, []),  # down at 2 (a network outage): all there, none lower
        ({1: {A: 5, B: 9}, 3: {A: 7, B: 2}}, [3]),  # down at 2, then one of them lower
        ({1: {A: 5}, 2: {A: 5, B: 1}}, []),  # a series born
    ],
)
def test_a_new_server_process_is_seen_on_its_scrapes(report: ModuleType, seen: dict, expected: list) -> None:
    scrapes = sorted(seen) if 2 in seen else [1, 3]
    assert report.restarts(scrapes, seen) == expected


def scraped(first: float, steps: list[tuple[float, float | None]], scrapes: list[float]) -> list[tuple[float, float]]:
    """A series' samples at a server's successful `scrapes` from `first`: each step's value from its
    time on (None: the series is gone, its process replaced)."""
    samples = []
    for when in scrapes:
        values = [value for at, value in steps if at <= when]
        if when >= first and values and values[-1] is not None:
            samples.append((when, values[-1]))
    return samples


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[str]]]:
    """Prometheus' query API with three servers' scrapes (every 50 s) and counters: alice on all
    three (b's process replaced with a lower counter, c's by one that later passed the old value; a
    missed its scrape at +150 s and kept its process), bob born during the day on a, and requests
    that came without a developer."""
    every = [START + s for s in range(-100, 1000, 50)]
    ups = {"a": [t for t in every if t != START + 150], "b": every, "c": [t for t in every if t != START + 50]}

    def on(instance: str, extra: dict[str, str], steps: list) -> tuple[dict[str, str], list]:
        return {"developer": extra.pop("developer"), "instance": instance, **extra}, scraped(
            steps[0][0], steps, ups[instance]
        )

    series: dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]] = {
        "up": [({"instance": i}, [(t, 1.0 if t in ups[i] else 0.0) for t in every]) for i in ups],
        "sglang:prompt_tokens_total": [
            on("a", {"developer": "alice"}, [(START - 100, 5000), (START + 100, 9000), (START + 200, 11000)]),
            on("b", {"developer": "alice"}, [(START - 100, 100), (START + 100, 40), (START + 200, 140)]),
            on("c", {"developer": "alice"}, [(START - 100, 156), (START + 100, None), (START + 300, 900)]),
            on("a", {"developer": "bob"}, [(START + 500, 2000)]),
            on("a", {"developer": ""}, [(START + 50, 30)]),
        ],
        "sglang:cached_tokens_total": [
            on("a", {"developer": "alice", "cache_source": "device"}, [(START - 100, 2000), (START + 200, 5000)]),
        ],
        "sglang:generation_tokens_total": [
            on("a", {"developer": "alice"}, [(START - 100, 50), (START + 200, 250)]),
            on("a", {"developer": "bob"}, [(START + 500, 64)]),
            on("a", {"developer": ""}, [(START + 50, 1)]),
        ],
    }  # fmt: skip
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            params = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            expr, when = params["query"][0], float(params["time"][0])
            asked.append(expr)
            metric, rest = expr.split("{", 1)
            window = float(rest.split("[", 1)[1].rstrip("s]"))
            assert rest.startswith('job="glm-sglang"}')
            result = [
                {"metric": labels, "values": [[t, str(v)] for t, v in samples if when - window < t <= when]}
                for labels, samples in series.get(metric, [])
            ]
            body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()


def test_the_days_file_holds_each_developers_tokens_and_their_hosted_price(
    report: ModuleType, prometheus: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, asked = prometheus
    config = tmp_path / "usage-report.json"
    config.write_text(json.dumps({"prometheus": url, "dir": str(tmp_path), "job": "glm-sglang", "prices": PRICES}))
    assert report.main([str(config), "--start", str(START), "--end", str(START + DAY)]) == 0
    path = tmp_path / "usage-2027-01-15.csv"
    assert path.stat().st_mode & 0o777 == 0o640
    rows = list(csv.DictReader(path.open()))
    assert [r["developer"] for r in rows] == ["", "alice", "bob"]
    alice = rows[1]
    # input 4000 + 2000 on a, 140 on b after its restart (40 + 100), 900 on c's new process; 3000 cached
    assert alice == {
        "day": "2027-01-15", "developer": "alice", "input_tokens": str(7040 - 3000), "cached_input_tokens": "3000",
        "output_tokens": "200", "hosted_usd": f"{(4040 * 0.20 + 3000 * 0.05 + 200 * 0.50) / 1e6:.4f}",
    }  # fmt: skip
    assert rows[2]["input_tokens"] == "2000"  # born in the day: its first value counts
    assert rows[2]["output_tokens"] == "64"
    assert rows[0]["input_tokens"] == "30"  # no key: not a developer's, still the fleet's
    assert all(expr.endswith(f"[{int(DAY) + 3600}s]") for expr in asked)
