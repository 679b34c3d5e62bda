"""The gateway's keys (glm.fleet.gateway's files/gateway_keys.py and the filter gateway_key_records):
the gateway keeps a key's SHA-256 and expiry, never the key; at each run of the program, nginx's map
of valid keys holds the developers whose key has not expired and the map of expired ones the rest,
each file replaced (root-only) only when its text changes."""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO, load_file

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
        assert json.loads(capsys.readouterr().out) == {"changed": changed, "valid": [], "expired": ["alice"]}
        assert (tmp_path / "developer-keys.map").stat().st_mode & 0o777 == 0o600
    assert "alice" not in (tmp_path / "developer-keys.map").read_text().split("\n", 1)[1]
    assert records["alice"]["sha256"] in (tmp_path / "expired-keys.map").read_text()
    assert ALICE not in (tmp_path / "developer-keys.map").read_text() + (tmp_path / "expired-keys.map").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["developer-keys.map", "expired-keys.map", "keys.json"]


def test_a_record_nginx_could_not_read_is_refused(program: ModuleType) -> None:
    keys = {"format": 1, "map_dir": "/unused", "developers": {'al"ice': {"sha256": "0" * 64, "expires": None}}}
    with pytest.raises(ValueError, match="a developer needs a name"):
        program.maps(keys, datetime.datetime.now(UTC))
