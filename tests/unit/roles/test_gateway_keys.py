"""The gateway's keys (glm.fleet.gateway's files/gateway_keys.py and the filters gateway_key_records
and gateway_budgets): the gateway keeps a key's SHA-256 and expiry, never the key; at each run of the
program, nginx's map of valid keys holds the developers whose key has not expired and the map of
expired ones the rest, each file replaced (root-only) only when its text changes. Its ledger adds
the servers' token counters' growth to each developer's month, and a hard budget spent puts the
developer's key in the map of the spent."""

from __future__ import annotations

import datetime
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO, load_file

from ansible_collections.glm.fleet.plugins.filter.gateway_budgets import gateway_budget_problems, gateway_budgets
from ansible_collections.glm.fleet.plugins.filter.gateway_key_records import gateway_key_records

UTC = datetime.UTC
ALICE, BOB = "a" * 48, "b" * 48


@pytest.fixture(scope="module")
def program() -> ModuleType:
    return load_file(REPO / "roles/gateway/files/gateway_keys.py")


def test_the_gateway_keeps_a_keys_hash_and_its_expiry() -> None:
    records = gateway_key_records(
        {"alice": ALICE, "bob": BOB}, {"alice": "2026-12-01T10:00:00Z", "bob": "2026-11-01T00:00:00Z"}, 90
    )
    assert records == {
        "alice": {"sha256": hashlib.sha256(ALICE.encode()).hexdigest(), "expires": "2027-03-01T10:00:00Z"},
        "bob": {"sha256": hashlib.sha256(BOB.encode()).hexdigest(), "expires": "2027-01-30T00:00:00Z"},
    }
    assert ALICE not in json.dumps(records)
    assert gateway_key_records({"alice": ALICE}, {"alice": "2026-12-01T10:00:00Z"}, 0)["alice"]["expires"] is None


@pytest.mark.parametrize("issued", ["2026-12-01", "2026-13-01T00:00:00Z", None, "2026-12-01T10:00:00Z\nx"])
def test_a_bad_moment_of_issue_is_named(issued: object) -> None:
    with pytest.raises(ValueError, match=r"the issue moment of alice's key must be YYYY-MM-DDTHH:MM:SSZ; got: "):
        gateway_key_records({"alice": ALICE}, {"alice": issued}, 90)


def test_an_expired_key_leaves_the_valid_map_for_the_expired_one(program: ModuleType) -> None:
    records = gateway_key_records({"alice": ALICE, "bob": BOB, "carol": "c" * 48},
                                  {"alice": "2026-12-01T10:00:00Z", "bob": "2026-12-01T10:00:30Z",
                                   "carol": "2026-12-01T10:00:00Z"}, 1)  # fmt: skip
    records["carol"]["expires"] = None  # a key that never expires
    keys = {"format": 1, "map_dir": "/unused", "developers": records}
    before = datetime.datetime(2026, 12, 2, 10, 0, 15, tzinfo=UTC)
    valid, expired, valid_names, expired_names = program.maps(keys, before)
    assert (valid_names, expired_names) == (["bob", "carol"], ["alice"])
    assert f'"{records["bob"]["sha256"]}" "bob";' in valid
    assert expired == f'"{records["alice"]["sha256"]}" "2026-12-02T10:00:00Z";\n'
    _valid, _expired, valid_names, expired_names = program.maps(keys, before + datetime.timedelta(seconds=15))
    assert (valid_names, expired_names) == (["carol"], ["alice", "bob"])


