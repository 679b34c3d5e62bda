"""AIPerf as the load generator: its configuration never carries the key, and its records (as
AIPerf 0.13.0 wrote them against the SGLang stand-in) become the benchmark's samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _aiperf
from ansible_collections.glm.fleet.plugins.module_utils._bench_metrics import level_metrics

RECORDS = Path(__file__).parent / "data" / "aiperf-0.13.0-records.jsonl"


def config(**overrides: object) -> dict:
    args = {
        "urls": ["https://gw:443", "http://s2:18080"], "model": "glm", "concurrency": 8, "requests": 32,
        "isl": 1006, "osl": 1024, "timeout": 600, "seed": 3, "tokenizer": "/t", "artifacts": "/a", "with_key": True,
    }  # fmt: skip
    return _aiperf.level_config(**{**args, **overrides})  # type: ignore[arg-type]


def test_the_configuration_names_the_keys_variable_and_sets_a_closed_loop() -> None:
    bench = config()["benchmark"]
    assert bench["endpoint"]["api_key"] == "${GLM_FLEET_BENCH_API_KEY}"
    assert bench["endpoint"]["urls"] == ["https://gw:443", "http://s2:18080"]
    assert bench["endpoint"]["streaming"] is True
    assert bench["endpoint"]["use_server_token_count"] is True
    assert bench["endpoint"]["extra"] == {"ignore_eos": True}
    assert bench["phases"] == [
        {"name": "profiling", "kind": "profiling", "type": "concurrency", "requests": 32, "concurrency": 8}
    ]
    assert bench["datasets"][0]["prompts"] == {"isl": {"mean": 1006, "stddev": 0}, "osl": {"mean": 1024, "stddev": 0}}
    assert bench["datasets"][0]["entries"] == 32
    assert "api_key" not in config(with_key=False)["benchmark"]["endpoint"]


def test_conversations_are_aiperfs_multi_turn_dataset_with_a_shared_system_prompt() -> None:
    sessions = {"count": 16, "turns": 8, "system": 12000, "context": 4000}
    bench = config(isl=4000, osl=800, sessions=sessions)["benchmark"]
    dataset = bench["datasets"][0]
    assert dataset["entries"] == 16
    assert dataset["prefix_prompts"] == {"shared_system_length": 12000, "user_context_length": 4000}
    assert dataset["turns"] == {"mean": 8, "stddev": 0}
    assert dataset["turn_delay"] == {"mean": 0, "stddev": 0}
    assert dataset["prompts"] == {"isl": {"mean": 4000, "stddev": 0}, "osl": {"mean": 800, "stddev": 0}}
    assert bench["phases"] == [
        {"name": "profiling", "kind": "profiling", "type": "concurrency", "sessions": 16, "concurrency": 8}
    ]


def test_a_record_of_a_conversation_carries_its_cached_input_and_its_place() -> None:
    line = json.loads(RECORDS.read_text().splitlines()[0])
    line["metrics"]["usage_prompt_cache_read_tokens"] = {"value": 192, "unit": "tokens"}
    line["metadata"].update(conversation_id="session_000003", turn_index=2)
    (sample,) = _aiperf.samples([json.dumps(line)])
    assert (sample["cached_tokens"], sample["session"], sample["turn"]) == (192, "session_000003", 2)
    (plain,) = _aiperf.samples(RECORDS.read_text().splitlines()[:1])
    assert plain["cached_tokens"] == 0


def test_with_conversations_a_client_is_idle_once_no_conversation_is_left() -> None:
    # 2 clients, 3 conversations of 2 turns: a ends at 2, b at 3, c (started at 2) at 5. The last
    # conversation starts when the first ends, so from the second one's end one client is idle.
    turns = (("a", 0, 1), ("a", 1, 2), ("b", 0, 1.5), ("b", 1.5, 3), ("c", 2, 4), ("c", 4, 5))
    level = [{"ok": True, "start": s, "end": e, "session": n} for n, s, e in turns]
    assert _aiperf.span(level, 2) == (5.0, (0.0, 3.0))


def test_aiperf_gets_nothing_of_the_controllers_environment_but_what_it_needs() -> None:
    controller = {
        "PATH": "/usr/bin", "HOME": "/home/op", "LANG": "C.UTF-8", "AIPERF_HTTP_CONNECTION_LIMIT": "64",
        "ANSIBLE_VAULT_PASSWORD_FILE": "/home/op/.vault", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "SSH_AUTH_SOCK": "/run/user/1000/ssh-agent.sock", "PYTHONPATH": "/home/op/lib", "OPENAI_API_KEY": "sk-other",
    }  # fmt: skip
    assert _aiperf.environment(controller, "sk-new", None) == {
        "PATH": "/usr/bin", "HOME": "/home/op", "LANG": "C.UTF-8", "AIPERF_HTTP_CONNECTION_LIMIT": "64",
        "GLM_FLEET_BENCH_API_KEY": "sk-new",
    }  # fmt: skip


def test_the_key_goes_to_aiperfs_environment_alone() -> None:
    env = _aiperf.environment({"PATH": "/bin", "GLM_FLEET_BENCH_API_KEY": "stale"}, "sk-new", "/ca.pem")
    assert env == {"PATH": "/bin", "GLM_FLEET_BENCH_API_KEY": "sk-new", "SSL_CERT_FILE": "/ca.pem"}
    assert _aiperf.environment({"GLM_FLEET_BENCH_API_KEY": "stale"}, None, None) == {}


def test_records_become_samples_with_the_servers_token_counts() -> None:
    ok, again, failed = _aiperf.samples(RECORDS.read_text().splitlines())
    assert ok["ok"]
    assert again["ok"]
    assert ok["input_tokens"] == 218  # usage.prompt_tokens: the chat template included
    assert ok["output_tokens"] == 48
    assert len(ok["itl"]) == 47
    assert ok["ttft"] == pytest.approx(0.061268173)
    assert ok["latency"] == pytest.approx(3.195144991)
    assert ok["end"] - ok["start"] == pytest.approx(ok["latency"], abs=0.02)
    assert failed == {
        "ok": False,
        "error": '401 Unauthorized: {"error": "Unauthorized"}',
        "start": pytest.approx(1796118405.596483),
    }


def test_warm_up_records_are_left_out() -> None:
    line = json.loads(RECORDS.read_text().splitlines()[0])
    line["metadata"]["benchmark_phase"] = "warmup"
    assert _aiperf.samples([json.dumps(line), ""]) == []


def test_the_busy_window_ends_when_the_first_client_runs_out_of_requests() -> None:
    # 2 clients, 4 requests: answers at 1, 2, 3, 4; the last request goes out at the 2nd answer, so
    # from the 3rd answer on one client is idle.
    level = [{"ok": True, "start": s, "end": e} for s, e in ((0.0, 1.0), (0.0, 2.0), (1.0, 3.0), (2.0, 4.0))]
    assert _aiperf.span(level, 2) == (4.0, (0.0, 3.0))
    assert _aiperf.span([], 2) == (0.0, (0.0, 0.0))
    failed = [{"ok": False, "start": 5.0}]
    assert _aiperf.span(failed, 1) == (0.0, (5.0, 5.0))


def test_a_level_of_aiperf_records_has_sglangs_figures() -> None:
    level = _aiperf.samples(RECORDS.read_text().splitlines())
    duration, window = _aiperf.span(level, 2)
    figures = level_metrics(2, level, duration, window)
    assert figures["completed"] == 2
    assert figures["failed"] == 1
    assert figures["first_error"].startswith("401 Unauthorized")
    assert figures["mean_output_tokens"] == 48.0
    assert figures["per_user_tps"] == pytest.approx(15.0, rel=0.01)  # the stand-in's 60 tok/s over 4 streams


def test_a_rerun_never_reads_the_last_runs_records(tmp_path: Path) -> None:
    artifacts = tmp_path / "concurrency-1"
    artifacts.mkdir()
    (artifacts / "profile_export.jsonl").write_text("old\n")
    (artifacts / "profile_export_aiperf.json").write_text('{"aiperf_version": "0.1"}')
    _aiperf.prepare(str(artifacts))
    assert _aiperf.read_records(str(artifacts)) is None
    assert _aiperf.read_version(str(artifacts)) is None
    (artifacts / "profile_export_aiperf.json").write_text('{"aiperf_version": "0.13.0"}')
    assert _aiperf.read_version(str(artifacts)) == "0.13.0"
    assert _aiperf.own_figures(str(artifacts)) is None
