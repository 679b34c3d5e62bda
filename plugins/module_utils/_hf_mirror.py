# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mirror source: a plain HTTP server that serves a verified snapshot (the site cache) as
BASE/REPO/REV/PATH with a manifest at BASE/REPO/REV.manifest.json, fetched with Range requests.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ansible.module_utils.urls import open_url

from ansible_collections.glm.fleet.plugins.module_utils._hf_local import (
    Digest,
    HashPipe,
)
from ansible_collections.glm.fleet.plugins.module_utils._hf_model import (
    CHUNK,
    MANIFEST_SUFFIX,
    SnapshotError,
)
from ansible_collections.glm.fleet.plugins.module_utils._splice import FileHasher, splice_body, usable


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
        if usable(resp) and resp.length == expected_size - have:
            have = spliced(resp, dest, have, expected_size, timeout=timeout, on_bytes=on_bytes, digest=digest)
        else:
            have = copied(resp, dest, have, on_bytes, digest)
    if have != expected_size:
        raise SnapshotError(f"{url}: connection closed after {have} of {expected_size} bytes")


def spliced(
    resp: object,
    dest: Path,
    have: int,
    expected_size: int,
    *,
    timeout: float,
    on_bytes: Callable[[int], None] | None,
    digest: Digest | None,
) -> int:
    """The body moved into dest by the kernel (splice), hashed from the file by a thread of its own
    (a resumed file's first part included); returns dest's size."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | (0 if have else os.O_TRUNC), 0o666)
    try:
        os.lseek(fd, have, os.SEEK_SET)
        hasher = FileHasher(str(dest), digest, have)

        def written(moved: int) -> None:
            hasher.written(have + moved)
            if on_bytes is not None:
                on_bytes(have + moved)

        try:
            moved = splice_body(resp, fd, expected_size - have, timeout, written)
        except BaseException:
            hasher.close(check=False)
            raise
        hasher.close(have + moved)
    finally:
        os.close(fd)
    return have + moved


def copied(resp: object, dest: Path, have: int, on_bytes: Callable[[int], None] | None, digest: Digest | None) -> int:
    """The body read through Python into dest (TLS, a chunked body, no splice on this platform),
    hashed from a thread of its own; returns dest's size."""
    if have and digest is not None:
        digest.feed_file(dest, limit=have)
    pipe = HashPipe(digest)
    try:
        with dest.open("ab" if have else "wb") as out:
            while chunk := resp.read(CHUNK):  # type: ignore[attr-defined]
                pipe.put(chunk)
                out.write(chunk)
                have += len(chunk)
                if on_bytes is not None:
                    on_bytes(have)
    finally:
        pipe.close()
    return have
