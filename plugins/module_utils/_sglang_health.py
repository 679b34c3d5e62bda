# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an SGLang server really serves: the checks, as functions of a transport and a clock.

`/health` answers 200 while generation can hang, so readiness here means a generated token over
the OpenAI and the Anthropic APIs, and the server's own view of its arguments matching what the
inventory expects.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
from typing import Any, Callable, Iterable

from ansible.module_utils.urls import open_url

CHECKS = ("tcp", "health", "health_generate", "models", "chat", "messages", "server_info")
COMPARED = ("model_path", "revision", "served_model_name", "tp_size", "ep_size", "context_length")
PROMPT = "Reply with one word: ready?"


class CheckFailed(Exception):
    """A check's failure, with what was seen."""


def models_detail(body: Any, served: str) -> str:
    ids = [m.get("id") for m in body.get("data", [])] if isinstance(body, dict) else []
    if served not in ids:
        raise CheckFailed(f"/v1/models lists {ids}, not {served!r}")
    return f"lists {served}"


def chat_text(body: Any) -> str:
    try:
        text = body["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as err:
        raise CheckFailed(f"not a chat completion: {json.dumps(body)[:200]}") from err
    if not text.strip():
        raise CheckFailed("the chat completion generated no text")
    return text


def sse_events(lines: Iterable[str]) -> Iterable[tuple[str, Any]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "message", []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                payload = "\n".join(data)
                yield event, (payload if payload == "[DONE]" else json.loads(payload))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if data:
        yield event, json.loads("\n".join(data))


def anthropic_stream_text(events: Iterable[tuple[str, Any]], on_first_token: Callable[[], None]) -> str:
    """The text of an Anthropic Messages stream; checks the event order Claude Code relies on."""
    seen: list[str] = []
    text = []
    for name, data in events:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind != name:
            raise CheckFailed(f"event {name!r} carries data of type {kind!r}")
        seen.append(name)
        if name == "content_block_delta" and data.get("delta", {}).get("type") == "text_delta":
            if not text:
                on_first_token()
            text.append(data["delta"]["text"])
        if name == "error":
            raise CheckFailed(f"stream error: {json.dumps(data)[:200]}")
    if not seen or seen[0] != "message_start" or seen[-1] != "message_stop":
        raise CheckFailed(f"stream did not run message_start ... message_stop: {seen}")
    if not "".join(text).strip():
        raise CheckFailed("the message stream generated no text")
    return "".join(text)


def drift(info: Any, expected: dict) -> list[str]:
    """Differences between the server's own view of its arguments and the inventory's."""
    if not isinstance(info, dict):
        return ["server_info is not a JSON object"]
    found = []
    for key in COMPARED:
        if key not in expected or expected[key] is None:
            continue
        want, have = expected[key], info.get(key)
        if isinstance(want, int) and not isinstance(want, bool) and str(have).isdigit():
            have = int(have)  # type: ignore[arg-type]
        if have != want:
            found.append(f"{key}: server has {have!r}, inventory expects {want!r}")
    return found


class Http:
    """The transport against one server, with a bearer token when given.

    Generation requests may take `timeout` seconds; everything else gets at most `probe_timeout`,
    so that a request swallowed while the server restarts (docker's proxy accepts the connection
    of a container that is going away) costs seconds, not the generation budget.
    """

    def __init__(self, host: str, port: int, api_key: str | None, timeout: float, probe_timeout: float = 5) -> None:
        self.base = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
        self.host, self.port, self.api_key, self.timeout = host, port, api_key, timeout
        self.probe_timeout = min(probe_timeout, timeout)

    def connect(self) -> None:
        try:
            with socket.create_connection((self.host, self.port), timeout=self.probe_timeout):
                pass
        except OSError as err:
            raise CheckFailed(f"connect {self.host}:{self.port}: {err.strerror or err}") from err

    def _request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        timeout = self.timeout if timeout is None else timeout
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        try:
            return open_url(
                self.base + path, data=data, headers=headers, method=method, timeout=timeout, use_proxy=False
            )
        except urllib.error.HTTPError as err:
            raise CheckFailed(f"{method} {path}: HTTP {err.code}") from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, socket.timeout) or "timed out" in str(reason):
                raise CheckFailed(f"{method} {path}: no answer in {timeout:g} s") from err
            raise CheckFailed(f"{method} {path}: {reason}") from err

    def get(self, path: str, generates: bool = False) -> tuple[int, bytes]:
        with self._request("GET", path, timeout=None if generates else self.probe_timeout) as resp:
            return resp.status, resp.read()

    def post_json(self, path: str, body: Any) -> Any:
        with self._request("POST", path, body) as resp:
            return json.loads(resp.read())

    def post_stream(self, path: str, body: Any) -> Iterable[str]:
        resp = self._request("POST", path, body)
        try:
            for raw in resp:
                yield raw.decode()
        except (OSError, socket.timeout) as err:
            raise CheckFailed(f"POST {path}: stream broke off: {err}") from err
        finally:
            resp.close()


def run_checks(http: Any, served: str, expected: dict, clock: Callable[[], float] = time.monotonic) -> dict:
    """Every check once, in order; after the first failure the rest are skipped."""
    results: dict = {}
    ttft: list[float] = []

    def tcp() -> str:
        http.connect()
        return "connected"

    def health() -> str:
        return f"HTTP {http.get('/health')[0]}"

    def health_generate() -> str:
        return f"HTTP {http.get('/health_generate', generates=True)[0]}"

    def models() -> str:
        return models_detail(json.loads(http.get("/v1/models")[1]), served)

    def chat() -> str:
        body = {"model": served, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8}
        return "generated: " + chat_text(http.post_json("/v1/chat/completions", body))[:60]

    def messages() -> str:
        body = {"model": served, "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
        started = clock()
        text = anthropic_stream_text(
            sse_events(http.post_stream("/v1/messages", body)), lambda: ttft.append(clock() - started)
        )
        return "streamed: " + text[:60]

    def server_info() -> str:
        try:
            raw = http.get("/get_server_info")[1]
        except CheckFailed:
            raw = http.get("/server_info")[1]
        info = json.loads(raw)
        if isinstance(info, dict):
            results["server"] = {key: info.get(key) for key in COMPARED}
        found = drift(info, expected)
        if found:
            results["drift"] = found
            raise CheckFailed("argument drift: " + "; ".join(found))
        return "matches " + ", ".join(k for k in COMPARED if k in expected)

    steps = {
        "tcp": tcp,
        "health": health,
        "health_generate": health_generate,
        "models": models,
        "chat": chat,
        "messages": messages,
        "server_info": server_info,
    }
    failed = None
    for name in CHECKS:
        if failed:
            results[name] = {"ok": False, "skipped": True, "latency_ms": None, "detail": f"skipped after {failed}"}
            continue
        started = clock()
        try:
            detail = steps[name]()
            ok = True
        except (CheckFailed, ValueError, OSError) as err:
            detail, ok, failed = str(err), False, name
        results[name] = {
            "ok": ok,
            "skipped": False,
            "latency_ms": round((clock() - started) * 1000, 1),
            "detail": detail,
        }
    results["ttft_ms"] = round(ttft[0] * 1000, 1) if ttft else None
    results["failed_check"] = failed
    return results


def wait_until_ready(
    attempt: Callable[[], dict],
    timeout: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict, int, float]:
    """Run attempt() until it reports no failed check or the deadline passes.

    Returns the last result, the number of attempts and the seconds waited. A drifted server is
    not waited for: its arguments will not change by themselves.
    """
    started = clock()
    deadline = started + timeout
    attempts = 0
    while True:
        attempts += 1
        result = attempt()
        if result["failed_check"] is None or result.get("drift"):
            return result, attempts, clock() - started
        remaining = deadline - clock()
        if remaining <= 0:
            return result, attempts, clock() - started
        sleep(min(interval, remaining))


def summarize(result: dict, attempts: int, waited: float) -> dict:
    checks = {name: result[name] for name in CHECKS}
    return {
        "ready": result["failed_check"] is None,
        "failed_check": result["failed_check"],
        "checks": checks,
        "ttft_ms": result["ttft_ms"],
        "drift": result.get("drift", []),
        "server": result.get("server", {}),
        "attempts": attempts,
        "waited_s": round(waited, 2),
    }


def probe(params: dict, port: int) -> dict:
    """The checks against one server of `params` (glm.fleet.sglang_health's options), until ready or
    `params["timeout"]`; the report, with a `msg` naming the failed check when it is not ready."""

    def option(name: str, default: Any) -> Any:
        return default if params.get(name) is None else params[name]

    host = option("host", "127.0.0.1")
    http = Http(host, port, params.get("api_key"), option("request_timeout", 30))
    expected = {key: value for key, value in (params.get("expected") or {}).items() if value is not None}
    result, attempts, waited = wait_until_ready(
        lambda: run_checks(http, params["served_model_name"], expected), option("timeout", 0),
        option("interval", 0.5),
    )  # fmt: skip
    report = summarize(result, attempts, waited)
    if not report["ready"]:
        check = report["failed_check"]
        report["msg"] = (
            f"SGLang at {host}:{port} is not ready after {report['waited_s']} s: "
            f"check {check} failed: {report['checks'][check]['detail']}"
        )
    return report
