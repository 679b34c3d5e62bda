# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One grammar each for the values every role checks: full matches, no control characters.

The roles use them through the test plugins in plugins/test/grammar.py, the modules directly, so
that a value a role accepts is a value the module accepts, and the other way round.
"""

from __future__ import annotations

import re

from ansible_collections.glm.fleet.plugins.module_utils._docker_api import DockerError, parse_reference

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
REPO_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
DIGITS_RE = re.compile(r"[0-9]+")
API_KEY_RE = re.compile(r"[A-Za-z0-9_-]{32,128}")
# A release as Python packaging writes it: 0.5.23, 0.5.23.post1, 0.5.24rc0, 0.5.23+cu129.
RELEASE_RE = re.compile(r"[0-9]+(\.[0-9]+)+([.+-]?[A-Za-z0-9]+)*")


def pinned_image(value: object) -> bool:
    """An image reference pinned by digest, NAME[:TAG]@sha256:<64 hex>, as the engine API takes it."""
    if not isinstance(value, str):
        return False
    try:
        parse_reference(value)
    except DockerError:
        return False
    return True


def commit_id(value: object) -> bool:
    """A full 40-hex commit id (no branch name, tag or short id)."""
    return isinstance(value, str) and COMMIT_RE.fullmatch(value) is not None


def repo_id(value: object) -> bool:
    """A Hub repository id, ORG/NAME."""
    return isinstance(value, str) and REPO_ID_RE.fullmatch(value) is not None


def api_key(value: object) -> bool:
    """A key a client sends as a bearer token and nginx holds in its configuration: 32 to 128
    letters, digits, _ or - (no quote, $, ; or space to break a directive, no guessable short key)."""
    return isinstance(value, str) and API_KEY_RE.fullmatch(value) is not None


def release(value: object) -> bool:
    """A package's release, as `importlib.metadata.version()` gives it (0.5.23, 0.5.23.post1)."""
    return isinstance(value, str) and RELEASE_RE.fullmatch(value) is not None


def whole(value: object) -> int | None:
    """A whole number from 0 (an int, or a string of digits only) as an int; anything else (bools,
    negatives, '8\\n') None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and DIGITS_RE.fullmatch(value):
        return int(value)
    return None


def port(value: object) -> bool:
    """A TCP port, 1-65535."""
    number = whole(value)
    return number is not None and 1 <= number <= 65535


def gpu_list(value: object) -> bool:
    """A non-empty list of distinct GPU indices from 0."""
    if not isinstance(value, list) or not value:
        return False
    indices = [whole(v) for v in value]
    return None not in indices and len(set(indices)) == len(indices)
