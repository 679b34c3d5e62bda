"""Older revisions of a repository removed from a Hugging Face cache beyond a retention."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils._hf_prune import named_revisions, prune, stale_revisions

CUR, PREV, OLD, OLDEST = ("c" * 40, "b" * 40, "a" * 40, "9" * 40)


def revision(repo: Path, name: str, files: dict[str, str], when: float) -> None:
    """A snapshot directory of links to blobs (file name to blob name), as huggingface_hub lays it out."""
    snap = repo / "snapshots" / name
    for path, blob in files.items():
        (repo / "blobs").mkdir(parents=True, exist_ok=True)
        (repo / "blobs" / blob).write_text(blob * 10)
        link = snap / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(repo / "blobs" / blob, link.parent))
    os.utime(snap, (when, when))


def test_stale_revisions_keep_the_newest_others_the_current_and_the_protected() -> None:
    times = {CUR: 10.0, PREV: 9.0, OLD: 8.0, OLDEST: 7.0}
    assert stale_revisions(times, CUR, 1, set()) == [OLDEST, OLD]
    assert stale_revisions(times, CUR, 0, set()) == [OLDEST, OLD, PREV]
    assert stale_revisions(times, CUR, 0, {OLD}) == [OLDEST, PREV]
    assert stale_revisions(times, CUR, 5, set()) == []
    # The current revision stays however old it is (a rollback to an older pin).
    assert CUR not in stale_revisions({**times, CUR: 1.0}, CUR, 0, set())


def test_prune_removes_snapshots_their_own_blobs_and_refs_only(tmp_path: Path) -> None:
    repo = tmp_path / "models--zai-org--GLM-5.3-Flash"
    revision(repo, OLDEST, {"config.json": "cfg1", "model.safetensors": "w1"}, 100)
    revision(repo, OLD, {"config.json": "cfg1", "model.safetensors": "w2"}, 200)
    revision(repo, PREV, {"config.json": "cfg2", "model.safetensors": "w2"}, 300)
    revision(repo, CUR, {"config.json": "cfg2", "sub/model.safetensors": "w3"}, 400)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(OLDEST)
    (repo / "refs" / "release").write_text(CUR)
    (repo / "blobs" / "w9.incomplete").write_text("partial")  # another download's: not this prune's

    removed, freed = prune(repo, CUR, 1, set(), check=True)
    assert (removed, freed) == ([OLDEST, OLD], len("w1" * 10) + len("cfg1" * 10))
    assert (repo / "snapshots" / OLDEST).is_dir()  # check mode: nothing removed

    removed, freed = prune(repo, CUR, 1, set(), check=False)
    assert removed == [OLDEST, OLD]
    assert sorted(p.name for p in (repo / "snapshots").iterdir()) == [PREV, CUR]
    # w1 went with the oldest; cfg1 too (only the removed ones linked it); w2 stays for PREV.
    assert sorted(p.name for p in (repo / "blobs").iterdir()) == ["cfg2", "w2", "w3", "w9.incomplete"]
    assert freed == len("w1" * 10) + len("cfg1" * 10)
    assert not (repo / "refs" / "main").exists()
    assert (repo / "refs" / "release").read_text() == CUR
    assert (repo / "snapshots" / CUR / "sub" / "model.safetensors").read_text() == "w3" * 10
    # Nothing more to remove: a second run changes nothing.
    assert prune(repo, CUR, 1, set(), check=False) == ([], 0)


def test_an_empty_cache_has_nothing_to_prune(tmp_path: Path) -> None:
    assert prune(tmp_path / "models--x--y", CUR, 0, set(), check=False) == ([], 0)


def test_revisions_named_by_units_and_last_good_copies_are_found(tmp_path: Path) -> None:
    units = tmp_path / "system"
    (units / "multi-user.target.wants").mkdir(parents=True)
    (units / "glm.service").write_text(f"ExecStart=/usr/bin/docker run ... --revision {CUR} \\\n  --tp 4\n")
    last_good = tmp_path / "last-good" / "glm"
    last_good.mkdir(parents=True)
    (last_good / "%2Fetc%2Fsystemd%2Fsystem%2Fglm.service").write_text(f"--revision={PREV}\n--revision {'d' * 41}\n")
    found = named_revisions([units, tmp_path / "last-good", tmp_path / "missing"])
    assert found == {CUR, PREV}
