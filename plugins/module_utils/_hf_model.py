# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Hugging Face snapshot as data: its files (entries), their checks, and the manifest.

An entry's ETAG is the file's sha256 for LFS files and its git blob id for the others, as the Hub
sends it; a manifest lists a revision's entries and travels to the GPU nodes from the site cache,
trusted only with the sha256 that Ansible hands over (its trust anchor).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils._grammar import (
    commit_id,
)
from ansible_collections.glm.fleet.plugins.module_utils._grammar import (
    repo_id as repo_id_fits,
)

CHUNK = 4 * 1024 * 1024
MANIFEST_SUFFIX = ".manifest.json"


class SnapshotError(Exception):
    """A failure with a message for the operator."""


class HubRefused(SnapshotError):
    """The Hub answered, and said no (gated, unknown revision, bad token): retrying will not help."""


@dataclass(frozen=True)
class Entry:
    """One file of the revision, as the Hub describes it."""

    path: str
    size: int
    git_oid: str
    sha256: str | None = None  # LFS files only

    @property
    def etag(self) -> str:
        return self.sha256 or self.git_oid

    @property
    def lfs(self) -> bool:
        return self.sha256 is not None


@dataclass
class FetchReport:
    path: str
    bytes: int
    seconds: float
    attempts: int = 0
    stalls: int = 0
    corrupt: int = 0
    xet_disabled: bool = False
    errors: list[str] = field(default_factory=list)


# --- validation ----------------------------------------------------------------------------------


def check_revision(revision: str) -> str | None:
    if not commit_id(revision):
        return (
            "revision must be a full 40-hex commit id (branch names, tags and short SHAs are refused); "
            f"got: {revision!r}"
        )
    return None


def check_repo_id(repo_id: str) -> str | None:
    if not repo_id_fits(repo_id):
        return f"repo_id must look like ORG/NAME; got: {repo_id!r}"
    return None


GIT_OID_RE = re.compile(r"[0-9a-f]{40}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def check_entry_path(path: str) -> None:
    parts = Path(path).parts
    if (
        not isinstance(path, str)
        or path.startswith("/")
        or ".." in parts
        or not parts
        or CONTROL_RE.search(path)
        or "\\" in path
    ):
        raise SnapshotError(f"refusing a file path outside the snapshot: {path!r}")


def check_entry(entry: Entry) -> Entry:
    """An entry from a listing or a manifest that the cache can hold: a relative path inside the
    snapshot, a 40-hex git blob id, a 64-hex sha256 (LFS files) and a size. The ids become file
    names under blobs/, so nothing else may pass."""
    check_entry_path(entry.path)
    if not isinstance(entry.git_oid, str) or not GIT_OID_RE.fullmatch(entry.git_oid):
        raise SnapshotError(f"{entry.path!r}: refusing a git blob id that is not 40 hex: {entry.git_oid!r}")
    if entry.sha256 is not None and (not isinstance(entry.sha256, str) or not SHA256_RE.fullmatch(entry.sha256)):
        raise SnapshotError(f"{entry.path!r}: refusing a sha256 that is not 64 hex: {entry.sha256!r}")
    if isinstance(entry.size, bool) or not isinstance(entry.size, int) or entry.size < 0:
        raise SnapshotError(f"{entry.path!r}: refusing a size that is not a whole number of bytes: {entry.size!r}")
    return entry


# --- manifest ------------------------------------------------------------------------------------


def entries_from_tree(tree: Iterable[dict]) -> list[Entry]:
    """Entries from the Hub's tree listing (huggingface_hub's RepoFile fields, or the raw API)."""
    entries = []
    for item in tree:
        if item.get("type", "file") != "file":
            continue
        lfs = item.get("lfs") or {}
        sha = lfs.get("sha256") or lfs.get("oid")
        entry = Entry(path=item["path"], size=int(item["size"]), git_oid=item.get("blob_id") or item["oid"], sha256=sha)
        entries.append(check_entry(entry))
    return sorted(entries, key=lambda e: e.path)


def manifest(entries: list[Entry], repo_id: str, revision: str) -> dict:
    return {
        "repo_id": repo_id,
        "revision": revision,
        "total_bytes": sum(e.size for e in entries),
        "files": [asdict(e) for e in entries],
    }


def entries_from_manifest(data: dict, repo_id: str, revision: str) -> list[Entry]:
    if data.get("repo_id") != repo_id or data.get("revision") != revision:
        raise SnapshotError(
            f"the mirror's manifest is for {data.get('repo_id')}@{data.get('revision')}, not {repo_id}@{revision}"
        )
    try:
        return [check_entry(Entry(**f)) for f in data["files"]]
    except (TypeError, KeyError) as err:
        raise SnapshotError(f"the mirror's manifest has a malformed file entry: {err}") from err


def manifest_text(data: dict) -> str:
    """The manifest as the cache writes and serves it: its sha256 is the trust anchor of a mirror."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def trusted_manifest(raw: bytes, anchor: str, url: str) -> dict:
    """The mirror's manifest, if its bytes are the ones the site cache verified (their sha256 came
    over Ansible's SSH channel, not over the LAN's plain HTTP)."""
    found = hashlib.sha256(raw).hexdigest()
    if found != anchor:
        raise SnapshotError(
            f"the site cache's manifest at {url} has sha256 {found}, not the trusted {anchor}: "
            "its content is not what the cache verified from the Hub; refusing every file it lists"
        )
    try:
        return json.loads(raw)
    except ValueError as err:
        raise SnapshotError(f"the site cache's manifest at {url} is not JSON: {err}") from err
