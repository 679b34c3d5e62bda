"""The serving benchmark on the lab: through the gateway to the three servers, each set to a known
per-stream rate and server-wide cap, the benchmark measures what they were set to, and writes its
report (JSON, Markdown, a PNG chart) with the recipe's comparison and the cost per token."""

from __future__ import annotations

import base64
import itertools
import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Runner, lab, run_log, site_stage
from test_gateway import SECRETS, in_node, router_workers, server_containers

PLAYBOOK = REPO / "playbooks" / "bench_serving.yml"
PACE_FILE = "/tmp/glm-standin-seconds-per-token"  # noqa: S108 - the stand-in's switches, inside its container
CAP_FILE = "/tmp/glm-standin-max-tokens-per-second"  # noqa: S108
PREFILL_FILE = "/tmp/glm-standin-prefill-tokens-per-second"  # noqa: S108
PREFILL = 10000  # tokens/s of one server's prefill
# tokens/s of one stream's decode in the Claude Code profile, about a B200's for one user: unpaced,
# the stand-in's tokens come faster than a TLS record, so they arrive together and no time between
# tokens (nor a speed per user) can be measured
DECODE = 250
RATE, CAP = 20.0, 60.0  # tokens/s of one stream, and of one server (low enough that 2 cores carry it)
USERS = 24  # 8 streams on each of the 3 servers (round-robin), well over CAP / RATE = 3


def probe_key() -> str:
    """The key the benchmark sends by default: the fleet probe's (glm.fleet.gateway's gateway_probe_name)."""
    return (SECRETS / "probe.key").read_text().strip()


@pytest.fixture(scope="module")
def paced_fleet(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, str]]]:
    # Round-robin routing: every server gets a third of the streams, so 24 users saturate all three
    # caps. (With cache_aware, SMG sent a just-restarted server about twice the others' share.)
    site_stage(tmp_path_factory.mktemp("bench"), "gateway", {"gateway_policy": "round_robin"})
    nodes = [n["container"] for n in lab_state["nodes"] if n["group"] == "gpu_nodes"]
    servers = server_containers(nodes)
    for node, name in servers:
        in_node(node, "docker", "exec", name, "sh", "-c", f"echo {1 / RATE} > {PACE_FILE}; echo {CAP} > {CAP_FILE}")
    # The router must count all three healthy (an earlier test stops and restarts servers), or the
    # load goes to fewer servers than the cap assumes.
    deadline = time.monotonic() + 60
    while len(router_workers()) != len(servers) or not all(router_workers().values()):
        assert time.monotonic() < deadline, f"the router does not count every server healthy: {router_workers()}"
        time.sleep(1)
    yield servers
    for node, name in server_containers(nodes):
        in_node(node, "docker", "exec", name, "rm", "-f", PACE_FILE, CAP_FILE)
    # The gateway stays on round-robin: this module runs last (Makefile's INTEGRATION_TESTS).


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks, each CRC checked (what a viewer checks before drawing it)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append((kind, body))
        at += 12 + length
    return chunks


def served(servers: list[tuple[str, str]]) -> dict[str, int]:
    """Each server's count of chat completions (the stand-in logs one JSON line per request)."""
    return {
        f"{node}/{name}": in_node(node, "docker", "logs", name).count('"path": "/v1/chat/completions"')
        for node, name in servers
    }


