# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dashboard in Grafana through its HTTP API: what to send, and whether it differs from what is there.

Grafana's dashboard API (POST /api/dashboards/db, GET /api/dashboards/uid/<uid>) stores the JSON
it is given, adding `id` and `version`; a dashboard whose datasource variable names a datasource
that Grafana does not have shows "datasource not found" on every panel, so the datasource is
looked up first (GET /api/datasources) and a missing one refused before anything is written.

A save never takes over a dashboard that is not the collection's: what it saves carries the tag
`glm.fleet`, a dashboard of the same uid without it is refused before anything is written, and the
save is sent without `overwrite` and with the version read, so that Grafana itself refuses (412) a
dashboard changed in between (`version-mismatch`) or another of the same title in the folder
(`name-exists`), which `overwrite` would replace.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Sequence

SERVER_FIELDS = ("id", "version")
MARK = "glm.fleet"  # the tag of every dashboard the collection saves
REFUSED = {
    "version-mismatch": "the dashboard changed in Grafana while this run read it; run again",
    "name-exists": "another dashboard of the same title is in the folder; rename or move it",
    "plugin-dashboard": "a plugin's dashboard has this uid",
}


def with_datasource(dashboard: Mapping[str, Any], datasource: Mapping[str, Any]) -> dict[str, Any]:
    """The dashboard with its `datasource` variable set to the given datasource (uid and name), so
    that it opens on the fleet's Prometheus."""
    out = copy.deepcopy(dict(dashboard))
    for variable in out.get("templating", {}).get("list", []):
        if variable.get("type") == "datasource":
            variable["current"] = {"selected": True, "text": datasource["name"], "value": datasource["uid"]}
    for field in SERVER_FIELDS:
        out.pop(field, None)
    if MARK not in out.setdefault("tags", []):
        out["tags"] = [*out["tags"], MARK]
    return out


def foreign_problem(current: Mapping[str, Any] | None) -> str:
    """Why Grafana's dashboard of the same uid (GET /api/dashboards/uid/<uid>'s body, or None) is not
    the collection's to replace, or ""."""
    if current is None or MARK in (current.get("dashboard", {}).get("tags") or []):
        return ""
    dashboard = current.get("dashboard", {})
    return (
        f"a dashboard with uid {dashboard.get('uid')!r} ({dashboard.get('title')!r}, in folder "
        f"{current.get('meta', {}).get('folderUid') or 'General'!r}) is in this Grafana without the tag {MARK!r}:"
        " it is not the collection's, and is left as it is; remove it or give it another uid"
    )


def save_problem(status: int, answer: Any) -> str:
    """What Grafana's refusal of a save means."""
    reason = answer.get("status", "") if isinstance(answer, dict) else ""
    return f"saving the dashboard answered {status}: {REFUSED.get(reason, answer)}"


def datasource_problem(datasources: Sequence[Mapping[str, Any]], uid: str) -> tuple[dict[str, Any] | None, str]:
    found = next((dict(d) for d in datasources if d.get("uid") == uid), None)
    if found is None:
        known = sorted(f"{d.get('uid')} ({d.get('type')})" for d in datasources)
        return None, f"no datasource with uid {uid!r} in this Grafana (it has: {', '.join(known) or 'none'})"
    if found.get("type") != "prometheus":
        return None, f"datasource {uid!r} is of type {found.get('type')!r}, not prometheus"
    return found, ""


def differs(current: Mapping[str, Any] | None, desired: Mapping[str, Any], folder_uid: str) -> bool:
    """Whether Grafana's copy (GET /api/dashboards/uid/<uid>'s body, or None) differs from the desired
    dashboard in content or folder."""
    if current is None:
        return True
    stored = {k: v for k, v in current.get("dashboard", {}).items() if k not in SERVER_FIELDS}
    return stored != desired or (current.get("meta", {}).get("folderUid") or "") != folder_uid


def dashboard_diff(current: Mapping[str, Any] | None, desired: Mapping[str, Any], folder_uid: str) -> dict[str, str]:
    """What saving the dashboard changes, for --diff: Grafana's copy and the desired dashboard as
    sorted JSON (the fields Grafana sets itself left out), each with its folder."""

    def shown(dashboard: Mapping[str, Any], folder: str) -> str:
        return json.dumps({"folderUid": folder, "dashboard": dashboard}, indent=2, sort_keys=True) + "\n"

    title = str(desired.get("title") or desired.get("uid") or "dashboard")
    if current is None:
        before, header = "", f"{title} (absent)"
    else:
        stored = {k: v for k, v in current.get("dashboard", {}).items() if k not in SERVER_FIELDS}
        before, header = shown(stored, current.get("meta", {}).get("folderUid") or ""), title
    return {"before_header": header, "after_header": title, "before": before, "after": shown(desired, folder_uid)}


def save_body(desired: Mapping[str, Any], folder_uid: str, current: Mapping[str, Any] | None) -> dict[str, Any]:
    """The save, without `overwrite`: of the version read where Grafana has the dashboard."""
    dashboard = {**desired, "id": None}
    if current is not None:
        dashboard["version"] = current.get("dashboard", {}).get("version")
    body: dict[str, Any] = {"dashboard": dashboard, "overwrite": False, "message": "glm.fleet.monitoring"}
    if folder_uid:
        body["folderUid"] = folder_uid
    return body
