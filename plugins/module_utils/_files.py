# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a file that may be missing, writing one whole with its mode from the start, and showing
its change to `--diff`."""

from __future__ import annotations

import hashlib
import os


def read(path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_private(path: str, data: bytes, mode: int) -> None:
    """Written whole (a temporary file beside it, renamed over it), with its mode from the start."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def shown(data: bytes | None, *, secret: bool = False) -> str:
    """A file's content as `--diff` shows it: the text of a text file; a one-line summary of a file
    that is binary (its size and sha256) or may hold a secret (its size only: neither its bytes nor a
    hash of them); an empty text for a file that does not exist."""
    if data is None:
        return ""
    if secret:
        return f"({len(data)} bytes, not shown)\n"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary, {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})\n"
    return text if text.endswith("\n") or not text else text + "\n"


def file_diff(path: str, before: bytes | None, after: bytes | None, *, secret: bool = False) -> dict[str, str]:
    """One file's entry of a module's `diff` (Ansible shows a list of them), before and after."""
    return {
        "before_header": path if before is not None else f"{path} (absent)",
        "after_header": path if after is not None else f"{path} (absent)",
        "before": shown(before, secret=secret),
        "after": shown(after, secret=secret),
    }
