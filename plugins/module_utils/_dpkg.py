# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which apt package specs a host's dpkg database does not satisfy, and which packages it holds, from
one `dpkg-query` read."""

from __future__ import annotations

import re

DPKG_QUERY = ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\n"]
NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")
VERSION = re.compile(r"[0-9A-Za-z.+~:-]+")


def installed_versions(dpkg_output: str) -> dict[str, set[str]]:
    """{package: versions installed} from DPKG_QUERY's lines; only packages whose status is
    installed ("ii", "hi") without an error flag count."""
    out: dict[str, set[str]] = {}
    for line in dpkg_output.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        status, name, version = parts
        if len(status) >= 2 and status[1] == "i" and status[2:].strip() == "":
            out.setdefault(name, set()).add(version)
    return out


def held(dpkg_output: str) -> list[str]:
    """The packages marked to hold (desired state "h", as `apt-mark showhold` lists them), sorted."""
    names = set()
    for line in dpkg_output.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].startswith("h"):
            names.add(parts[1])
    return sorted(names)


def satisfied(spec: str, installed: dict[str, set[str]]) -> bool:
    """`name` by any installed version, `name=version` by that version only; any other form (a
    wildcard, a release, an architecture) is not read here, and counts as not satisfied."""
    name, sep, version = spec.partition("=")
    if not NAME.fullmatch(name) or (sep and not VERSION.fullmatch(version)):
        return False
    return name in installed and (not sep or version in installed[name])


def apt_missing(specs: list[str], dpkg_output: str) -> list[str]:
    """The specs, in order, that the installed packages do not satisfy."""
    installed = installed_versions(dpkg_output)
    return [spec for spec in specs if not satisfied(spec, installed)]
