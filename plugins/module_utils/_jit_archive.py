# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's copy of a server's JIT caches (an archive on the controller) and what may be in it.

A node unpacks the copy as root into the directory its servers load kernels from, so the archive may
hold only what a compiler writes there: directories and regular files, under relative paths that stay
inside the directory, without set-user-ID, set-group-ID or sticky bits and writable by their owner
only. A link, a device, a FIFO, an absolute path or one through `..` is refused, by name. The archive's
SHA-256, recorded beside it when it is published (`<archive>.sha256`, sha256sum's format), is checked
before a node is seeded from it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from pathlib import PurePosixPath

BAD_MODE_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH
MAX_PROBLEMS = 5


def member_problem(member: tarfile.TarInfo) -> str:
    """Why one member may not be unpacked into a JIT cache, or ""."""
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts:
        return f"{name!r} leaves the cache directory"
    if not (member.isfile() or member.isdir()):
        kind = "a link" if member.issym() or member.islnk() else "a device, FIFO or other special file"
        return f"{name!r} is {kind}, not a file or directory"
    if member.mode & BAD_MODE_BITS:
        return f"{name!r} has mode {member.mode:04o} (set-id, sticky, or writable by group or others)"
    return ""


def archive_problems(path: str) -> list[str]:
    """What in the archive at `path` may not be unpacked into a JIT cache (at most MAX_PROBLEMS)."""
    problems: list[str] = []
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                problem = member_problem(member)
                if problem:
                    problems.append(problem)
                    if len(problems) >= MAX_PROBLEMS:
                        break
    except (OSError, tarfile.TarError) as err:
        return [f"not a readable tar archive: {err}"]
    return problems


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_line(digest: str, path: str) -> str:
    return f"{digest}  {os.path.basename(path)}\n"


def recorded(path: str) -> str:
    """The SHA-256 recorded for the archive at `path`, or "" when there is no record."""
    try:
        with open(f"{path}.sha256", encoding="ascii") as handle:
            line = handle.read()
    except (OSError, UnicodeDecodeError):
        return ""
    digest, _sep, name = line.strip().partition("  ")
    return digest if name == os.path.basename(path) and len(digest) == 64 else ""