def aiperf_generated_the_load_without_the_key(
    report: Path, data: dict[str, Any], levels: list[dict[str, Any]], log: str
) -> None:
    """AIPerf generated the load: its configuration names the key's variable, never the key, and
    neither it nor its exports, logs or the report carry the key, plain or base64; its own summary
    agrees with the figures made from its records."""
    assert data["calibration"]["load_generator"] == "aiperf 0.13.0"
    assert "Load generator: aiperf 0.13.0." in (report / "bench-serving.md").read_text()
    for level in levels:
        assert level["aiperf"]["output_throughput"] == pytest.approx(level["output_throughput"], rel=0.02)
        assert level["aiperf"]["ttft_p50_ms"] == pytest.approx(level["ttft_ms"]["p50"], rel=0.02)
    config = report / "aiperf" / "synthetic" / f"concurrency-{USERS}" / "aiperf.yaml"
    assert config.stat().st_mode & 0o777 == 0o600
    assert json.loads(config.read_text())["benchmark"]["endpoint"]["api_key"] == "${GLM_FLEET_BENCH_API_KEY}"
    assert sum(1 for _line in (config.parent / "profile_export.jsonl").open()) == 2 * USERS
    assert (report / "tokenizer" / "tokenizer.json").is_file()
    key = probe_key()
    files = [path for path in report.rglob("*") if path.is_file()]
    assert len(files) > 10
    assert key not in log
    for path in files:
        text = path.read_bytes().decode(errors="replace")
        assert key not in text, path
        assert base64.b64encode(key.encode()).decode() not in text, path


SHAPE = {"turns": 4, "system_tokens": 1500, "context_tokens": 500, "turn_tokens": 300, "output_tokens": 24}


def claude_code_profile(runner: Runner, lab_state: dict[str, Any], tmp_path: Path) -> tuple[Path, Any]:
    """The Claude Code profile at 1 and 4 users on the fleet's routing policy (cache_aware: a lab on
    which this module ran before is on round-robin), with the servers computing the part of a prompt
    not cached at PREFILL tokens/s before the first token, then DECODE tokens/s. Returns the report's
    directory and the run."""
    router = json.loads(in_node("glm-lab-cache-1", "cat", "/etc/glm-fleet/gateway/router.json"))
    if router["argv"][router["argv"].index("--policy") + 1] != "cache_aware":
        site_stage(tmp_path / "stage", "gateway", {"gateway_policy": "cache_aware"})
    servers = server_containers([n["container"] for n in lab_state["nodes"] if n["group"] == "gpu_nodes"])
    report = tmp_path / "bench-report"
    try:
        for node, name in servers:
            paced = f"echo {PREFILL} > {PREFILL_FILE}; echo {1 / DECODE} > {PACE_FILE}"
            in_node(node, "docker", "exec", name, "sh", "-c", paced)
        run = runner.playbook(PLAYBOOK, extravars={
            "bench_serving_profiles": ["claude_code"], "bench_serving_claude_code_concurrency": [1, 4],
            **{f"bench_serving_claude_code_{name}": value for name, value in SHAPE.items()},
            "bench_serving_report_dir": str(report), "bench_serving_gpu_hour_usd": 2.5,
            "bench_serving_cost_min_user_tps": 1,
        })  # fmt: skip
    finally:
        for node, name in servers:
            in_node(node, "docker", "exec", name, "rm", "-f", PREFILL_FILE, PACE_FILE)
    return report, run


