"""glm.fleet.stage_receipt: a receipt recorded after a role stands until its inputs or what it looks at change."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ansible_collections.glm.fleet.plugins.modules.stage_receipt import check, entry_problem, record

DIGEST = "a" * 64


def run(argv: list[str]) -> str:
    raise AssertionError(f"no command expected: {argv}")


def entry(tmp_path: Path, digest: str = DIGEST) -> dict:
    return {"name": "nvidia_container_toolkit", "digest": digest,
            "observe": {"files": [str(tmp_path / "daemon.json")], "trees": [str(tmp_path / "snap")]}}  # fmt: skip


def test_a_recorded_receipt_stands_until_a_file_changes(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text('{"runtimes": {}}\n')
    (tmp_path / "snap").mkdir()
    root = tmp_path / "receipts"
    assert check([entry(tmp_path)], str(root), run) == {"nvidia_container_toolkit": (
        "no receipt: the role has not converged on this host with this collection")}  # fmt: skip
    assert record([entry(tmp_path)], str(root), run, check_mode=False)[0] == ["nvidia_container_toolkit"]
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "nvidia_container_toolkit.json").stat().st_mode) == 0o600
    assert check([entry(tmp_path)], str(root), run) == {}
    # Recording the same again writes nothing.
    assert record([entry(tmp_path)], str(root), run, check_mode=False) == ([], [])

    (tmp_path / "daemon.json").write_text("{}\n")
    why = check([entry(tmp_path)], str(root), run)["nvidia_container_toolkit"]
    assert why.startswith(f"changed since its receipt: file {tmp_path / 'daemon.json'}: ")
    (tmp_path / "daemon.json").unlink()
    assert check([entry(tmp_path)], str(root), run)["nvidia_container_toolkit"].endswith("-> absent")


def test_other_inputs_make_the_receipt_stale_without_a_look(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text("{}\n")
    record([entry(tmp_path)], str(tmp_path / "r"), run, check_mode=False)
    stale = check([entry(tmp_path, "b" * 64)], str(tmp_path / "r"), run)
    assert stale == {"nvidia_container_toolkit": "the role's settings or code changed since its receipt"}


def test_a_file_added_in_a_watched_tree_makes_it_stale(tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    record([entry(tmp_path)], str(tmp_path / "r"), run, check_mode=False)
    (tmp_path / "snap" / "extra").write_text("x")
    assert "tree " in check([entry(tmp_path)], str(tmp_path / "r"), run)["nvidia_container_toolkit"]


def test_check_mode_records_nothing(tmp_path: Path) -> None:
    assert record([entry(tmp_path)], str(tmp_path / "r"), run, check_mode=True)[0] == ["nvidia_container_toolkit"]
    assert not (tmp_path / "r").exists()


def test_the_diff_says_what_changed_and_shows_no_hash(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text('{"key": "a secret"}\n')
    (tmp_path / "snap").mkdir()
    root = str(tmp_path / "r")
    first = record([entry(tmp_path)], root, run, check_mode=False)[1]
    path = f"{root}/nvidia_container_toolkit.json"
    assert first[0]["before_header"] == f"{path} (absent)"
    assert first[0]["before"] == ""
    assert f"file {tmp_path / 'daemon.json'}: content=other gid=" in first[0]["after"]
    (tmp_path / "daemon.json").write_text('{"key": "another secret"}\n')
    (tmp_path / "snap" / "shard").write_text("x")
    second = record([entry(tmp_path, "b" * 64)], root, run, check_mode=True)[1]
    assert second[0]["before"].splitlines()[0] == second[0]["after"].splitlines()[0] == "inputs: other settings or code"
    assert "content=other" in second[0]["after"]
    assert f"tree {tmp_path / 'snap'}: other files" in second[0]["after"]
    receipt = (tmp_path / "r" / "nvidia_container_toolkit.json").read_text()
    hashes = [word.strip('",') for word in receipt.split() if len(word.strip('",')) == 64]
    assert hashes  # the receipt holds the digest and the file's sha256; the diff holds neither
    assert not any(h in second[0]["before"] + second[0]["after"] + first[0]["after"] for h in [*hashes, DIGEST])


def test_a_corrupt_receipt_is_stale(tmp_path: Path) -> None:
    record([entry(tmp_path)], str(tmp_path / "r"), run, check_mode=False)
    (tmp_path / "r" / "nvidia_container_toolkit.json").write_text("{")
    assert "no receipt" in check([entry(tmp_path)], str(tmp_path / "r"), run)["nvidia_container_toolkit"]


@pytest.mark.parametrize(
    ("bad", "state", "problem"),
    [
        ({"name": "../etc/passwd"}, "check", "name must be a role name; got '../etc/passwd'"),
        ({"name": "Monitoring"}, "check", "got 'Monitoring'"),
        ({"digest": "abc"}, "check", "digest must be 64 lowercase hex; got 'abc'"),
        ({"observe": None}, "record", "observe must be a mapping"),
        ({"observe": None}, "check", None),
    ],
)
def test_bad_entries_are_refused_naming_the_value(tmp_path: Path, bad: dict, state: str, problem: str | None) -> None:
    good = {"name": "exporters", "digest": DIGEST, "observe": {"units": ["x.service"]}}
    assert entry_problem(good, state) is None
    got = entry_problem({**good, **bad}, state)
    assert got == problem if problem is None else problem in (got or "")