def test_the_maps_are_replaced_root_only_and_only_when_they_change(
    program: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.json"
    records = gateway_key_records({"alice": ALICE}, {"alice": "2020-01-01T00:00:00Z"}, 1)  # long expired
    keys.write_text(json.dumps({"format": 1, "map_dir": str(tmp_path), "developers": records}))
    for changed in (True, False):
        assert program.main([str(keys)]) == 0
        assert json.loads(capsys.readouterr().out) == {
            "changed": changed, "valid": [], "expired": ["alice"], "spent": [], "throttled": []
        }  # fmt: skip
        assert (tmp_path / "developer-keys.map").stat().st_mode & 0o777 == 0o600
    assert "alice" not in (tmp_path / "developer-keys.map").read_text().split("\n", 1)[1]
    assert records["alice"]["sha256"] in (tmp_path / "expired-keys.map").read_text()
    assert ALICE not in (tmp_path / "developer-keys.map").read_text() + (tmp_path / "expired-keys.map").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "developer-keys.map", "expired-keys.map", "keys.json", "spent-keys.map", "throttled-keys.map"
    ]  # fmt: skip


def test_a_record_nginx_could_not_read_is_refused(program: ModuleType) -> None:
    keys = {"format": 1, "map_dir": "/unused", "developers": {'al"ice': {"sha256": "0" * 64, "expires": None}}}
    with pytest.raises(ValueError, match="a developer needs a name"):
        program.maps(keys, datetime.datetime.now(UTC))


def metrics(series: dict[tuple[str, str], float]) -> str:
    """A server's /metrics text as SGLang 0.5.23 writes its token counters: (metric, labels) -> value."""
    lines = ["# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
             "# TYPE sglang:prompt_tokens_total counter"]  # fmt: skip
    lines += [f'sglang:{name}{{model_name="glm",{labels}}} {value}' for (name, labels), value in series.items()]
    return "\n".join([*lines, 'sglang:num_running_reqs{model_name="glm"} 3.0']) + "\n"


A_IN = ("prompt_tokens_total", 'developer="alice",is_streaming="true"')
A_IN_BATCH = ("prompt_tokens_total", 'developer="alice",is_streaming="false"')
A_CACHED = ("cached_tokens_total", 'developer="alice",cache_source="device"')
A_OUT = ("generation_tokens_total", 'developer="alice",is_streaming="true"')
B_IN = ("prompt_tokens_total", 'developer="bob",is_streaming="true"')
PROBE = ("prompt_tokens_total", 'developer="",is_streaming="false"')


def test_the_ledger_adds_each_servers_growth_and_a_new_process_whole(program: ModuleType) -> None:
    month = "2026-12"
    ledger = program.account({}, {"s1": metrics({A_IN: 1000, PROBE: 5}), "s2": None}, month)
    assert ledger["developers"] == {}  # first readings are the baseline; s2 did not answer
    ledger = program.account(ledger, {"s1": metrics({A_IN: 1500, A_CACHED: 300, A_OUT: 40, PROBE: 9}),
                                      "s2": metrics({B_IN: 70})}, month)  # fmt: skip
    assert ledger["developers"] == {"alice": {"input": 500, "cached_input": 300, "output": 40}}
    # s1's new process: alice's counter (1600) has passed her old one, but the probe's series is gone
    ledger = program.account(ledger, {"s1": metrics({A_IN: 1600, A_IN_BATCH: 10}), "s2": metrics({B_IN: 90})}, month)
    assert ledger["developers"] == {
        "alice": {"input": 500 + 1610, "cached_input": 300, "output": 40}, "bob": {"input": 20, "cached_input": 0,
                                                                                   "output": 0},
    }  # fmt: skip
    # a new month starts from nothing; the servers' readings go on
    ledger = program.account(
        ledger, {"s1": metrics({A_IN: 1700, A_IN_BATCH: 10}), "s2": metrics({B_IN: 90})}, "2027-01"
    )
    assert ledger["developers"] == {"alice": {"input": 100, "cached_input": 0, "output": 0}}
    assert ledger["month"] == "2027-01"