def test_claude_codes_shape_is_served_from_the_prefix_cache_and_priced_at_its_mix(
    runner: Runner, lab_state: dict[str, Any], tmp_path: Path
) -> None:
    """The Claude Code profile through the gateway (this test runs before paced_fleet sets
    round-robin): conversations of four turns that grow a shared prefix. What the servers reported as
    cached is what the conversations' shape says it must be, a cached prefix shortens the time to
    first token, and the cost is priced at that measured mix with the hosted service's three prices."""
    report, run = claude_code_profile(runner, lab_state, tmp_path)
    assert run.status == "successful", run_log(run)
    data = json.loads((report / "bench-serving.json").read_text())
    assert data["levels"] == []
    claude = data["claude_code"]
    assert claude["benchmark"] == {**SHAPE, "sessions_per_client": 1}
    assert claude["calibration"]["profile"] == "claude_code"
    alone, four = claude["levels"]
    records = [
        json.loads(line)
        for line in (report / "aiperf" / "claude_code" / "concurrency-4" / "profile_export.jsonl").open()
    ]
    assert len({r["metadata"]["conversation_id"] for r in records}) == 4
    for level, users in ((alone, 1), (four, 4)):
        assert (level["requests"], level["failed"], level["mean_output_tokens"]) == (4 * users, 0, 24.0), level
    # Alone, every turn finds the whole pages (64 tokens) of the turn before it cached on its server
    # (cache_aware routing keeps a conversation where its prefix is), and grows by a turn and an answer.
    turns = alone["turns"]
    assert [t["turn"] for t in turns] == [0, 1, 2, 3]
    assert 2300 <= turns[0]["mean_input_tokens"] <= 2350, turns  # the system prompt, the context, a turn
    for before, now in itertools.pairwise(turns):
        # A turn and the answer before it, with the template's tokens around the two messages (6).
        assert now["mean_input_tokens"] - before["mean_input_tokens"] == pytest.approx(300 + 24 + 6, abs=6), turns
        assert now["mean_cached_input_tokens"] >= before["mean_input_tokens"] // 64 * 64 - 64, turns
    # The first turn computes its whole prompt (about 2,300 tokens: 230 ms at least); the others about
    # 340 tokens (34 ms): the cache shortens the time to first token, as on a GPU.
    assert turns[0]["ttft_ms_p50"] >= turns[0]["mean_input_tokens"] / PREFILL * 1000, turns
    assert max(t["ttft_ms_p50"] for t in turns[1:]) < turns[0]["ttft_ms_p50"] / 2, turns
    # Four conversations at once: each stays on the server that holds it, turn after turn.
    conversations: dict[str, list[tuple[int, int, int]]] = {}
    for r in records:
        conversations.setdefault(r["metadata"]["conversation_id"], []).append((
            r["metadata"]["turn_index"], int(r["metrics"]["usage_prompt_tokens"]["value"]),
            int(r["metrics"].get("usage_prompt_cache_read_tokens", {}).get("value", 0)),
        ))  # fmt: skip
    for name, conversation in conversations.items():
        for (_t0, prompt, _c0), (_t1, _p1, cached) in itertools.pairwise(sorted(conversation)):
            assert cached >= prompt // 64 * 64 - 64, (name, sorted(conversation))
    assert (
        sum(int(r["metrics"]["usage_prompt_cache_read_tokens"]["value"]) for r in records)
        == four["cached_input_tokens"]
    )
    assert four["cached_input_share"] > 0.6, four

    # The cost at the most output throughput among the levels, at its own mix, with three prices.
    cost = claude["cost"]
    point = next(level for level in (alone, four) if level["concurrency"] == cost["concurrency"])
    hour = 12 * 2.5
    out = point["output_throughput"] * 3600
    cached = point["cached_input_throughput"] * 3600
    fresh = point["input_throughput"] * 3600 - cached
    p_out = hour / (out + 0.4 * fresh + 0.1 * cached) * 1e6
    assert cost["usd_per_1m_output"] == pytest.approx(p_out, rel=1e-3)
    assert cost["usd_per_1m_cached_input"] == pytest.approx(0.1 * p_out, abs=1e-4)  # rounded to 4 places
    hosted = (out * 0.5 + fresh * 0.2 + cached * 0.05) / 1e6
    assert cost["break_even_utilisation"] == pytest.approx(hour / hosted, rel=1e-3)
    assert cost["mix"]["cached_input"] == pytest.approx(cached / (out + fresh + cached), abs=1e-3)
    markdown = (report / "bench-serving.md").read_text()
    assert "## Claude Code profile: conversations that grow a shared prefix" in markdown
    assert f"| $ per 1M cached input tokens | {cost['usd_per_1m_cached_input']} | 0.05 |" in markdown
    assert "## Synthetic profile" not in markdown
    key = probe_key()
    for path in (path for path in report.rglob("*") if path.is_file()):
        assert key not in path.read_bytes().decode(errors="replace"), path


