"""glm.fleet.file_snapshot: a set of files saved as they are and put back as they were."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.modules import file_snapshot
from ansible_collections.glm.fleet.plugins.modules.file_snapshot import restore, save, stored_name

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_restore_puts_back_contents_modes_and_absence(tmp_path: Path) -> None:
    unit, env, config = tmp_path / "a.service", tmp_path / "a.env", tmp_path / "a.yaml"
    unit.write_text("old unit\n")
    unit.chmod(0o644)
    config.write_text("api-key: old\n")
    config.chmod(0o600)
    snap = tmp_path / "previous" / "a"
    files = save([str(unit), str(env), str(config)], str(snap), check=False)
    assert [(f["present"], f["changed"]) for f in files] == [(True, True), (False, True), (True, True)]
    assert mode(snap) == 0o700
    assert all(mode(p) == 0o600 for p in snap.iterdir())
    assert (snap / stored_name(str(unit))).read_text() == "old unit\n"

    # The new version: a changed unit, an env file that did not exist, the config gone.
    unit.write_text("new unit\n")
    env.write_text("FAULT=1\n")
    config.unlink()
    files = restore(str(snap), check=False, only=[])
    assert {f["path"]: f["changed"] for f in files} == {str(unit): True, str(env): True, str(config): True}
    assert unit.read_text() == "old unit\n"
    assert mode(unit) == 0o644
    assert not env.exists()
    assert config.read_text() == "api-key: old\n"
    assert mode(config) == 0o600
    # Restored: restoring again changes nothing.
    assert not any(f["changed"] for f in restore(str(snap), check=False, only=[]))


def test_a_snapshot_that_no_longer_keeps_a_file_removes_its_copy(tmp_path: Path) -> None:
    """The server role kept its key file in earlier snapshots: a snapshot without it leaves no copy."""
    unit, config = tmp_path / "a.service", tmp_path / "a.yaml"
    unit.write_text("unit\n")
    config.write_text("api-key: leaked\n")
    snap = tmp_path / "last-good" / "a"
    save([str(unit), str(config)], str(snap), check=False)
    files = save([str(unit)], str(snap), check=True)
    assert {f["path"]: f["changed"] for f in files} == {str(unit): False, str(config): True}
    assert (snap / stored_name(str(config))).exists()  # check mode writes nothing
    save([str(unit)], str(snap), check=False)
    assert sorted(p.name for p in snap.iterdir()) == sorted(["manifest.json", stored_name(str(unit))])
    assert not any("leaked" in p.read_text() for p in snap.iterdir())
    assert not any(f["changed"] for f in save([str(unit)], str(snap), check=False))


def test_restoring_some_paths_leaves_the_others_as_they_are(tmp_path: Path) -> None:
    """A rollback puts back the unit and the environment, never the keys of an older version."""
    unit, config = tmp_path / "a.service", tmp_path / "a.yaml"
    unit.write_text("old unit\n")
    config.write_text("api-key: old\n")
    snap = tmp_path / "last-good" / "a"
    save([str(unit), str(config)], str(snap), check=False)  # an older snapshot, with the keys
    unit.write_text("new unit\n")
    config.write_text("api-key: rotated\n")
    files = restore(str(snap), check=False, only=[str(unit)])
    assert [(f["path"], f["changed"]) for f in files] == [(str(unit), True)]
    assert unit.read_text() == "old unit\n"
    assert config.read_text() == "api-key: rotated\n"


def test_saving_the_same_files_again_changes_nothing(tmp_path: Path) -> None:
    unit = tmp_path / "a.service"
    unit.write_text("unit\n")
    snap = tmp_path / "snap"
    save([str(unit)], str(snap), check=False)
    before = {p.name: p.stat().st_mtime_ns for p in snap.iterdir()}
    assert not any(f["changed"] for f in save([str(unit)], str(snap), check=False))
    assert {p.name: p.stat().st_mtime_ns for p in snap.iterdir()} == before
    unit.write_text("unit 2\n")
    assert [f["changed"] for f in save([str(unit)], str(snap), check=False)] == [True]
    assert (snap / stored_name(str(unit))).read_text() == "unit 2\n"


def test_check_mode_reports_without_writing(tmp_path: Path) -> None:
    unit = tmp_path / "a.service"
    unit.write_text("unit\n")
    snap = tmp_path / "snap"
    assert [f["changed"] for f in save([str(unit)], str(snap), check=True)] == [True]
    assert not snap.exists()
    save([str(unit)], str(snap), check=False)
    unit.write_text("changed\n")
    assert [f["changed"] for f in restore(str(snap), check=True, only=[])] == [True]
    assert unit.read_text() == "changed\n"


def test_restoring_without_a_snapshot_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"no snapshot in {tmp_path}"):
        restore(str(tmp_path), check=False, only=[])


def test_stored_names_cannot_collide() -> None:
    assert stored_name("/etc/a%2Fb") != stored_name("/etc/a/b")
    assert os.sep not in stored_name("/etc/systemd/system/x.service")


def test_diff_shows_sizes_of_what_changes_never_contents(run_main: RunMain, tmp_path: Path) -> None:
    unit, env = tmp_path / "a.service", tmp_path / "a.env"
    unit.write_text("old unit\n")
    env.write_text("SGLANG_API_KEY=a-secret-of-the-server\n")
    snap = tmp_path / "previous" / "a"
    args = {"paths": [str(unit), str(env)], "dest": str(snap)}
    saved = run_main(file_snapshot.main, args, check_mode=True, diff=True)
    assert saved["changed"] is True
    assert not snap.exists()
    assert {d["after_header"]: d["after"] for d in saved["diff"]} == {
        str(unit): "(9 bytes, not shown)\n",
        str(env): "(38 bytes, not shown)\n",
    }
    run_main(file_snapshot.main, args)
    unit.write_text("new unit, longer\n")
    restored = run_main(file_snapshot.main, {"dest": str(snap), "state": "restored"}, check_mode=True, diff=True)
    assert [(d["before"], d["after"]) for d in restored["diff"]] == [
        ("(17 bytes, not shown)\n", "(9 bytes, not shown)\n")
    ]
    assert "a-secret-of-the-server" not in repr(restored)
    assert unit.read_text() == "new unit, longer\n"
