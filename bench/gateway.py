"""The gateway's cost: streamed requests through it against the same requests straight to one server.

    python bench/gateway.py [--requests 128] [--concurrency 8] [--seconds-per-token 0.02]

Runs on a lab where site.yml has run (make bench runs it after bench/fleet.py). From the gateway's
host (which holds the client certificate a server's front requires), one load generator streams /v1/messages requests
(a) straight to one SGLang server with the servers' key, then (b) through the gateway's HTTPS front
door with the fleet probe's key, the same number at the same concurrency, in the same run. Both speak
TLS to the server's front with the gateway's client certificate, as the router does. The servers
generate at a fixed pace per token (the stand-in's switch) so that time to first token and
throughput are the serving path's, not a tight loop's. Prints TTFT p50/p95 and output tokens per
second for each, and the ratios (goals: TTFT p50 <= 1.10x, throughput >= 0.95x); and, as the TLS
front's own cost, the same requests from the server's node to its plain loopback port.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lab"))

import lab  # noqa: E402

PACE_FILE = "/tmp/glm-standin-seconds-per-token"  # noqa: S108 - the stand-in's switch, in its container

# The load generator, run by the gateway host's python3 (stdlib only). Its settings, keys included,
# come on stdin, so no key is on a command line.
LOADGEN = r"""
import json, ssl, sys, threading, time, http.client
cfg = json.loads(sys.stdin.readline())
results, lock = [], threading.Lock()
counter = iter(range(cfg["requests"]))
def connect():
    if cfg["tls"]:
        context = ssl.create_default_context(cafile=cfg["ca"])
        if cfg.get("cert"):
            context.load_cert_chain(cfg["cert"], cfg["key_file"])
        return http.client.HTTPSConnection(cfg["host"], cfg["port"], timeout=120, context=context)
    return http.client.HTTPConnection(cfg["host"], cfg["port"], timeout=120)
def one(conn, i):
    body = json.dumps({"model": cfg["model"], "max_tokens": 64, "stream": True,
                       "messages": [{"role": "user", "content": f"bench request {i}"}]})
    start = time.monotonic()
    conn.request("POST", "/v1/messages", body, {"Authorization": "Bearer " + cfg["key"],
                                                "content-type": "application/json"})
    resp = conn.getresponse()
    first, tokens = None, 0
    for raw in resp:
        line = raw.decode()
        if line.startswith("data: ") and '"content_block_delta"' in line:
            first = first or time.monotonic()
        if line.startswith("data: ") and '"message_delta"' in line:
            tokens = json.loads(line[6:]).get("usage", {}).get("output_tokens", 0)
    end = time.monotonic()
    with lock:
        results.append({"status": resp.status, "ttft": (first or end) - start, "seconds": end - start,
                        "tokens": tokens, "start": start, "end": end})
def worker():
    conn = connect()  # one kept-alive connection per client, as an SDK or Claude Code keeps one
    for i in counter:
        one(conn, i)
