"""The glm.fleet lab's command line, and the names tests and benchmarks use (the code is in glm_lab/).

python tests/lab/lab.py up [--gpu-nodes N]    start (or restart) the lab, write inventories/lab/hosts.yml
python tests/lab/lab.py down                  remove every container, volume, network and process it made
python tests/lab/lab.py status                print the lab state as JSON
python tests/lab/lab.py standin [--port P] [--script FILE] [-- ARGS]
                                              the SGLang stand-in alone, answering with FILE's raw texts
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from glm_lab.cli import down, main, status, up
from glm_lab.config import FRONT_DOOR_ADDRESS, INVENTORY, PREFIX, REPO, SITE_CACHE_ADDRESS, STATE_DIR, LabError
from glm_lab.gateway import (
    hub_call,
    hub_tree,
    image_blobs,
    registry_blob_transfers,
    registry_log_offset,
    registry_paths,
    services,
    slow_link_paused,
)
from glm_lab.image import debian_mirror, image_tag, packages
from glm_lab.nodes import plan

__all__ = [
    "FRONT_DOOR_ADDRESS",
    "INVENTORY",
    "PREFIX",
    "REPO",
    "SITE_CACHE_ADDRESS",
    "STATE_DIR",
    "LabError",
    "debian_mirror",
    "down",
    "hub_call",
    "hub_tree",
    "image_blobs",
    "image_tag",
    "main",
    "packages",
    "plan",
    "registry_blob_transfers",
    "registry_log_offset",
    "registry_paths",
    "services",
    "slow_link_paused",
    "status",
    "up",
]

if __name__ == "__main__":
    if not re.fullmatch(r"[a-z0-9-]+", PREFIX):
        sys.exit(f"lab: error: GLM_LAB_PREFIX must be lowercase letters, digits and dashes; got: {PREFIX}")
    sys.exit(main())
