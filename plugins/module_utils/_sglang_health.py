# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an SGLang server really serves: the checks, as functions of a transport and a clock.

`/health` answers 200 while generation can hang, so readiness here means a generated token over
the OpenAI and the Anthropic APIs, a tool call that Claude Code can run (a `tool_use` block with
typed input, streamed and not), and the server's own view of its arguments matching what the
inventory expects. GLM-5.3 always thinks first: a token of reasoning is a generated token.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
from typing import Any, Callable, Iterable

from ansible.module_utils.urls import open_url

CHECKS = ("tcp", "health", "health_generate", "models", "chat", "messages", "tool_use", "server_info")
COMPARED = ("version", "model_path", "revision", "served_model_name", "tp_size", "ep_size", "context_length")
PROMPT = "Reply with one word: ready?"
# The tool_use check: a tool forced by tool_choice, with a boolean and an integer to come back typed.
TOOL = {
    "name": "glm_fleet_health",
    "description": "Report that the server is ready and how many requests it can take.",
    "input_schema": {
        "type": "object",
        "properties": {"ready": {"type": "boolean"}, "requests": {"type": "integer"}},
        "required": ["ready", "requests"],
    },
}
# The model thinks before it calls the tool (GLM-5.3's reasoning cannot be turned off).
TOOL_MAX_TOKENS = 1024
REASONING_PARSER = "start the server with --reasoning-parser glm45"
TOOL_CALL_PARSER = "start the server with --tool-call-parser glm47"


class CheckFailed(Exception):
    """A check's failure, with what was seen."""


def models_detail(body: Any, served: str) -> str:
    ids = [m.get("id") for m in body.get("data", [])] if isinstance(body, dict) else []
    if served not in ids:
        raise CheckFailed(f"/v1/models lists {ids}, not {served!r}")
    return f"lists {served}"


def chat_text(body: Any) -> str:
    """The completion's answer, else its reasoning (a thinking model's first tokens)."""
    try:
        message = body["choices"][0]["message"]
        text = message.get("content") or message.get("reasoning_content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as err:
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


def anthropic_stream(events: Iterable[tuple[str, Any]], on_first_token: Callable[[], None]) -> dict:
    """An Anthropic Messages stream read into the message it builds (content blocks, stop_reason),
    as the SDK does; checks the event order Claude Code relies on. A block's first text or thinking
    delta is a token."""
    seen: list[str] = []
    message: dict = {"content": [], "stop_reason": None}
    partial: dict[int, list[str]] = {}
    tokens = 0
    for name, data in events:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind != name:
            raise CheckFailed(f"event {name!r} carries data of type {kind!r}")
        seen.append(name)
        if name == "error":
            raise CheckFailed(f"stream error: {json.dumps(data)[:200]}")
        if name == "content_block_start":
            message["content"].append(dict(data.get("content_block") or {}))
        elif name == "content_block_delta":
            block = message["content"][-1] if message["content"] else {}
            delta = data.get("delta") or {}
            field = {"text_delta": "text", "thinking_delta": "thinking"}.get(delta.get("type"))
            if field:
                if tokens == 0:
                    on_first_token()
                tokens += 1
                block[field] = block.get(field, "") + delta.get(field, "")
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(len(message["content"]) - 1, []).append(delta.get("partial_json", ""))
        elif name == "message_delta":
            message["stop_reason"] = (data.get("delta") or {}).get("stop_reason")
    if not seen or seen[0] != "message_start" or seen[-1] != "message_stop":
        raise CheckFailed(f"stream did not run message_start ... message_stop: {seen}")
    for index, pieces in partial.items():
        try:
            message["content"][index]["input"] = json.loads("".join(pieces) or "{}")
        except ValueError as err:
            raise CheckFailed(f"a tool_use block's streamed input is not JSON: {''.join(pieces)[:200]!r}") from err
    return message


def generated_text(message: dict) -> str:
    """The text a message generated: its answer, else its thinking."""
    blocks = message.get("content") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    thinking = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
    if not (text or thinking).strip():
        raise CheckFailed("the message stream generated no text")
    return text or thinking


def tool_use_detail(message: Any, how: str) -> str:
    """What Claude Code needs of a forced call of TOOL: one tool_use block with the input typed by
    the tool's schema, stop_reason tool_use, and no raw GLM markup left in the text."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise CheckFailed(f"{how}: not a message: {json.dumps(message)[:200]}")
    blocks = message["content"]
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    if "</think>" in text or "<think>" in text:
        raise CheckFailed(f"{how}: GLM's thinking came back as text ({text[:80]!r}): {REASONING_PARSER}")
    calls = [b for b in blocks if b.get("type") == "tool_use"]
    if not calls:
        raise CheckFailed(
            f"{how}: a forced call of {TOOL['name']} came back as text, not tool_use ({text[:80]!r}): "
            + TOOL_CALL_PARSER
        )
    call = calls[0]
    got = call.get("input")
    if len(calls) != 1 or call.get("name") != TOOL["name"] or not isinstance(got, dict):
        raise CheckFailed(f"{how}: expected one tool_use of {TOOL['name']}, got {json.dumps(calls)[:200]}")
    ready, requests = got.get("ready"), got.get("requests")
    if not isinstance(ready, bool) or not isinstance(requests, int) or isinstance(requests, bool):
        raise CheckFailed(
            f"{how}: tool_use input is not typed by the tool's schema (ready: boolean, requests: integer): "
            + json.dumps(got)[:200]
        )
    if message.get("stop_reason") != "tool_use":
        raise CheckFailed(f"{how}: stop_reason is {message.get('stop_reason')!r}, not 'tool_use'")
    return f"{how}: {TOOL['name']}({json.dumps(got)})"


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
        message = anthropic_stream(
            sse_events(http.post_stream("/v1/messages", body)), lambda: ttft.append(clock() - started)
        )
        return "streamed: " + generated_text(message)[:60]

    def tool_use() -> str:
        body = {
            "model": served, "max_tokens": TOOL_MAX_TOKENS, "tools": [TOOL],
            "tool_choice": {"type": "tool", "name": TOOL["name"]},
            "messages": [{"role": "user", "content": f"Call {TOOL['name']}: ready, and the requests you can take."}],
        }  # fmt: skip
        whole = tool_use_detail(http.post_json("/v1/messages", body), "JSON")
        streamed = anthropic_stream(
            sse_events(http.post_stream("/v1/messages", {**body, "stream": True})), lambda: None
        )
        return f"{whole}; {tool_use_detail(streamed, 'stream')}"

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
        "tool_use": tool_use,
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
