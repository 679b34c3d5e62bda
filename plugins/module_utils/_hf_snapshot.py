# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fetching and verifying a Hugging Face snapshot in the standard cache layout.

The layout is huggingface_hub's: CACHE/models--ORG--NAME/{blobs/ETAG, snapshots/REV/PATH -> ../../blobs/ETAG}.
ETAG is the file's sha256 for LFS files and its git blob id for the others, as the Hub sends it.

Two sources:
- ``hub``: huggingface_hub (the real client, in its own virtualenv) lists the revision's files and
  downloads each one; a child process per file, watched for stalls.
- ``mirror``: a plain HTTP server that serves a verified snapshot (the site cache) as
  BASE/REPO/REV/PATH with a manifest at BASE/REPO/REV.manifest.json; fetched with Range requests.

Either way, every file is verified after the download: sha256 for LFS files (the Hub's LFS oid,
X-Linked-Etag), the git blob id for the others.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ansible.module_utils.urls import open_url

from ansible_collections.glm.fleet.plugins.module_utils._grammar import commit_id
from ansible_collections.glm.fleet.plugins.module_utils._grammar import repo_id as repo_id_fits

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


# --- local state ---------------------------------------------------------------------------------


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
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


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

    A file whose size, mtime and inode match its last verification is trusted unless `full`.
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


# --- hub source: huggingface_hub in a child process ----------------------------------------------

# Runs under the virtualenv's python. argv: mode repo_id revision cache_dir [filename]; the token and
# the endpoint come in the environment (HF_TOKEN, HF_ENDPOINT), never in argv. Prints one JSON line.
#
# Progress for the stall watchdog: every byte that huggingface_hub reports to a progress bar is
# counted into GLM_FLEET_PROGRESS_FILE (even with the bars disabled). Over HTTP that is the bytes
# written to the partial file; over Xet (huggingface_hub 2.4's XetDownloadProgressReporter) it is
# the bytes written plus the bytes received from the network. hf_xet 1.8 writes a file in order
# (reconstruct_to_file: truncate, then a SequentialWriter), one whole term at a time, while it
# fetches later terms and retries a failed fetch for up to 6 minutes: the partial file can stand
# still while the download is healthy, the network count does not.
CHILD_PROGRESS = r"""
import os
from huggingface_hub.utils import tqdm as hf_tqdm

class Progress(hf_tqdm):
    seen = 0
    fd = None

    def update(self, n=1):
        if n and os.environ.get("GLM_FLEET_PROGRESS_FILE"):
            if Progress.fd is None:
                Progress.fd = os.open(os.environ["GLM_FLEET_PROGRESS_FILE"], os.O_WRONLY | os.O_CREAT, 0o600)
            Progress.seen += int(n)
            os.pwrite(Progress.fd, b"%020d" % Progress.seen, 0)
        return super().update(n)
"""
CHILD = (
    CHILD_PROGRESS
    + r"""
import json, sys
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, RepositoryNotFoundError,
                                    RevisionNotFoundError, EntryNotFoundError)
mode, repo_id, revision, cache_dir = sys.argv[1:5]
try:
    if mode == "tree":
        files = []
        for f in HfApi().list_repo_tree(repo_id, revision=revision, recursive=True):
            if getattr(f, "blob_id", None) is None:
                continue
            lfs = {"sha256": f.lfs.sha256, "size": f.lfs.size} if f.lfs else None
            files.append({"type": "file", "path": f.path, "size": f.size, "blob_id": f.blob_id, "lfs": lfs})
        print(json.dumps({"files": files}))
    else:
        path = hf_hub_download(repo_id, sys.argv[5], revision=revision, cache_dir=cache_dir, tqdm_class=Progress)
        print(json.dumps({"path": path}))
except GatedRepoError as e:
    print(json.dumps({"error": "gated", "message": str(e).splitlines()[0]})); sys.exit(2)
except RevisionNotFoundError as e:
    print(json.dumps({"error": "revision", "message": str(e).splitlines()[0]})); sys.exit(2)
except EntryNotFoundError as e:
    print(json.dumps({"error": "entry", "message": str(e).splitlines()[0]})); sys.exit(2)
except RepositoryNotFoundError as e:
    print(json.dumps({"error": "repository", "message": str(e).splitlines()[0]})); sys.exit(2)
except HfHubHTTPError as e:
    status = e.response.status_code if e.response is not None else None
    print(json.dumps({"error": "http", "status": status, "message": str(e).splitlines()[0]})); sys.exit(2)
except OSError as e:
    if e.errno != 28:  # ENOSPC: the parent names the file system and the bytes needed
        raise
    print(json.dumps({"error": "nospace", "message": str(e)})); sys.exit(2)
"""
)

HINTS = {
    "gated": "the repository is gated: set model_weights_hf_token (in ansible-vault) to a token that has access",
    "revision": "the revision does not exist in this repository: check model_weights_revision",
    "repository": "the repository does not exist or the token cannot see it: check model_weights_repo_id and the token",
    "entry": "the file is not in this revision",
}


def child_env(endpoint: str, token: str, disable_xet: bool, download_timeout: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        {
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DOWNLOAD_TIMEOUT": str(download_timeout),
            "HF_HUB_ETAG_TIMEOUT": str(download_timeout),
        }
    )
    if endpoint:
        env["HF_ENDPOINT"] = endpoint.rstrip("/")
    if token:
        env["HF_TOKEN"] = token
    if disable_xet:
        env["HF_HUB_DISABLE_XET"] = "1"
    return env


