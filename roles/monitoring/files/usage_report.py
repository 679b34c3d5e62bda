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
growth over the window is counted from its raw samples, and a new server process counts whole:
SGLang's counters live as long as its process, which exports no start time, so a new process is
recognised on the server's scrapes (Prometheus' up): at a successful scrape where any of the
server's series that the previous successful scrape held is missing or lower (within one process
a counter never falls, and a series, once made, stays). A series born in the window counts from 0.
Prometheus' increase() would miss a new series' first value, extrapolate to the window's edges, and
take a restarted counter that has already passed its old value for the old one grown. Tokens
counted after the last scrape before a server stopped are lost with it.
"""

from __future__ import annotations

import csv
import datetime
import io
import itertools
import json
import os
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

UTC = datetime.timezone.utc  # noqa: UP017 - datetime.UTC is Python 3.11; hosts may run 3.10 (jammy)
METRICS = {
    "input": "sglang:prompt_tokens_total",
    "cached_input": "sglang:cached_tokens_total",
    "output": "sglang:generation_tokens_total",
}
LOOKBACK = 3600  # seconds before the window in which a series' last sample is its baseline
COLUMNS = ("day", "developer", "input_tokens", "cached_input_tokens", "output_tokens", "hosted_usd")


def growth(samples: list[tuple[float, float]], start: float, restarts: Sequence[float] = ()) -> float:
    """A counter's growth after `start` from its samples (time, value), oldest first; `restarts`:
    the times of the first scrapes of its server's new processes."""
    before = [(when, value) for when, value in samples if when <= start]
    since, previous = before[-1] if before else (float("-inf"), 0.0)
    total = 0.0
    for when, value in samples:
        if when <= start:
            continue
        anew = value < previous or any(since < restart <= when for restart in restarts)
        total += value if anew else value - previous
        since, previous = when, value
    return total


def restarts(scrapes: list[float], seen: dict[float, dict[tuple, float]]) -> list[float]:
    """The times at which one server's successful scrapes (`scrapes`, oldest first) show a new
    process: a series that the previous successful scrape held is missing, or lower. `seen`: each
    scrape's time to its series (their labels) and values."""
    found = []
    for earlier, later in itertools.pairwise(scrapes):
        old, new = seen.get(earlier, {}), seen.get(later, {})
        if any(key not in new or new[key] < value for key, value in old.items()):
            found.append(later)
    return found


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
    scrapes: dict[str, list[float]] = {}
    for series in query(prometheus, f'up{{job="{job}"}}[{window}s]', end):
        ups = [float(when) for when, value in series["values"] if float(value) == 1]
        scrapes[series["metric"].get("instance", "")] = ups
    fetched = []
    seen: dict[str, dict[float, dict[tuple, float]]] = {}
    for kind, metric in METRICS.items():
        for series in query(prometheus, f'{metric}{{job="{job}"}}[{window}s]', end):
            samples = [(float(when), float(value)) for when, value in series["values"]]
            instance = series["metric"].get("instance", "")
            key = (metric, *sorted(series["metric"].items()))
            for when, value in samples:
                seen.setdefault(instance, {}).setdefault(when, {})[key] = value
            fetched.append((kind, instance, series["metric"].get("developer", ""), samples))
    new_processes = {instance: restarts(times, seen.get(instance, {})) for instance, times in scrapes.items()}
    found: dict[str, dict[str, int]] = {}
    for kind, instance, developer, samples in fetched:
        mine = found.setdefault(developer, dict.fromkeys(METRICS, 0))
        mine[kind] += round(growth(samples, start, new_processes.get(instance, [])))
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
