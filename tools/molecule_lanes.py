"""Run molecule scenarios in lanes that run at once: each lane takes the next scenario from one queue,
in the order given (the Makefile lists the longest first, so the lanes finish close together). Each scenario's node is
named glm-molecule-<scenario> (GLM_MOLECULE_NODE, read by .config/molecule/config.yml) so lanes
never share a container. A scenario's output goes to build/molecule/<scenario>.log and is printed
whole when it ends, so lanes do not interleave. A scenario whose output holds a deprecation warning
fails: what its playbooks use goes away in a later ansible-core. After a failure no lane starts
another scenario; the exit status is 1 if any scenario failed.

    python3 tools/molecule_lanes.py --lanes 2 claude_code gateway ...
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

LOGS = Path(__file__).resolve().parent.parent / "build" / "molecule"


DEPRECATION = re.compile(r"^\[DEPRECATION WARNING\]:.*$", re.MULTILINE)


def deprecations(output: str) -> list[str]:
    """The deprecation warnings in a scenario's output, each once."""
    return sorted(set(DEPRECATION.findall(output)))


def node_name(scenario: str) -> str:
    return "glm-molecule-" + scenario.replace("_", "-")


class Runner:
    def __init__(self, molecule: str) -> None:
        self.molecule = molecule
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def scenario(self, name: str) -> bool:
        log = LOGS / f"{name}.log"
        env = dict(os.environ, GLM_MOLECULE_NODE=node_name(name))
        start = time.monotonic()
        with log.open("wb") as out:
            status = subprocess.call([self.molecule, "test", "-s", name], stdout=out, stderr=subprocess.STDOUT, env=env)
        took = time.monotonic() - start
        output = log.read_text(errors="replace")
        warned = deprecations(output)
        if warned and status == 0:
            status = 1
        with self.lock:
            sys.stdout.write(output)
            for line in warned:
                print(f"make: molecule scenario {name} printed a deprecation warning: {line}", flush=True)
            verdict = "took" if status == 0 else "FAILED after"
            print(f"make: molecule scenario {name} {verdict} {took:.0f} s", flush=True)
            if status != 0:
                self.failed.append(name)
        return status == 0

    def lane(self, queue: list[str]) -> None:
        while True:
            with self.lock:
                if self.failed or not queue:
                    return
                name = queue.pop(0)
            if not self.scenario(name):
                return


def main() -> int:
    parser = argparse.ArgumentParser(description="Run molecule scenarios in lanes that run at once.")
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--molecule", default="molecule")
    parser.add_argument("scenarios", nargs="+")
    args = parser.parse_args()
    if args.lanes < 1:
        parser.error(f"--lanes must be at least 1, got {args.lanes}")
    LOGS.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.molecule)
    queue = list(dict.fromkeys(args.scenarios))
    threads = [threading.Thread(target=runner.lane, args=(queue,)) for _lane in range(min(args.lanes, len(queue)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if runner.failed:
        print(f"make: molecule scenarios failed: {', '.join(runner.failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
