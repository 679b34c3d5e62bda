"""glm.fleet.report_files: a report's files written in one task, only where their content differs."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.glm.fleet.plugins.modules import report_files

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)


def test_writes_the_files_then_changes_nothing(tmp_path: Path, run_main: RunMain) -> None:
    where = tmp_path / "fleet-report"
    args = {"dir": str(where), "files": {"a.json": '{"ready": 3}\n', "a.md": "| ready |\n"}}
    first = run_main(report_files.main, args)
    assert first["changed"] is True
    assert first["failed"] is False
    assert sorted(first["written"]) == [str(where / "a.json"), str(where / "a.md")]
    assert (where / "a.json").read_text() == '{"ready": 3}\n'
    assert stat.S_IMODE((where / "a.md").stat().st_mode) == 0o644
    second = run_main(report_files.main, args)
    assert (second["changed"], second["written"]) == (False, [])


def test_check_mode_and_diff_show_the_change_and_write_nothing(tmp_path: Path, run_main: RunMain) -> None:
    where = tmp_path / "r"
    where.mkdir()
    (where / "a.md").write_text("old\n")
    out = run_main(report_files.main, {"dir": str(where), "files": {"a.md": "new\n"}}, check_mode=True, diff=True)
    assert out["changed"] is True
    assert (where / "a.md").read_text() == "old\n"
    assert [(d["before"], d["after"]) for d in out["diff"]] == [("old\n", "new\n")]


def test_check_mode_on_a_missing_directory_creates_nothing(tmp_path: Path, run_main: RunMain) -> None:
    out = run_main(report_files.main, {"dir": str(tmp_path / "new"), "files": {"a": "x"}}, check_mode=True)
    assert out["changed"] is True
    assert not (tmp_path / "new").exists()


def test_a_name_with_a_directory_part_is_refused(tmp_path: Path, run_main: RunMain) -> None:
    out = run_main(report_files.main, {"dir": str(tmp_path), "files": {"../escape": "x"}})
    assert out["failed"] is True
    assert "'../escape'" in out["msg"]
    assert not (tmp_path.parent / "escape").exists()


def test_a_bad_mode_is_refused_naming_it(tmp_path: Path, run_main: RunMain) -> None:
    out = run_main(report_files.main, {"dir": str(tmp_path), "files": {"a": "x"}, "mode": "rw"})
    assert out["failed"] is True
    assert "'rw'" in out["msg"]
    assert not (tmp_path / "a").exists()
