# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A snapshot on disk, in huggingface_hub's cache layout: CACHE/models--ORG--NAME/{blobs/ETAG,
snapshots/REV/PATH -> ../../blobs/ETAG}. Paths that stay under the cache, verification while
bytes arrive, records of verified files (written atomically), one fetch at a time per host, and
a clear message for a full disk.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils._hf_model import (
    CHUNK,
    Entry,
    SnapshotError,
)


@dataclass(frozen=True)
class Paths:
    cache_dir: Path
    repo_id: str
    revision: str

    @property
    def repo(self) -> Path:
        return self.cache_dir / ("models--" + self.repo_id.replace("/", "--"))

    @property
    def blobs(self) -> Path:
        return self.repo / "blobs"

    @property
    def snapshot(self) -> Path:
        return self.repo / "snapshots" / self.revision

    def blob(self, entry: Entry) -> Path:
        return self.inside(self.blobs / entry.etag)

    def link(self, entry: Entry) -> Path:
        return self.inside(self.snapshot / entry.path)

    def inside(self, path: Path) -> Path:
        """path, if it resolves under the cache directory (a last guard after check_entry)."""
        root = os.path.realpath(self.cache_dir)
        if os.path.commonpath([root, os.path.realpath(path)]) != root:
            raise SnapshotError(f"refusing a path outside the cache {self.cache_dir}: {path}")
        return path


class Digest:
    """What verifies one file: its sha256 (LFS files, and recorded for all), and for the others the
    git blob id the Hub publishes for them. Fed while downloading or from the file on disk."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.sha = hashlib.sha256()
        # git's object id, not a security hash; only for files the Hub publishes no sha256 of
        self.git = None if entry.lfs else hashlib.sha1(b"blob %d\0" % entry.size)  # noqa: S324

    def update(self, chunk: bytes | memoryview) -> None:
        self.sha.update(chunk)
        if self.git is not None:
            self.git.update(chunk)

    def feed_file(self, path: Path, limit: int | None = None) -> Digest:
        remaining = path.stat().st_size if limit is None else limit
        with path.open("rb") as f:
            while remaining > 0 and (chunk := f.read(min(CHUNK, remaining))):
                self.update(chunk)
                remaining -= len(chunk)
        return self

    @property
    def sha256(self) -> str:
        return self.sha.hexdigest()

    @property
    def found(self) -> str:
        """The digest compared with the Hub's: sha256 for LFS files, the git blob id otherwise."""
        return self.sha.hexdigest() if self.git is None else self.git.hexdigest()

    @property
    def wanted(self) -> str:
        return self.entry.sha256 or self.entry.git_oid

    def matches(self) -> bool:
        return self.found == self.wanted


class HashPipe:
    """Feeds a Digest from a thread of its own, so that hashing (hashlib releases the GIL) overlaps
    receiving and writing: a verified download then runs at the speed of the slower of the two."""

    def __init__(self, digest: Digest | None) -> None:
        self.digest = digest
        self.chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self.thread = threading.Thread(target=self.run, daemon=True)
        if digest is not None:
            self.thread.start()

    def run(self) -> None:
        digest = self.digest
        if digest is None:
            return
        while (chunk := self.chunks.get()) is not None:
            digest.update(chunk)

    def put(self, chunk: bytes) -> None:
        if self.digest is not None:
            self.chunks.put(chunk)

    def close(self) -> None:
        if self.digest is not None:
            self.chunks.put(None)
            self.thread.join()


def stat_key(path: Path) -> dict[str, int]:
    """What quick verification trusts a file by. The change time is among them: a byte written in
    place with the mtime put back (os.utime) still moves it, and only the kernel sets it."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}


def load_records(state_file: Path) -> dict[str, dict]:
    try:
        return json.loads(state_file.read_text()).get("files", {})
    except (OSError, ValueError):
        return {}


def write_atomic(path: Path, text: str) -> None:
    """Write text to path so that a reader sees the old or the new content, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_records(state_file: Path, records: dict[str, dict]) -> None:
    write_atomic(state_file, json.dumps({"files": records}, indent=1, sort_keys=True) + "\n")


class FetchLock:
    """One fetch at a time per state directory: a second run is told who holds it, at once."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "fetch.lock"
        self.fd: int | None = None

    def __enter__(self) -> FetchLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SnapshotError(
                f"another weights fetch is running on this host (pid {holder}, lock {self.path}): "
                "wait for it to finish, or stop it, then run again"
            ) from err
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None


def no_space_message(err: OSError, where: Path, entry: Entry, free: int) -> str | None:
    """A clear message for a full disk (ENOSPC), else None."""
    if err.errno != errno.ENOSPC:
        return None
    return (
        f"no space left on the file system of {where} while fetching {entry.path}: it needs {entry.size} bytes "
        f"and {free} bytes are free; free space there (or point the cache elsewhere) and run again"
    )


def local_status(paths: Paths, entry: Entry, record: dict | None, full: bool) -> tuple[str, dict | None]:
    """'ok', 'missing', 'corrupt' or 'size' for one file, and a fresh verification record when hashed.

    A file whose size, mtime, change time and inode match its last verification is trusted unless `full`.
    """
    link = paths.link(entry)
    if not link.exists():
        return "missing", None
    target = link.resolve()
    key = stat_key(target)
    if key["size"] != entry.size:
        return "size", None
    unchanged = record is not None and all(record.get(k) == v for k, v in key.items())
    if not full and unchanged and record is not None and record.get("etag") == entry.etag:
        return "ok", record
    digest = Digest(entry).feed_file(target)
    if not digest.matches():
        return "corrupt", None
    return "ok", {**key, "etag": entry.etag, "sha256": digest.sha256}


def remove_local(paths: Paths, entry: Entry, keep: str = "") -> None:
    """Remove a file's snapshot link, blob and partial downloads (but `keep`), so that it is fetched afresh."""
    for path in (paths.link(entry), paths.blob(entry)):
        if path.is_symlink() or path.exists():
            path.unlink()
    if paths.blobs.is_dir():
        for partial in paths.blobs.glob(f"{entry.etag}*.incomplete"):
            if partial.name != keep:
                partial.unlink()


def reported_bytes(counter: Path) -> int:
    """The download child's progress count (see CHILD); 0 before its first report."""
    try:
        return int(counter.read_bytes()[:20] or b"0")
    except (OSError, ValueError):
        return 0


def partial_bytes(paths: Paths, entry: Entry) -> int:
    """Bytes of the file on disk so far: its partial downloads, or the finished blob."""
    if not paths.blobs.is_dir():
        return 0
    total = 0
    for partial in paths.blobs.glob(f"{entry.etag}*.incomplete"):
        try:
            total += partial.stat().st_size
        except FileNotFoundError:
            continue
    if total == 0 and paths.blob(entry).exists():
        total = paths.blob(entry).stat().st_size
    return total


def link_blob(paths: Paths, entry: Entry) -> None:
    link = paths.link(entry)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(paths.blob(entry), link.parent))
