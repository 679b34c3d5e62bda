# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""glm.fleet's daily usage file: each developer's tokens over one day, from the servers' own counters.

    python3 usage-report CONFIG [--day YYYY-MM-DD] [--start EPOCH --end EPOCH]

CONFIG (JSON, written by glm.fleet.monitoring): {"prometheus": URL, "dir": DIR, "job": JOB,
"prices": {"name", "input", "cached_input", "output"} ($ per 1M tokens)}. Without --day, the day
before today (UTC). The file DIR/usage-DAY.csv has one row per developer: the day, the developer
(the name the gateway gave the request's key; empty for requests that did not come through it),
input tokens not served from the prefix cache, cached input tokens, output tokens, and what the same
tokens would cost at the hosted service's prices.

The counts are the servers' counters (SGLang's prompt_tokens_total, cached_tokens_total and
generation_tokens_total, labelled by developer), read as Prometheus scraped them. Each series'
growth over the window is counted from its raw samples: a series born in the window (SGLang creates
it at a developer's first request on that server process) counts from 0, and a drop (a server's
restart) counts the new value whole. Prometheus' increase() would miss a new series' first value and
extrapolate to the window's edges. Tokens counted after the last scrape before a server stopped are
lost with it.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

UTC = datetime.timezone.utc  # noqa: UP017 - datetime.UTC is Python 3.11; hosts may run 3.10 (jammy)
METRICS = {
    "input": "sglang:prompt_tokens_total",
    "cached_input": "sglang:cached_tokens_total",
    "output": "sglang:generation_tokens_total",
}
LOOKBACK = 3600  # seconds before the window in which a series' last sample is its baseline
COLUMNS = ("day", "developer", "input_tokens", "cached_input_tokens", "output_tokens", "hosted_usd")


def growth(samples: list[tuple[float, float]], start: float) -> float:
    """A counter's growth after `start` from its samples (time, value), oldest first."""
    before = [value for when, value in samples if when <= start]
    previous = before[-1] if before else 0.0
    total = 0.0
    for when, value in samples:
        if when <= start:
            continue
        total += value - previous if value >= previous else value
        previous = value
    return total


def query(prometheus: str, expr: str, when: float) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{when:.3f}"})
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - the configured Prometheus
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus refused {expr}: {body.get('error')}")
    return body["data"]["result"]


def usage(prometheus: str, job: str, start: float, end: float) -> dict[str, dict[str, int]]:
    """Tokens by developer and kind over (start, end]."""
    window = int(end - start) + LOOKBACK
    found: dict[str, dict[str, int]] = {}
    for kind, metric in METRICS.items():
        for series in query(prometheus, f'{metric}{{job="{job}"}}[{window}s]', end):
            samples = [(float(when), float(value)) for when, value in series["values"]]
            developer = series["metric"].get("developer", "")
            mine = found.setdefault(developer, dict.fromkeys(METRICS, 0))
            mine[kind] += round(growth(samples, start))
    return found


def rows(day: str, found: dict[str, dict[str, int]], prices: dict) -> list[dict]:
    table = []
    for developer, tokens in sorted(found.items()):
        uncached = max(tokens["input"] - tokens["cached_input"], 0)
        cost = (
            uncached * float(prices["input"])
            + tokens["cached_input"] * float(prices["cached_input"])
            + tokens["output"] * float(prices["output"])
        ) / 1e6
        if uncached or tokens["cached_input"] or tokens["output"]:
            table.append({
                "day": day, "developer": developer, "input_tokens": uncached,
                "cached_input_tokens": tokens["cached_input"], "output_tokens": tokens["output"],
                "hosted_usd": f"{cost:.4f}",
            })  # fmt: skip
    return table


def write(path: Path, table: list[dict]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        out.write(text.getvalue())
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    config = json.loads(Path(argv[0]).read_text())
    options = dict(zip(argv[1::2], argv[2::2], strict=False))
    if "--start" in options:
        start, end = float(options["--start"]), float(options["--end"])
        day = datetime.datetime.fromtimestamp(start, UTC).date().isoformat()
    else:
        today = datetime.datetime.now(UTC).date()
        first = datetime.date.fromisoformat(options.get("--day", (today - datetime.timedelta(days=1)).isoformat()))
        start = datetime.datetime.combine(first, datetime.time(), UTC).timestamp()
        end = start + 86400
        day = first.isoformat()
    table = rows(day, usage(config["prometheus"], config["job"], start, end), config["prices"])
    path = Path(config["dir"]) / f"usage-{day}.csv"
    write(path, table)
    print(f"usage-report: {path}: {len(table)} developers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
