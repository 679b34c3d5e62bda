# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's AIPerf as the serving benchmark's load generator: one concurrency level's configuration
file, the run, and its per-request records turned into the benchmark's samples
(glm.fleet's _bench_metrics computes the figures from them, with SGLang's definitions).

The key never reaches AIPerf's argv or its configuration file: the file names an environment
variable (`${GLM_FLEET_BENCH_API_KEY}`, AIPerf's own substitution), set only in AIPerf's
environment. AIPerf writes `<redacted>` for it in its exports.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Iterable, Mapping, Sequence

KEY_VARIABLE = "GLM_FLEET_BENCH_API_KEY"
RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"


def level_config(
    *,
    urls: Sequence[str],
    model: str,
    concurrency: int,
    requests: int,
    isl: int,
    osl: int,
    timeout: float,
    seed: int,
    tokenizer: str,
    artifacts: str,
    with_key: bool,
    sessions: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """AIPerf's configuration (its `benchmark:` envelope) for one closed-loop level: `concurrency`
    streams of chat completions, `requests` in all, each `isl` prompt tokens (AIPerf's count, before
    the chat template) and exactly `osl` output tokens (SGLang's ignore_eos), token counts from the
    server's usage, round-robin over `urls`.

    With `sessions` ({count, turns, system, context}), the level is `count` conversations instead,
    `concurrency` at a time, each `turns` requests in order: a system prompt of `system` tokens that
    every conversation shares, `context` tokens of the conversation's own, then turns of `isl`
    tokens each, every turn sending the whole conversation so far with the server's own answers
    (AIPerf's multi-turn synthetic dataset, whose history carries the live responses)."""
    endpoint: dict[str, Any] = {
        "urls": list(urls),
        "type": "chat",
        "timeout": float(timeout),
        "streaming": True,
        "use_server_token_count": True,
        "extra": {"ignore_eos": True},
    }
    if with_key:
        endpoint["api_key"] = "${" + KEY_VARIABLE + "}"
    dataset: dict[str, Any] = {
        "name": "main", "type": "synthetic", "entries": requests, "random_seed": seed,
        "prompts": {"isl": {"mean": isl, "stddev": 0}, "osl": {"mean": osl, "stddev": 0}},
    }  # fmt: skip
    phase: dict[str, Any] = {"name": "profiling", "kind": "profiling", "type": "concurrency",
                             "requests": requests, "concurrency": concurrency}  # fmt: skip
    if sessions:
        dataset.update(
            entries=sessions["count"],
            prefix_prompts={"shared_system_length": sessions["system"], "user_context_length": sessions["context"]},
            turns={"mean": sessions["turns"], "stddev": 0},
            turn_delay={"mean": 0, "stddev": 0},
        )
        del phase["requests"]
        phase["sessions"] = sessions["count"]
    return {
        "benchmark": {
            "models": [model],
            "endpoint": endpoint,
            "datasets": [dataset],
            "phases": [phase],
            "artifacts": {"dir": artifacts, "auto_plot": False, "plot_required": False},
            "tokenizer": {"name": tokenizer},
            "gpu_telemetry": {"enabled": False},
            "server_metrics": {"enabled": False},
            "runtime": {"ui": "none"},
            "logging": {"level": "WARNING"},
        }
    }  # fmt: skip


# What AIPerf gets of the controller's environment: where programs and its home are, the locale, the
# temporary directory and the time zone, and its own settings. Nothing else (the controller's
# environment may hold vault passwords, cloud credentials or SSH agent sockets).
PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")


def environment(base: Mapping[str, str], api_key: str | None, ca_file: str | None) -> dict[str, str]:
    """AIPerf's environment: PASSED and AIPERF_* of the caller's, the key under KEY_VARIABLE, and the
    CA bundle that Python's default TLS context (AIPerf's aiohttp sessions) trusts."""
    env = {k: v for k, v in base.items() if (k in PASSED or k.startswith("AIPERF_")) and k != KEY_VARIABLE}
    if api_key:
        env[KEY_VARIABLE] = api_key
    if ca_file:
        env["SSL_CERT_FILE"] = ca_file
    return env


def run(aiperf: str, config_file: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`aiperf profile --config <file>`; its exit status is 1 when every request failed, which the
    records say better, so the caller reads them whatever the status."""
    # Not AnsibleModule.run_command: AIPerf gets an environment of its own (env), not the module's plus
    # additions, so that no variable of the caller's that names the key reaches it.
    return subprocess.run(  # pylint: disable=ansible-bad-function
        [aiperf, "profile", "--config", config_file], env=dict(env), capture_output=True, text=True, check=False
    )


def _ms(metrics: Mapping[str, Any], name: str) -> float:
    return float(metrics[name]["value"]) / 1000


def sample(record: Mapping[str, Any]) -> dict[str, Any]:
    """One AIPerf record (a line of profile_export.jsonl) as a benchmark sample (seconds)."""
    meta = record.get("metadata", {})
    start = int(meta.get("request_start_ns", 0)) / 1e9
    error = record.get("error")
    metrics = record.get("metrics", {})
    if error or "time_to_first_token" not in metrics:
        detail = f"{error.get('code')} {error.get('type')}: {error.get('message')}" if error else "no token arrived"
        return {"ok": False, "error": detail, "start": start}
    return {
        "ok": True,
        "error": None,
        "start": start,
        "end": int(meta["request_end_ns"]) / 1e9,
        "ttft": _ms(metrics, "time_to_first_token"),
        "latency": _ms(metrics, "request_latency"),
        "itl": [gap / 1000 for gap in metrics.get("inter_chunk_latency", {}).get("value", [])],
        "input_tokens": int(metrics["usage_prompt_tokens"]["value"]),
        "cached_tokens": int(metrics.get("usage_prompt_cache_read_tokens", {}).get("value") or 0),
        "output_tokens": int(metrics["usage_completion_tokens"]["value"]),
        "session": meta.get("conversation_id"),
        "turn": int(meta.get("turn_index") or 0),
    }


def samples(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The profiling phase's records (warm-up records, if any, left out) as samples."""
    out = []
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("metadata", {}).get("benchmark_phase", "profiling") == "profiling":
            out.append(sample(record))
    return out


def span(level: Sequence[Mapping[str, Any]], concurrency: int) -> tuple[float, tuple[float, float]]:
    """The level's duration (first request sent to last answer done) and the window in which every
    client was busy: a closed loop of `concurrency` clients sends its last request at the
    (requests - concurrency)-th answer, so from the next answer on, fewer clients are busy. With
    conversations (samples with a `session`), a client is idle from the moment a conversation ends
    and none is left to start: the (conversations - concurrency)-th conversation's last answer."""
    if not level:
        return 0.0, (0.0, 0.0)
    begin = min(s["start"] for s in level)
    ends = sorted(s.get("end", s["start"]) for s in level)
    units = ends
    if any(s.get("session") is not None for s in level):
        last: dict[Any, float] = {}
        for s in level:
            last[s.get("session")] = max(last.get(s.get("session"), 0.0), s.get("end", s["start"]))
        units = sorted(last.values())
    idle = units[max(0, len(units) - concurrency)]
    return ends[-1] - begin, (begin, idle)


def prepare(artifacts: str) -> None:
    """A level's artifacts directory, without the exports of an earlier run (a run that fails
    before it writes must not be read as the earlier run's records)."""
    os.makedirs(artifacts, mode=0o700, exist_ok=True)
    for name in (RECORDS, SUMMARY):
        path = os.path.join(artifacts, name)
        if os.path.exists(path):
            os.remove(path)


def read_records(artifacts: str) -> list[str] | None:
    path = os.path.join(artifacts, RECORDS)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.readlines()


def read_version(artifacts: str) -> str | None:
    """The AIPerf version that wrote a level's summary export."""
    try:
        with open(os.path.join(artifacts, SUMMARY), encoding="utf-8") as f:
            return str(json.load(f)["aiperf_version"])
    except (OSError, ValueError, KeyError):
        return None


def own_figures(artifacts: str) -> dict[str, float] | None:
    """AIPerf's own figures for a level (its summary export), beside those computed from its records:
    output tok/s, the median per-user tok/s and TTFT p50 (ms)."""
    try:
        with open(os.path.join(artifacts, SUMMARY), encoding="utf-8") as f:
            summary = json.load(f)
        return {
            "output_throughput": round(float(summary["output_token_throughput"]["avg"]), 2),
            "per_user_tps_p50": round(float(summary["output_token_throughput_per_user"]["p50"]), 2),
            "ttft_p50_ms": round(float(summary["time_to_first_token"]["p50"]), 2),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None
