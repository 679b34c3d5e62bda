# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An apt repository's signing key, checked against a pinned fingerprint before apt trusts it:
reading gpg's machine-readable listing, and what must be written for the key to be in place."""

from __future__ import annotations

import re

FINGERPRINT = re.compile(r"[0-9A-F]{40}\Z")


def pinned(fingerprint: str) -> str:
    """A fingerprint as gpg prints it in colon listings: upper-case hex, no spaces."""
    return fingerprint.replace(" ", "").upper()


def fingerprints(colons: str) -> list[str]:
    """The fingerprints in `gpg --with-colons --show-keys` output, the primary key's first: field 10
    of each `fpr` record."""
    found = []
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and len(fields) > 9 and FINGERPRINT.match(fields[9]):
            found.append(fields[9])
    return found


def primaries(colons: str) -> list[str]:
    """The fingerprints of the primary keys in `gpg --with-colons --show-keys` output: each `fpr`
    record that follows a `pub` record (a subkey's follows its `sub`)."""
    found, record = [], ""
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "fpr":
            if record == "pub" and len(fields) > 9 and FINGERPRINT.match(fields[9]):
                found.append(fields[9])
        else:
            record = fields[0]
    return found


def refusal(url: str, found: list[str], wanted: str, variable: str) -> str | None:
    """Why the key file at url is refused, or None when it holds one primary key, the pinned one
    (`found`: its primary keys' fingerprints). Every key in the file would reach the keyring, so a
    second key, pinned one or not, is refused as well."""
    if found == [pinned(wanted)]:
        return None
    if len(found) > 1:
        return (
            f"the key file at {url} holds {len(found)} keys ({', '.join(found)}); only the pinned"
            f" {variable}={pinned(wanted)} may be in it; it was not installed"
        )
    what = found[0] if found else "none (not an OpenPGP key)"
    return (
        f"the key at {url} has the fingerprint {what}, not the pinned {variable}={pinned(wanted)}; it was not installed"
    )


def to_write(files: dict[str, bytes], current: dict[str, bytes | None]) -> list[str]:
    """The paths, of those in files (path -> wanted content), whose current content differs."""
    return [path for path, content in files.items() if current.get(path) != content]
