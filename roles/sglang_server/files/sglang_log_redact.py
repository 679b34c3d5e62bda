# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a command and pass its output on with the server's keys replaced by <redacted>.

    python3 sglang-log-redact CONFIG -- COMMAND [ARG...]

SGLang logs its server_args at start, api_key and admin_api_key included (sglang 0.5.23,
entrypoints/engine.py: logger.info(f"server_args=...")). The unit runs the server in the
foreground, so that line would reach the system journal, which the adm and systemd-journal groups
read. This wrapper is the unit's main process: it reads the keys from the root-only config file
(the `api-key` and `admin-api-key` lines the role writes), runs the command with its output on a
pipe, and writes each line to its own stdout with every occurrence of a key replaced. It exits
with the command's status; SIGTERM and SIGINT are passed on to the command.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

KEY_FIELDS = ("api-key", "admin-api-key")
MASK = b"<redacted>"


def read_keys(config_path: str) -> list[bytes]:
    """The keys in the config file: `name: "value"` lines, value as JSON (how the role writes it)."""
    keys = []
    try:
        with open(config_path, encoding="utf-8") as config:
            for line in config:
                name, _colon, value = line.partition(":")
                if name.strip() in KEY_FIELDS and value.strip():
                    keys.append(str(json.loads(value.strip())).encode())
    except FileNotFoundError:
        return []
    return sorted((k for k in keys if k), key=len, reverse=True)


def redact(line: bytes, keys: list[bytes]) -> bytes:
    for key in keys:
        line = line.replace(key, MASK)
    return line


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: sglang-log-redact CONFIG -- COMMAND [ARG...]\n")
        return 2
    keys = read_keys(argv[0])
    proc = subprocess.Popen(argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    out = sys.stdout.buffer
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        out.write(redact(line, keys))
        out.flush()
    return proc.wait()


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.exit(status if status >= 0 else 128 - status)