def test_a_spent_hard_budget_goes_into_the_map_and_every_budget_to_node_exporter(
    program: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = {"text": metrics({A_IN: 1000, A_OUT: 10})}

    class Server(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            assert self.path == "/metrics"
            body = served["text"].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    records = gateway_key_records({"alice": ALICE, "bob": BOB}, {"alice": "2026-12-01T10:00:00Z",
                                                                 "bob": "2026-12-01T10:00:00Z"}, 0)  # fmt: skip
    alices = {"monthly": 5000, "unit": "tokens", "hard": True, "warn_percent": 50}
    budgets = gateway_budgets(["alice", "bob"], {"monthly": 1, "unit": "usd"}, {"alice": alices}, 80)
    usage = {"ledger": str(tmp_path / "ledger.json"), "textfile": str(tmp_path / "usage.prom"),
             "workers": [f"http://127.0.0.1:{server.server_address[1]}", "http://127.0.0.1:9"],
             "prices": {"input": 0.2, "cached_input": 0.05, "output": 0.5}, "budgets": budgets}  # fmt: skip
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"format": 1, "map_dir": str(tmp_path), "developers": records, "usage": usage}))
    try:
        assert program.main([str(keys)]) == 0  # the baseline
        assert json.loads(capsys.readouterr().out)["spent"] == []
        served["text"] = metrics({A_IN: 4000, A_OUT: 510})  # alice: 3000 in + 500 out of 5000, over 50%
        assert program.main([str(keys)]) == 0
        assert json.loads(capsys.readouterr().out)["spent"] == []
        text = (tmp_path / "usage.prom").read_text()
        assert 'glm_fleet_developer_month_tokens{developer="alice",kind="input"} 3000\n' in text
        assert 'glm_fleet_developer_budget_used_ratio{developer="alice",unit="tokens",hard="true"} 0.700000\n' in text
        assert 'glm_fleet_developer_budget_warn_ratio{developer="alice"} 0.50\n' in text
        assert 'glm_fleet_developer_budget_used_ratio{developer="bob",unit="usd",hard="false"} 0.000000\n' in text
        assert (tmp_path / "usage.prom").stat().st_mode & 0o777 == 0o644
        assert (tmp_path / "ledger.json").stat().st_mode & 0o777 == 0o600
        served["text"] = metrics({A_IN: 5000, A_OUT: 1010})  # 4000 in + 1000 out: spent
        assert program.main([str(keys)]) == 0
        assert json.loads(capsys.readouterr().out) == {"changed": True, "valid": ["alice", "bob"], "expired": [],
                                                       "spent": ["alice"], "throttled": []}  # fmt: skip
        spent = (tmp_path / "spent-keys.map").read_text().split("\n", 1)[1]
        assert spent == (
            f'"{records["alice"]["sha256"]}" "alice: the monthly budget of 5000 tokens is spent (5000 tokens used in'
            f' {datetime.datetime.now(UTC):%Y-%m}); it starts anew next month, or ask your operator to raise it";\n'
        )
        assert ALICE not in spent
        assert "$" not in spent
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    ("default", "budgets", "warn", "problem"),
    [
        (
            {},
            {"alice": {"monthly": 50}},
            80,
            'gateway_developer_budgets["alice"] has no unit (and gateway_developer_budget gives none): a budget is an'
            ' amount and its unit; got: {"monthly": 50}',
        ),
        (
            {},
            {"alice": {"monthly": 50, "unit": "eur"}},
            80,
            'gateway_developer_budgets["alice"].unit must be one of usd, tokens; got: "eur"',
        ),
        (
            {},
            {"alice": {"monthly": 0, "unit": "usd"}},
            80,
            'gateway_developer_budgets["alice"].monthly must be a number above 0 (at most 4 decimals); got: 0',
        ),
        (
            {},
            {"alice": {"monthly": -5, "unit": "usd"}},
            80,
            'gateway_developer_budgets["alice"].monthly must be a number above 0 (at most 4 decimals); got: -5',
        ),
        (
            {},
            {"carol": {"monthly": 5, "unit": "usd"}},
            80,
            'gateway_developer_budgets["carol"] names no developer of gateway_developers',
        ),
        (
            {},
            {"alice": {"monthly": 5, "unit": "usd", "hard": "yes"}},
            80,
            'gateway_developer_budgets["alice"].hard must be true or false; got: "yes"',
        ),
        ({"monthly": 5}, {}, 80, "gateway_developer_budget.unit must be one of usd, tokens; got: null"),
        (
            {"monthly": 5, "unit": "usd", "limit": 3},
            {},
            80,
            'gateway_developer_budget has unknown fields ["limit"] (known: monthly, unit, warn_percent, hard)',
        ),
        ({}, {}, 0, "gateway_developer_budget_warn_percent must be a whole number from 1 to 100; got: 0"),
    ],
)
def test_a_bad_budget_is_named_with_its_value(default: dict, budgets: dict, warn: int, problem: str) -> None:
    assert gateway_budget_problems(["alice", "bob"], default, budgets, warn) == [problem]


