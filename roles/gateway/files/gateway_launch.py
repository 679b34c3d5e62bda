"""Start the SMG router with its arguments from a file that only its user can read.

SMG takes the key it sends to the workers (--api-key) on its command line, where every user of the
host can read it; this reads the arguments and the key from the file named first on the command line
(JSON: {"argv": [...], "api_key": "..."}), the servers to start with from the second (a JSON list of
URLs, --worker-urls; the gateway role changes that list in a running router through its worker API),
and starts the router in this process.
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
    launch_router(args)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
