"""Lab stand-in for `python3 -m sglang.compile_deep_gemm` (sglang 0.5.23, sglang/compile_deep_gemm.py).

What the real script does, and this one with it:

- it takes the server's arguments (launch_server's parser, so an unknown flag exits 2) plus
  `--timeout` (default 3600), forces DeepGEMM's JIT on (SGLANG_ENABLE_JIT_DEEPGEMM) and starts a
  whole server with them in a child process: the weights are loaded and the GPUs held as by the
  server itself, so it cannot run beside a server that holds the same GPUs;
- it polls `GET /v1/models` on `--host`/`--port` every 10 s, without an Authorization header:
  with `--api-key` (or a `--config` that sets one) every answer is a 401, and it polls until the
  timeout;
- once that answers 200 it sends one `POST /generate` (input_ids [0, 1, 2, 3], 8 new tokens,
  600 s timeout), which waits for the kernels; any status but 200 is a RuntimeError;
- it prints that the compilation finished, sleeps 10 s "for safety", kills the server and exits 0;
- on the timeout it raises TimeoutError("DeepGEMM Kernels compilation timeout. ..."), and then
  does not exit: the server is a non-daemon multiprocessing child, which the interpreter joins at
  exit, and the server never stops on its own. Whoever runs it needs a deadline of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request

from sglang import launch_server

# The real script's time.sleep(10) between polls and after the sync request, unless a test shortens
# them (the contract tests, the lab's rollout test).
POLL_SECONDS = float(os.environ.get("GLM_STANDIN_COMPILE_POLL_SECONDS", "10"))
SAFETY_SECONDS = float(os.environ.get("GLM_STANDIN_COMPILE_SAFETY_SECONDS", "10"))


def timeout_arg(argv: list[str]) -> tuple[int, list[str]]:
    """CompileArgs.timeout (int, default 3600), and the server's arguments without it."""
    timeout, rest, i = 3600, [], 0
    while i < len(argv):
        if argv[i] == "--timeout" and i + 1 < len(argv):
            timeout, i = int(argv[i + 1]), i + 2
        elif argv[i].startswith("--timeout="):
            timeout, i = int(argv[i].split("=", 1)[1]), i + 1
        else:
            rest.append(argv[i])
            i += 1
    return timeout, rest


def status(url: str, payload: dict[str, object] | None = None, timeout: float | None = None) -> int:
    data = json.dumps(payload).encode() if payload is not None else None
    headers = {"Content-Type": "application/json; charset=utf-8"}  # and no Authorization, as the real script
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 - http to its own server
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to its own server
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def compile_kernels(host: str, port: int, timeout: int) -> None:
    """launch_server_process_and_send_one_request, rank 0."""
    base = f"http://{host}:{port}"
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            if status(f"{base}/v1/models") == 200:
                payload = {"sampling_params": {"max_new_tokens": 8, "temperature": 0}, "input_ids": [0, 1, 2, 3]}
                code = status(f"{base}/generate", payload, timeout=600)
                if code != 200:
                    raise RuntimeError(f"Sync request failed: HTTP {code}")
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(POLL_SECONDS)
    raise TimeoutError("DeepGEMM Kernels compilation timeout.\n\nFeel free and please restart the command.")


def main(argv: list[str]) -> int:
    timeout, server_argv = timeout_arg(argv)
    args = launch_server.parse_args(server_argv)  # exits 2 on an unknown flag, as ServerArgs' parser does
    print("Disable CUDA Graph and Torch Compile to save time...", flush=True)
    print("Begin DeepGEMM Kernels compilation...", flush=True)
    env = {**os.environ, "SGLANG_ENABLE_JIT_DEEPGEMM": "1", "SGLANG_IN_DEEPGEMM_PRECOMPILE_STAGE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *server_argv], env=env)
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host  # noqa: S104
    try:
        compile_kernels(host, args.port, timeout)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        server.wait()  # multiprocessing joins the non-daemon server at exit: the script hangs
        return 1
    print("\nDeepGEMM Kernels compilation finished successfully.", flush=True)
    time.sleep(SAFETY_SECONDS)
    server.kill()
    server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
