"""Lab stand-in for a site's Grafana (its HTTP API; Grafana itself is in no package index here).

What glm.fleet.monitoring uses, with Grafana's rules as its HTTP API documentation states them:
- every `/api/*` call needs `Authorization: Bearer <service account token>`, else 401
  {"message": "Unauthorized"};
- GET /api/datasources (the lab has one Prometheus datasource, uid `glm-prometheus`, and a Loki one);
- GET /api/folders/<uid> (one folder, uid `glm-fleet`), 404 {"message": "folder not found"};
- GET /api/dashboards/uid/<uid>: {"dashboard": ... with id and version, "meta": {folderUid, url, ...}},
  404 {"message": "Dashboard not found"};
- POST /api/dashboards/db: the title is required (400 "Dashboard title cannot be empty"), a uid at
  most 40 characters (400), a folderUid that exists (400 "folder not found"). As Grafana's
  dashboard store decides (getExistingDashboardByIDOrUIDForUpdate, then ...ByTitleAndFolder): an
  existing uid whose stored `version` differs from the one sent (none sent: 0) is 412
  "version-mismatch" without `overwrite`; another dashboard of the same title (slug) in that folder
  is 412 "name-exists" without `overwrite`, and with it is replaced, the saved one taking its id and
  uid. A save stores the JSON as given with `id` and `version` (+1 per save) and answers {"id",
  "uid", "url", "status": "success", "version", "slug"}.
- GET /_lab/dashboards: what is stored (for tests), without a token; GET /_lab/callers: the address
  each `/api/` call came from, in order.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from json_handler import JSONHandler

DATASOURCES = [
    {"id": 1, "uid": "glm-prometheus", "orgId": 1, "name": "Prometheus", "type": "prometheus", "access": "proxy",
     "url": "http://127.0.0.1:9090", "isDefault": True},
    {"id": 2, "uid": "site-loki", "orgId": 1, "name": "Loki", "type": "loki", "access": "proxy",
     "url": "http://127.0.0.1:3100", "isDefault": False},
]  # fmt: skip
FOLDERS = {"glm-fleet": {"id": 7, "uid": "glm-fleet", "title": "GLM fleet"}}


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dashboards: dict[str, dict[str, Any]] = {}
        self.callers: list[str] = []
        self.next_id = 1


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def save(store: Store, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /api/dashboards/db: Grafana's status and answer."""
    dashboard = body.get("dashboard") or {}
    uid, title, folder = dashboard.get("uid") or "", dashboard.get("title") or "", body.get("folderUid") or ""
    if not title.strip():
        return 400, {"message": "Dashboard title cannot be empty"}
    if len(uid) > 40:
        return 400, {"message": "uid too long, max 40 characters"}
    if folder and folder not in FOLDERS:
        return 400, {"message": "folder not found"}
    overwrite = bool(body.get("overwrite"))
    with store.lock:
        old = store.dashboards.get(uid)
        if old and old["dashboard"]["version"] != (dashboard.get("version") or 0) and not overwrite:
            return 412, {"message": "The dashboard has been changed by someone else", "status": "version-mismatch"}
        namesake = next(
            (d for key, d in store.dashboards.items()
             if key != uid and d["meta"]["slug"] == slug(title) and d["meta"]["folderUid"] == folder),
            None,
        )  # fmt: skip
        if namesake and not overwrite:
            return 412, {
                "message": "A dashboard with the same name in the folder already exists",
                "status": "name-exists",
            }
        if namesake:  # Grafana saves over it: its id and uid
            old, uid = namesake, namesake["dashboard"]["uid"]
        ident = old["dashboard"]["id"] if old else store.next_id
        store.next_id += 0 if old else 1
        version = old["dashboard"]["version"] + 1 if old else 1
        url = f"/d/{uid}/{slug(title)}"
        store.dashboards[uid] = {
            "dashboard": {**dashboard, "uid": uid, "id": ident, "version": version},
            "meta": {"folderUid": folder, "url": url, "slug": slug(title), "message": body.get("message", "")},
        }
    return 200, {"id": ident, "uid": uid, "url": url, "status": "success", "version": version, "slug": slug(title)}


def make_handler(store: Store, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def authorized(self) -> bool:
            with store.lock:
                store.callers.append(self.client_address[0])
            if self.headers.get("Authorization") == f"Bearer {token}":
                return True
            self.reply(401, {"message": "Unauthorized"})
            return False

        def do_GET(self) -> None:
            if self.path in ("/_lab/dashboards", "/_lab/callers"):
                with store.lock:
                    self.reply(200, store.dashboards if self.path == "/_lab/dashboards" else store.callers)
                return
            if not self.authorized():
                return
            if self.path == "/api/datasources":
                self.reply(200, DATASOURCES)
            elif self.path.startswith("/api/folders/"):
                folder = FOLDERS.get(self.path.rsplit("/", 1)[1])
                self.reply(200, folder) if folder else self.reply(404, {"message": "folder not found"})
            elif self.path.startswith("/api/dashboards/uid/"):
                with store.lock:
                    found = store.dashboards.get(self.path.rsplit("/", 1)[1])
                self.reply(200, found) if found else self.reply(404, {"message": "Dashboard not found"})
            else:
                self.reply(404, {"message": "Not found"})

        def do_POST(self) -> None:
            if not self.authorized():
                return
            if self.path != "/api/dashboards/db":
                self.reply(404, {"message": "Not found"})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            self.reply(*save(store, body))

        def log_message(self, fmt: str, *args: object) -> None:
            return

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    args = parser.parse_args()
    token = args.token_file.read_text().strip()
    ThreadingHTTPServer((args.bind, args.port), make_handler(Store(), token)).serve_forever()


if __name__ == "__main__":
    main()
