"""Lab stand-in for NVIDIA's nvidia-ctk (version @VERSION@).

Implements what the glm.fleet roles call: `nvidia-ctk --version` and
`nvidia-ctk runtime configure --runtime=docker [--config=PATH] [--set-as-default]`, which edits
docker's daemon.json the way the real tool does: it keeps every existing key, adds
runtimes.nvidia = {"args": [], "path": "nvidia-container-runtime"}, sets default-runtime with
--set-as-default, and writes the file back with four-space indentation.
"""

from __future__ import annotations

import json
import os
import sys

VERSION = "@VERSION@"


def fail(message: str) -> int:
    sys.stderr.write(f"ERROR[0000] {message}\n")
    return 1


def configure(args: list[str]) -> int:
    runtime, config, default = None, None, False
    for arg in args:
        if arg.startswith("--runtime="):
            runtime = arg.split("=", 1)[1]
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg == "--set-as-default":
            default = True
        else:
            return fail(f"flag provided but not defined: {arg}")
    if runtime != "docker":
        return fail(f"unrecognized runtime '{runtime}'")
    config = config or "/etc/docker/daemon.json"
    current: dict = {}
    if os.path.exists(config):
        with open(config) as handle:
            text = handle.read()
        if text.strip():
            try:
                current = json.loads(text)
            except ValueError as err:
                return fail(f"unable to load config: failed to unmarshal config: {err}")
    current.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if default:
        current["default-runtime"] = "nvidia"
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config, "w") as handle:
        handle.write(json.dumps(current, indent=4, sort_keys=True))
    sys.stderr.write(f"INFO[0000] Wrote updated config to {config}\n")
    sys.stderr.write("INFO[0000] It is recommended that docker daemon be restarted.\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-v"]):
        print(f"NVIDIA Container Toolkit CLI version {VERSION}")
        return 0
    if argv[:2] == ["runtime", "configure"]:
        return configure(argv[2:])
    return fail(f"unsupported command: {' '.join(argv)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
