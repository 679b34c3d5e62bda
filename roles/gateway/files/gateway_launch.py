"""Start the SMG router with its arguments from a file that only its user can read.

SMG takes the key it sends to the workers (--api-key) on its command line, where every user of the
host can read it; this reads the arguments and the key from the file named on the command line
(JSON: {"argv": [...], "api_key": "..."}) and starts the router in this process.
"""

from __future__ import annotations

import json
import sys

from smg.launch_router import launch_router, parse_router_args


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    args = parse_router_args(list(config["argv"]))
    args.api_key = config.get("api_key") or None
    launch_router(args)


if __name__ == "__main__":
    main(sys.argv[1])