threads = [threading.Thread(target=worker) for _ in range(cfg["concurrency"])]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"""


def docker(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench: docker {' '.join(args[:4])} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def set_pace(servers: list[tuple[str, str]], seconds: float | None) -> None:
    for node, name in servers:
        script = f"echo {seconds} > {PACE_FILE}" if seconds is not None else f"rm -f {PACE_FILE}"
        docker("exec", node, "docker", "exec", name, "sh", "-c", script)


def load(settings: dict, host: str = "cache-1") -> list[dict]:
    container = f"{lab.PREFIX}-{host}"
    return json.loads(docker("exec", "-i", container, "python3", "-c", LOADGEN, stdin=json.dumps(settings) + "\n"))


def summary(results: list[dict]) -> dict[str, float]:
    failed = [r for r in results if r["status"] != 200]
    if failed:
        raise SystemExit(f"bench: {len(failed)} of {len(results)} requests failed: {failed[:3]}")
    ttfts = sorted(r["ttft"] for r in results)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {
        "ttft_p50_ms": 1000 * ttfts[len(ttfts) // 2],
        "ttft_p95_ms": 1000 * ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.95))],
        "tokens_per_s": sum(r["tokens"] for r in results) / span,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds-per-token", type=float, default=0.02)
    args = parser.parse_args(argv)
    state = lab.status()
    if not state.get("up"):
        raise SystemExit("bench: the lab is not up (run make lab, or bench/fleet.py first)")
    nodes = [n for n in state["nodes"] if n["group"] == "gpu_nodes"]
    servers = [
        (n["container"], name)
        for n in nodes
        for name in docker("exec", n["container"], "docker", "ps", "--format", "{{.Names}}").split()
        if name.startswith("pareto-glm53-flash")
    ]
    secrets = lab.INVENTORY.parent / ".secrets"
    common = {"model": "zai-org/GLM-5.3-Flash", "requests": args.requests, "concurrency": args.concurrency}
    # Straight to the server's TLS front, as the router reaches it: mutual TLS with the gateway's client
    # certificate of the site CA.
    servers_tls = "/etc/glm-fleet/gateway/servers-tls"
    direct = common | {"tls": True, "host": nodes[0]["address"], "port": 18080, "ca": f"{servers_tls}/ca.pem",
                       "cert": f"{servers_tls}/client.pem", "key_file": f"{servers_tls}/client.key",
                       "key": (lab.STATE_DIR / "api_key").read_text().strip()}  # fmt: skip
    through = common | {
        "tls": True, "host": lab.SITE_CACHE_ADDRESS, "port": 443, "ca": "/etc/glm-fleet/gateway/tls/ca.pem",
        "key": (secrets / "probe.key").read_text().strip(),  # the fleet probe's (gateway_probe_name)
    }  # fmt: skip
    set_pace(servers, args.seconds_per_token)
    try:
        load(direct | {"requests": args.concurrency})  # warm-up: connections, the router's first picks
        baseline = summary(load(direct))
        gateway = summary(load(through))
        # The TLS front's own cost: the same requests from the server's node to its loopback port.
        plain = summary(load(direct | {"tls": False, "host": "127.0.0.1", "port": 28080}, nodes[0]["name"]))
    finally:
        set_pace(servers, None)
    ttft_ratio = gateway["ttft_p50_ms"] / baseline["ttft_p50_ms"]
    rate_ratio = gateway["tokens_per_s"] / baseline["tokens_per_s"]
    rows = [
        ("TTFT p50, on the server's node, plain HTTP to loopback (ms)", f"{plain['ttft_p50_ms']:.1f}", ""),
        ("ratio TLS front / loopback, TTFT p50", f"{baseline['ttft_p50_ms'] / plain['ttft_p50_ms']:.3f}", ""),
        ("ratio TLS front / loopback, throughput", f"{baseline['tokens_per_s'] / plain['tokens_per_s']:.3f}", ""),
        ("TTFT p50, straight to one server (ms)", f"{baseline['ttft_p50_ms']:.1f}", ""),
        ("TTFT p50, through the gateway (ms)", f"{gateway['ttft_p50_ms']:.1f}", ""),
        ("ratio gateway / straight, TTFT p50", f"{ttft_ratio:.3f}", "<= 1.10"),
        ("TTFT p95, straight / through (ms)", f"{baseline['ttft_p95_ms']:.1f} / {gateway['ttft_p95_ms']:.1f}", ""),
        ("output tok/s, straight to one server", f"{baseline['tokens_per_s']:.1f}", ""),
        ("output tok/s, through the gateway", f"{gateway['tokens_per_s']:.1f}", ""),
        ("ratio gateway / straight, throughput", f"{rate_ratio:.3f}", ">= 0.95"),
    ]  # fmt: skip
    print(f"\nbench: {args.requests} streamed requests each way, {args.concurrency} at a time, "
          f"{args.seconds_per_token} s per token, {len(servers)} servers behind the gateway")  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:>14}  {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
