# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gateway keeps of each developer's key: its SHA-256 and when it expires, never the key."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from typing import Any

DOCUMENTATION = r"""
---
name: gateway_key_records
short_description: Each developer's key as the gateway keeps it, its SHA-256 and when it expires
version_added: 0.1.0
description:
  - Gives, by developer, the SHA-256 of their key (hex) and the moment it expires (C(YYYY-MM-DDTHH:MM:SSZ), UTC), the
    moment it was issued plus the keys' lifetime; C(null) when keys do not expire (a lifetime of 0 days).
  - The gateway checks a presented key against the SHA-256 alone; the key itself stays on the controller and in the
    developer's bundle.
  - A moment of issue that is not C(YYYY-MM-DDTHH:MM:SSZ) is an error naming the developer and the value.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The developers' keys by name.
    type: dict
    required: true
  issued:
    description: When each developer's key was issued, by name (C(YYYY-MM-DDTHH:MM:SSZ)).
    type: dict
    required: true
  lifetime_days:
    description: The keys' lifetime in days (C(gateway_developer_key_lifetime_days)); 0, no expiry.
    type: int
    required: true
"""

EXAMPLES = r"""
records: "{{ {'alice': key} | glm.fleet.gateway_key_records({'alice': '2026-12-01T10:00:00Z'}, 90) }}"
"""

RETURN = r"""
_value:
  description: By developer, C(sha256) (hex) and C(expires) (a UTC moment, or null).
  type: dict
"""

MOMENT = "%Y-%m-%dT%H:%M:%SZ"
MOMENT_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def parse_moment(text: Any) -> datetime.datetime | None:
    """A UTC moment as the collection writes it, or None when the text is not one."""
    if not isinstance(text, str) or not MOMENT_RE.fullmatch(text.strip()):
        return None
    try:
        return datetime.datetime.strptime(text.strip(), MOMENT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def gateway_key_records(keys: dict[str, str], issued: dict[str, Any], lifetime_days: Any) -> dict[str, dict]:
    days = int(lifetime_days)
    records = {}
    for name, key in sorted(keys.items()):
        start = parse_moment(issued.get(name))
        if start is None:
            shown = json.dumps(issued.get(name), default=str)
            raise ValueError(f"the issue moment of {name}'s key must be YYYY-MM-DDTHH:MM:SSZ; got: {shown}")
        expires = (start + datetime.timedelta(days=days)).strftime(MOMENT) if days > 0 else None
        records[name] = {"sha256": hashlib.sha256(str(key).encode()).hexdigest(), "expires": expires}
    return records


class FilterModule:
    def filters(self) -> dict:
        return {"gateway_key_records": gateway_key_records}
