# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of the distribution's files a role would replace are foreign: neither glm.fleet's (it says so
in its first lines) nor the package's conffile as shipped (the MD5 sum dpkg keeps for it)."""

from __future__ import annotations

import hashlib
import os
import stat

# One line per package, "PACKAGE<TAB> /path md5", then one " /path md5" line per further conffile
# (a word may follow the sum: obsolete, newconffile, remove-on-upgrade).
CONFFILES_QUERY = ["dpkg-query", "-W", "-f", "${Package}\t${Conffiles}\n"]
MARKER = b"glm.fleet"
HEAD_LINES = 5


def conffiles(listed: str) -> dict[tuple[str, str], str]:
    """{(package, path): md5} from CONFFILES_QUERY's output."""
    sums: dict[tuple[str, str], str] = {}
    package = None
    for line in listed.splitlines():
        if "\t" in line:
            package, line = line.split("\t", 1)  # noqa: PLW2901 - the rest of the line is its first conffile
        parts = line.split()
        if package and len(parts) >= 2 and parts[0].startswith("/"):
            sums[(package, parts[0])] = parts[1]
    return sums


def why_foreign(path: str, package: str | None, sums: dict[tuple[str, str], str]) -> str | None:
    """Why the file at `path` is foreign, or None where it is missing, glm.fleet's or `package`'s as shipped."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file (a link, a directory or a device): not glm.fleet's to replace"
    with open(path, "rb") as f:
        content = f.read()
    if any(MARKER in line for line in content.splitlines()[:HEAD_LINES]):
        return None
    shipped = sums.get((package, path)) if package else None
    if shipped and hashlib.md5(content, usedforsecurity=False).hexdigest() == shipped:
        return None
    origin = (
        f"differs from the one package {package} ships" if shipped else f"is not a file that package {package} ships"
    )
    if not package:
        origin = "is not a file that a package ships"
    return (
        f"{path} is not glm.fleet's and {origin}: a configuration of the site's own, which glm.fleet would replace;"
        " move it away (or remove it) to let glm.fleet write its own, or keep this host out of the role's group"
    )


def foreign(files: list[dict], listed: str) -> list[dict[str, str]]:
    """The files of `files` ({path, package}) that are foreign, each with why, in order."""
    sums = conffiles(listed)
    found = []
    for item in files:
        why = why_foreign(str(item["path"]), item.get("package"), sums)
        if why:
            found.append({"path": str(item["path"]), "why": why})
    return found