def test_a_budget_is_the_sites_with_the_developers_own_over_it() -> None:
    budgets = gateway_budgets(["alice", "bob", "carol"], {"monthly": 100, "unit": "usd"},
                              {"bob": {"monthly": 2000000, "unit": "tokens", "hard": True}}, 80)  # fmt: skip
    assert budgets["alice"] == budgets["carol"] == {"monthly": 100.0, "unit": "usd", "warn_percent": 80, "hard": False}
    assert budgets["bob"] == {"monthly": 2000000.0, "unit": "tokens", "warn_percent": 80, "hard": True}
    assert gateway_budgets(["alice"], {}, {}, 80) == {}
    assert gateway_budget_problems(["alice", "bob"], {"monthly": 100, "unit": "usd"}, {"bob": {"hard": True}}, 80) == []


def test_a_developer_over_their_tokens_a_minute_is_throttled_until_the_next_count(program: ModuleType) -> None:
    """The tokens the servers computed (input not from the cache, and output) from the run a minute
    before to this one, per minute, against each developer's limit; an Ansible run between two of the
    timer's (20 s apart) is measured from the run a minute before it, not from the one just before."""
    ledger = program.account({}, {"s1": metrics({A_IN: 0, B_IN: 0})}, "2026-12", 970.0)
    assert program.over_tokens_per_minute(ledger, {"alice": 500, "bob": 500}) == {}  # one run: nothing to compare
    # 30 s later (the ledger's first minute): bob's 600 count as a minute's
    ledger = program.account(ledger, {"s1": metrics({A_IN: 0, B_IN: 600})}, "2026-12", 1000.0)
    assert list(program.over_tokens_per_minute(ledger, {"alice": 500, "bob": 500})) == ["bob"]
    ledger = program.account(ledger, {"s1": metrics({A_IN: 0, B_IN: 0})}, "2026-12", 1000.0)  # the server restarted
    # alice: 900 input, 300 of it cached, 20 out = 620 computed; bob 400
    ledger = program.account(
        ledger, {"s1": metrics({A_IN: 900, A_CACHED: 300, A_OUT: 20, B_IN: 400})}, "2026-12", 1060.0
    )
    over = program.over_tokens_per_minute(ledger, {"alice": 500, "bob": 500})
    assert over == {
        "alice": "this key is over its limit of 500 tokens a minute (input not from the cache and output: 620 in the"
        " last minute); retry after 60 s"
    }
    # 20 s later (a run of Ansible): from the run at 1000 to this one, 620 in 80 s is 465 a minute
    ledger = program.account(
        ledger, {"s1": metrics({A_IN: 900, A_CACHED: 300, A_OUT: 20, B_IN: 400})}, "2026-12", 1080.0
    )
    assert program.over_tokens_per_minute(ledger, {"alice": 500, "bob": 500}) == {}
    # the next minute, nothing new: under the limit again; runs older than 5 minutes are dropped
    ledger = program.account(
        ledger, {"s1": metrics({A_IN: 900, A_CACHED: 300, A_OUT: 20, B_IN: 400})}, "2026-12", 1400.0
    )
    assert program.over_tokens_per_minute(ledger, {"alice": 500, "bob": 500}) == {}
    assert [snapshot[0] for snapshot in ledger["snapshots"]] == [1400.0]