def parse_child(stdout: str, stderr: str, rc: int, what: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise SnapshotError(f"huggingface_hub failed to {what} (rc={rc}): {' '.join(tail) or 'no output'}")
    data = json.loads(lines[-1])
    if data.get("error") == "nospace":
        raise OSError(errno.ENOSPC, data["message"])
    if "error" in data:
        hint = HINTS.get(data["error"], "")
        if data["error"] == "http" and data.get("status") == 401:
            hint = "the Hub refused the token: check model_weights_hf_token"
        if data["error"] != "http" or data.get("status") in (401, 403, 404):
            raise HubRefused(f"huggingface_hub could not {what}: {data['message']}" + (f" ({hint})" if hint else ""))
        raise SnapshotError(f"huggingface_hub could not {what}: {data['message']}" + (f" ({hint})" if hint else ""))
    return data


def hub_tree(
    *, python: str, repo_id: str, revision: str, cache_dir: Path, env: dict[str, str], timeout: float
) -> list[Entry]:
    proc = subprocess.run(
        [python, "-c", CHILD, "tree", repo_id, revision, str(cache_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    data = parse_child(proc.stdout, proc.stderr, proc.returncode, f"list {repo_id}@{revision}")
    return entries_from_tree(data["files"])


def start_child(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a download child in its own session (so the watchdog can kill its whole group)."""
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


@dataclass
class Watch:
    """What the watchdog saw of one attempt."""

    rc: int | None
    stalled: bool
    stdout: str = ""
    stderr: str = ""


def watch_process(
    proc: subprocess.Popen,
    progress: Callable[[], int],
    stall_timeout: float,
    *,
    on_progress: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tick: float = 0.2,
) -> Watch:
    """Wait for proc; kill it when progress() has not grown for stall_timeout seconds."""
    last_bytes, last_change = progress(), clock()
    while proc.poll() is None:
        sleep(tick)
        now_bytes = progress()
        if now_bytes != last_bytes:
            last_bytes, last_change = now_bytes, clock()
            if on_progress is not None:
                on_progress(now_bytes)
        elif clock() - last_change >= stall_timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Watch(rc=None, stalled=True, stdout=out or "", stderr=err or "")
    out, err = proc.communicate()
    return Watch(rc=proc.returncode, stalled=False, stdout=out or "", stderr=err or "")


# --- mirror source: plain HTTP with Range --------------------------------------------------------


def mirror_url(base: str, repo_id: str, revision: str, path: str = "") -> str:
    base = base.rstrip("/")
    if not path:
        return f"{base}/{repo_id}/{revision}{MANIFEST_SUFFIX}"
    return f"{base}/{repo_id}/{revision}/{urllib.request.quote(path)}"


def http_bytes(url: str, timeout: float) -> bytes:
    try:
        with open_url(url, timeout=timeout) as resp:
            return resp.read()
    except urllib.error.HTTPError as err:
        raise SnapshotError(f"the mirror answered {err.code} for {url}") from err
    except OSError as err:
        raise SnapshotError(f"cannot read {url}: {err}") from err


def http_json(url: str, timeout: float) -> dict:
    try:
        with open_url(url, timeout=timeout) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as err:
        raise SnapshotError(f"the mirror answered {err.code} for {url}") from err
    except (OSError, ValueError) as err:
        raise SnapshotError(f"cannot read {url}: {err}") from err


def http_fetch(
    url: str,
    dest: Path,
    expected_size: int,
    timeout: float,
    *,
    on_bytes: Callable[[int], None] | None = None,
    headers: dict[str, str] | None = None,
    digest: Digest | None = None,
) -> None:
    """Download url into dest, resuming from dest's size with a Range request, feeding `digest`
    with every byte of the file (a resumed file's first part from disk) so it is hashed once.

    A read that waits longer than timeout raises (the stall watchdog of this source)."""
    have = dest.stat().st_size if dest.exists() else 0
    if have > expected_size:
        dest.unlink()
        have = 0
    ranged = {"Range": f"bytes={have}-"} if have else {}
    if have == expected_size:
        if digest is not None:
            digest.feed_file(dest)
        return
    with open_url(url, headers={**(headers or {}), **ranged}, timeout=timeout) as resp:
        if have and resp.status != 206:
            have = 0  # the server ignored the Range: start over
        if have and digest is not None:
            digest.feed_file(dest, limit=have)
        pipe = HashPipe(digest)
        try:
            with dest.open("ab" if have else "wb") as out:
                while chunk := resp.read(CHUNK):
                    pipe.put(chunk)
                    out.write(chunk)
                    have += len(chunk)
                    if on_bytes is not None:
                        on_bytes(have)
        finally:
            pipe.close()
    if have != expected_size:
        raise SnapshotError(f"{url}: connection closed after {have} of {expected_size} bytes")


# --- reporting -----------------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def human_seconds(s: float) -> str:
    s = round(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"


def progress_line(done: int, total: int, rate: float) -> str:
    eta = (total - done) / rate if rate > 0 else 0.0
    pct = 100.0 * done / total if total else 100.0
    return f"{human_bytes(done)} / {human_bytes(total)} ({pct:.0f}%), {human_bytes(rate)}/s, ETA {human_seconds(eta)}"
