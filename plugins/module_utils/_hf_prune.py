# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Older revisions of one repository in a Hugging Face cache, removed beyond a retention: their
snapshot directories, the blobs no other revision links, and the refs that name them."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

REVISION_ARG = re.compile(r"--revision[= ]+([0-9a-f]{40})(?![0-9a-f])")


def stale_revisions(revisions: dict[str, float], current: str, keep: int, protect: set[str]) -> list[str]:
    """revisions: snapshot name to its time. The revisions older than the `keep` newest others,
    never the current one or a protected one (one a server's unit or last good version names)."""
    others = sorted((r for r in revisions if r != current), key=lambda r: (revisions[r], r), reverse=True)
    return sorted(r for r in others[max(keep, 0) :] if r not in protect)


def named_revisions(paths: list[Path]) -> set[str]:
    """The revisions named as `--revision <40 hex>` in the files at or under `paths` (a server's
    unit, its last good version); a path that does not exist names none."""
    out: set[str] = set()
    for base in paths:
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        for path in files:
            try:
                if path.stat().st_size <= 1 << 20:
                    out |= set(REVISION_ARG.findall(path.read_text(errors="replace")))
            except OSError:
                continue
    return out


def linked_blobs(snapshot: Path) -> set[str]:
    """The blob names a snapshot's links point at."""
    out = set()
    for root, _dirs, files in os.walk(snapshot):
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                out.add(Path(os.readlink(path)).name)
    return out


def snapshot_times(repo: Path) -> dict[str, float]:
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return {}
    return {d.name: d.stat().st_mtime for d in snapshots.iterdir() if d.is_dir() and not d.is_symlink()}


def prune(repo: Path, current: str, keep: int, protect: set[str], check: bool) -> tuple[list[str], int]:
    """Remove the stale revisions of the repository at `repo` (models--org--name). Returns them and
    the bytes of the blobs that went with them (blobs another revision links stay)."""
    revisions = snapshot_times(repo)
    stale = stale_revisions(revisions, current, keep, protect)
    if not stale:
        return [], 0
    kept = set().union(*(linked_blobs(repo / "snapshots" / r) for r in revisions if r not in stale))
    dropped = set().union(*(linked_blobs(repo / "snapshots" / r) for r in stale)) - kept
    blobs = [repo / "blobs" / name for name in sorted(dropped) if (repo / "blobs" / name).is_file()]
    freed = sum(blob.stat().st_size for blob in blobs)
    if check:
        return stale, freed
    for revision in stale:
        shutil.rmtree(repo / "snapshots" / revision)
    for blob in blobs:
        blob.unlink()
    refs = repo / "refs"
    if refs.is_dir():
        for ref in refs.rglob("*"):
            if ref.is_file() and ref.read_text().strip() in stale:
                ref.unlink()
    return stale, freed
