"""Start the SMG router with its arguments from a file that only its user can read.

SMG takes the key it sends to the workers (--api-key) on its command line, where every user of the
host can read it; this reads the arguments and the key from the file named first on the command line
(JSON: {"argv": [...], "api_key": "...", "admin_key_file": PATH}), the servers to start with from the
second (a JSON list of URLs, --worker-urls; the gateway role changes that list in a running router
through its worker API), and starts the router in this process.

The router's worker API (/workers) is its control plane. Without a control-plane key SMG opens it to
--api-key, the key it sends the servers, which nginx adds to every request it forwards; with one
(--control-plane-api-keys, which would also be on the command line) only that key opens it. The
control-plane key is read from admin_key_file, a file of the gateway host that only the router's user
and root can read, and given to the router as one admin key.
"""

from __future__ import annotations

import json
import sys

from smg.launch_router import launch_router, parse_router_args


def main(path: str, workers_path: str) -> None:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    with open(workers_path, encoding="utf-8") as f:
        workers = [str(url) for url in json.load(f)]
    args = parse_router_args([*config["argv"], "--worker-urls", *workers])
    args.api_key = config.get("api_key") or None
    if config.get("admin_key_file"):
        with open(config["admin_key_file"], encoding="utf-8") as f:
            admin_key = f.read().strip()
        if not admin_key:
            raise SystemExit(f"{config['admin_key_file']} is empty: no control-plane key for the router's worker API")
        # (id, name, key, role), as SMG's own parser of --control-plane-api-keys leaves each entry.
        args.control_plane_api_keys = [("glm-fleet", "glm.fleet gateway", admin_key, "admin")]
    launch_router(args)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
