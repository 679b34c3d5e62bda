"""The lab's alert receiver: a site's webhook endpoint (a chat or paging service's incoming hook).

What glm.fleet.monitoring's Alertmanager sends it, as such a service takes it:
- POST /hooks/<token> with Alertmanager's webhook JSON (`version` "4", `status`, `alerts`, ...):
  200 {"ok": true}; any other path, a wrong token or a body that is not that JSON: 404 or 400, and
  nothing is kept (a real hook drops it too);
- GET /_lab/notifications: every notification kept, in arrival order, each `{"received": unix
  seconds, "body": the JSON}` (for tests; no token).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from json_handler import JSONHandler

KEYS = {"version", "status", "receiver", "groupLabels", "commonLabels", "alerts", "groupKey"}


class Receiver(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], token: str) -> None:
        super().__init__(address, Handler)
        self.token = token
        self.lock = threading.Lock()
        self.notifications: list[dict[str, Any]] = []


class Handler(JSONHandler):
    server: Receiver

    def do_GET(self) -> None:
        if self.path == "/_lab/notifications":
            with self.server.lock:
                self.reply(200, list(self.server.notifications))
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != f"/hooks/{self.server.token}":
            self.reply(404, {"error": "no such hook"})
            return
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict) or not payload.keys() >= KEYS or payload["version"] != "4":
            self.reply(400, {"error": "not Alertmanager's webhook JSON (version 4)"})
            return
        with self.server.lock:
            self.server.notifications.append({"received": time.time(), "body": payload})
        self.reply(200, {"ok": True})

    def log_message(self, format: str, *args: Any) -> None:
        # The request line holds the hook's token: the log keeps the method and status only.
        if args and isinstance(args[0], str):
            args = (args[0].split(" ", 1)[0], *args[1:])
        super().log_message(format, *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    args = parser.parse_args()
    Receiver((args.bind, args.port), args.token_file.read_text().strip()).serve_forever()


if __name__ == "__main__":
    main()
