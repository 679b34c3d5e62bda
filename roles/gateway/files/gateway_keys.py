# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""glm.fleet's gateway keys: nginx's maps of the developers' keys that are valid now, and of the expired.

    python3 gateway-keys KEYS [--reload]

KEYS (JSON, root-only, written by glm.fleet.gateway): {"format": 1, "map_dir": DIR, "developers":
{NAME: {"sha256": HEX, "expires": "YYYY-MM-DDTHH:MM:SSZ" or null}}}. The gateway never holds a
developer's key: nginx hashes the key a request presents (njs) and looks the hash up in
DIR/developer-keys.map (valid now: the developer's name) and DIR/expired-keys.map (expired: when).

Each file is replaced only when its text changes. With --reload, nginx reloads when one did (a
reload lets requests in flight finish; new ones see the new maps). The gateway's timer runs this
every minute, so a key stops working within a minute of its expiry without a run of Ansible. One
line of JSON on stdout: {"changed": BOOL, "valid": [NAMES], "expired": [NAMES]}.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

MOMENT = "%Y-%m-%dT%H:%M:%SZ"
HEX = re.compile(r"[0-9a-f]{64}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HEADER = "# glm.fleet gateway-keys: written from {}; changes here are overwritten.\n"


def maps(keys: dict, now: datetime.datetime) -> tuple[str, str, list[str], list[str]]:
    """The two maps' text for the moment now, and the names in each."""
    valid, expired = [], []
    valid_lines, expired_lines = [], []
    for name, record in sorted(keys["developers"].items()):
        if not NAME.fullmatch(name) or not HEX.fullmatch(str(record.get("sha256", ""))):
            raise ValueError(f"{name!r}: a developer needs a name of letters, digits, . _ - and a 64-hex sha256")
        expires = record.get("expires")
        moment = datetime.datetime.strptime(expires, MOMENT).replace(tzinfo=datetime.UTC) if expires else None
        if moment is not None and moment <= now:
            expired.append(name)
            expired_lines.append(f'"{record["sha256"]}" "{expires}";\n')
        else:
            valid.append(name)
            valid_lines.append(f'"{record["sha256"]}" "{name}";\n')
    return "".join(valid_lines), "".join(expired_lines), valid, expired


def replace(path: str, text: str) -> bool:
    """Write text to path (root-only) when it differs; whether it did."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gateway-keys.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or set(argv[1:]) - {"--reload"}:
        sys.stderr.write("usage: gateway-keys KEYS [--reload]\n")
        return 2
    path = argv[0]
    with open(path, encoding="utf-8") as f:
        keys = json.load(f)
    now = datetime.datetime.now(datetime.UTC)
    valid_map, expired_map, valid, expired = maps(keys, now)
    header = HEADER.format(path)
    changed = replace(os.path.join(keys["map_dir"], "developer-keys.map"), header + valid_map)
    changed = replace(os.path.join(keys["map_dir"], "expired-keys.map"), header + expired_map) or changed
    if changed and "--reload" in argv[1:]:
        subprocess.run(["systemctl", "reload", "nginx"], check=True)
    print(json.dumps({"changed": changed, "valid": valid, "expired": expired}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
