"""Ready-detection lag on the lab: how long after the server became ready does the check return?

For each round the SGLang unit on one lab GPU node is restarted, and a readiness check is started
at once and left to wait. The moment the server became ready is the journal's timestamp of its
"ready to roll" line (lab nodes share this machine's clock); the lag is the time from then until
the check returned to the controller. Two checks are measured in alternating rounds:

- glm.fleet.sglang_health (interval 0.5 s): TCP, /health, /health_generate, /v1/models, a chat
  completion, a streamed Anthropic message and the server-info comparison;
- the baseline: a curl loop polling /health every 0.5 s until 200, run through ansible the same
  way: what a plain role does to wait for a service (and what misses a hung generation).

Prints each round and the medians, with the ratio module/baseline. Run with the lab up:
`make bench` (or `python bench/ready_lag.py --rounds 5`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lab"))

import lab  # noqa: E402 - the lab's state directory (GLM_LAB_STATE or .lab)

UNIT = "pareto-glm53-flash"
SERVED = "zai-org/GLM-5.3-Flash"
READY_LINE = "ready to roll"


def node_exec(container: str, *cmd: str) -> str:
    return subprocess.run(["docker", "exec", container, *cmd], check=True, capture_output=True, text=True).stdout


def ready_time(container: str, since: float) -> float:
    """Wall-clock time of the server's ready line after `since`, from the node's journal."""
    out = node_exec(container, "journalctl", "-u", UNIT, "-o", "json", "--no-pager", f"--since=@{since:.3f}")
    for line in out.splitlines():
        entry = json.loads(line)
        if READY_LINE in str(entry.get("MESSAGE", "")):
            return int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    raise SystemExit(f"bench: no '{READY_LINE}' line in the journal of {UNIT} since {since}")


def ansible(host: str, module: str, args: str) -> None:
    cmd = ["ansible", host, "-i", str(REPO / "inventories" / "lab"), "--become", "-m", module, "-a", args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench: {module} failed:\n{proc.stdout[-2000:]}")


def round_trip(container: str, host: str, check: str) -> float:
    node_exec(container, "systemctl", "reset-failed", UNIT)  # deliberate restarts, not a crash loop
    started = time.time()
    node_exec(container, "systemctl", "restart", UNIT)
    if check == "module":
        # The key comes from the lab inventory; the command line carries only the template.
        args = {
            "port": 18080,
            "api_key": "{{ glm_lab_api_key }}",
            "served_model_name": SERVED,
            "timeout": 120,
            "interval": 0.5,
        }
        ansible(host, "glm.fleet.sglang_health", json.dumps(args))
    else:
        url = "http://127.0.0.1:18080/health"
        poll = f"for i in $(seq 240); do curl -sf -o /dev/null {url} && exit 0; sleep 0.5; done; exit 1"
        ansible(host, "ansible.builtin.shell", poll)
    returned = time.time()
    return returned - ready_time(container, started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--host", default="gpu-1")
    args = parser.parse_args()
    state = json.loads((lab.STATE_DIR / "state.json").read_text())
    container = next(n["container"] for n in state["nodes"] if n["name"] == args.host)
    lags: dict[str, list[float]] = {"module": [], "baseline": []}
    print(f"{'round':>5}  {'check':<9} {'lag (s)':>8}")
    for i in range(1, args.rounds + 1):
        for check in ("module", "baseline"):
            lag = round_trip(container, args.host, check)
            lags[check].append(lag)
            print(f"{i:>5}  {check:<9} {lag:8.3f}", flush=True)
    module, baseline = statistics.median(lags["module"]), statistics.median(lags["baseline"])
    print()
    print("| figure | value |")
    print("| --- | --- |")
    print(f"| ready-detection lag, glm.fleet.sglang_health (median of {args.rounds}) | {module:.3f} s |")
    print(f"| ready-detection lag, baseline curl /health poll (median of {args.rounds}) | {baseline:.3f} s |")
    print(f"| ratio module / baseline | {module / baseline:.2f} |")
    print(f"| goal: module lag <= 1 s | {'met' if module <= 1 else 'NOT met'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