def test_the_benchmark_measures_the_rate_and_the_cap_the_servers_were_set_to(
    runner: Runner, paced_fleet: list[tuple[str, str]], tmp_path: Path
) -> None:
    report = tmp_path / "bench-report"
    before = served(paced_fleet)
    run = runner.playbook(PLAYBOOK, extravars={
        "bench_serving_profiles": ["synthetic"],
        "bench_serving_concurrency": [1, USERS], "bench_serving_input_tokens": 200, "bench_serving_output_tokens": 48,
        "bench_serving_requests_per_client": 2, "bench_serving_report_dir": str(report),
        "bench_serving_gpu_hour_usd": 2.5, "bench_serving_cost_min_user_tps": 15,
    })  # fmt: skip
    assert run.status == "successful", run_log(run)
    data = json.loads((report / "bench-serving.json").read_text())
    assert data["via"] == "gateway"
    assert data["targets"] == [f"https://{lab.FRONT_DOOR_ADDRESS}:443"]  # the front door, as the laptops reach it
    assert data["gpus"] == 12  # gpu-1's server (4) and gpu-2's two (8)
    alone, busy = data["levels"]
    after = served(paced_fleet)
    spread = {server: after[server] - before[server] for server in after}
    pacing = {
        f"{node}/{name}": in_node(node, "docker", "exec", name, "cat", PACE_FILE, CAP_FILE).split()
        for node, name in paced_fleet
    }
    print(f"bench: {USERS} users, busy {busy['busy_output_throughput']} tok/s, requests per server {spread}")
    assert sum(spread.values()) == 2 + 2 + 2 * USERS, spread  # two probes to size the prompts, then the levels
    for level in (alone, busy):
        assert level["failed"] == 0
        assert level["mean_output_tokens"] == 48.0
        assert level["mean_input_tokens"] == pytest.approx(200, rel=0.02)
    # One user streams at the servers' per-stream rate; 24 saturate the three servers' caps.
    assert alone["per_user_tps"] == pytest.approx(RATE, rel=0.05)
    assert busy["busy_output_throughput"] == pytest.approx(3 * CAP, rel=0.05), (busy, spread, pacing)
    assert busy["output_throughput"] <= busy["busy_output_throughput"] * 1.02
    assert busy["per_user_tps"] < RATE / 2

    # The cost is priced at the busiest level that still gives each user 15 tok/s: one user's.
    cost = data["cost"]
    assert cost["concurrency"] == 1
    hour = 12 * 2.5
    out, inp = alone["output_throughput"] * 3600, alone["input_throughput"] * 3600
    assert cost["usd_per_1m_output"] == pytest.approx(hour / (out + 0.4 * inp) * 1e6, rel=1e-3)
    assert cost["usd_per_1m_input"] == pytest.approx(0.4 * cost["usd_per_1m_output"], rel=1e-3)
    assert cost["break_even_utilisation"] == pytest.approx(hour / ((out * 0.5 + inp * 0.2) / 1e6), rel=1e-3)
    markdown = (report / "bench-serving.md").read_text()
    assert f"| $ per 1M output tokens | {cost['usd_per_1m_output']} | 0.5 |" in markdown
    assert "| maximum output throughput (tok/s) | 2591 |" in markdown

    # The chart: a valid PNG naming its series.
    chunks = png_chunks((report / "bench-serving.png").read_bytes())
    assert chunks[0][0] == b"IHDR"
    assert chunks[-1][0] == b"IEND"
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert (width, height) == (1300, 550)
    texts = dict(body.split(b"\0", 1) for kind, body in chunks if kind == b"tEXt")
    assert texts[b"Description"] == b"series: fleet,recipe,ttft_p50,ttft_p95,itl_p50,itl_p95"

    aiperf_generated_the_load_without_the_key(report, data, [alone, busy], run_log(run))


def test_bad_settings_are_refused_before_any_request(runner: Runner, paced_fleet: list[tuple[str, str]]) -> None:
    before = served(paced_fleet)
    run = runner.playbook(
        PLAYBOOK, extravars={"bench_serving_concurrency": [8, 0], "bench_serving_output_tokens": 199999}
    )
    assert run.status == "failed"
    log = run_log(run)
    assert "bench_serving_concurrency must be a list of distinct whole numbers 1-4096; got: [8, 0]" in log
    assert "bench_serving_input_tokens + bench_serving_output_tokens (1024 + 199999) exceed" in log
    assert served(paced_fleet) == before
