# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arguments of glm.fleet.server_plan, checked (controller side): which of a node's servers the
plan looks at live, and the groups a node joins. Pure functions; the action runs the reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.glm.fleet.plugins.module_utils._grammar import pinned_image

GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
PROBE_KEYS = frozenset({"host", "api_key", "served_model_name", "expected", "port_offset"})


@dataclass(frozen=True)
class Plan:
    servers: tuple[dict[str, Any], ...]
    changed: tuple[str, ...]
    host: dict[str, Any]
    snapshot: dict[str, Any] | None
    probe: dict[str, Any]
    rollout_group: str
    steady_group: str
    image: str | None = None
    guards: dict[str, Any] | None = None
    files: dict[str, Any] | None = None

    @property
    def unchanged(self) -> list[dict[str, Any]]:
        """The servers whose unit, keys and environment would not change: those looked at live."""
        return [server for server in self.servers if server["name"] not in self.changed]


def parse(args: Mapping[str, Any]) -> Plan:
    """The action's arguments; ValueError naming the argument and its value."""
    unknown = set(args) - {
        "servers", "changed", "host", "snapshot", "probe", "rollout_group", "steady_group", "image", "guards", "files"
    }  # fmt: skip
    if unknown:
        raise ValueError(f"unknown arguments: {sorted(unknown)}")
    servers = args.get("servers")
    if not isinstance(servers, list) or not servers:
        raise ValueError(
            f"servers must be a non-empty list of {{name, port}} (sglang_server_instances); got {servers!r}"
        )
    for index, server in enumerate(servers):
        if not isinstance(server, Mapping) or not NAME.fullmatch(str(server.get("name", ""))):
            raise ValueError(f"servers[{index}] must have a name of letters, digits and ._@-; got {server!r}")
        if not isinstance(server.get("port"), int) or isinstance(server.get("port"), bool):
            raise ValueError(f"servers[{index}].port must be an integer; got {server.get('port')!r}")
    changed = args.get("changed") or []
    if not isinstance(changed, list) or not all(isinstance(name, str) for name in changed):
        raise ValueError(f"changed must be a list of server names; got {changed!r}")
    host = {} if args.get("host") is None else args["host"]
    snapshot = args.get("snapshot")
    if not isinstance(host, Mapping) or not (snapshot is None or isinstance(snapshot, Mapping)):
        raise ValueError(f"host must be a dict and snapshot a dict or null; got {type(host).__name__}, {snapshot!r}")
    probe = args.get("probe")
    if not isinstance(probe, Mapping) or not {"served_model_name"} <= set(probe) <= PROBE_KEYS:
        keys = sorted(probe) if isinstance(probe, Mapping) else probe
        raise ValueError(
            f"probe must have served_model_name and may have host, api_key, expected, port_offset; got {keys!r}"
        )
    groups = (args.get("rollout_group"), args.get("steady_group"))
    for label, group in zip(("rollout_group", "steady_group"), groups, strict=True):
        if not isinstance(group, str) or not GROUP.fullmatch(group):
            raise ValueError(f"{label} must be an inventory group name; got {group!r}")
    image = args.get("image") or None
    if image is not None and not pinned_image(image):
        raise ValueError(f"image must be pinned by digest, NAME[:TAG]@sha256:<64 hex>; got {image!r}")
    guards = args.get("guards") or None
    if guards is not None and (not isinstance(guards, Mapping) or set(guards) != {"program", "servers"}):
        raise ValueError(f"guards must be null or {{program, servers}}; got {guards!r}")
    return Plan(
        tuple(dict(s) for s in servers), tuple(changed), dict(host), dict(snapshot) if snapshot else None,
        {key: value for key, value in probe.items() if value not in (None, "")}, str(groups[0]), str(groups[1]),
        image, dict(guards) if guards else None, _files(args.get("files")),
    )  # fmt: skip


def _files(files: Any) -> dict[str, Any] | None:
    if not files:
        return None
    if not isinstance(files, Mapping) or not all(
        isinstance(want, Mapping) and set(want) == {"path", "sha256"} for want in files.values()
    ):
        raise ValueError(f"files must be null or a mapping of label to {{path, sha256}}; got {files!r}")
    return {str(label): dict(want) for label, want in files.items()}
