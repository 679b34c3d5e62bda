"""glm.fleet.sglang_health: the checks against a scripted transport, the deadline with a fake clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _sglang_health as sh

SERVED = "zai-org/GLM-5.3-Flash"
EXPECTED = {
    "model_path": SERVED,
    "revision": "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a",
    "served_model_name": SERVED,
    "tp_size": 4,
    "ep_size": 4,
    "context_length": 16384,
}
# An Anthropic Messages stream as SGLang sends it (event names and data types must agree).
STREAM = [
    'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", "content": []}}\n\n',
    'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    '"content_block": {"type": "text", "text": ""}}\n\n',
    'event: ping\ndata: {"type": "ping"}\n\n',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    '"delta": {"type": "text_delta", "text": "Ready"}}\n\n',
    'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n',
    'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}\n\n',
    'event: message_stop\ndata: {"type": "message_stop"}\n\n',
]

# A forced call of the health tool, as SGLang's Anthropic adapter streams it: thinking, then tool_use.
TOOL_STREAM = [
    'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_2", "content": []}}\n\n',
    'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    '"content_block": {"type": "thinking", "thinking": ""}}\n\n',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    '"delta": {"type": "thinking_delta", "thinking": "Call it."}}\n\n',
    'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n',
    'event: content_block_start\ndata: {"type": "content_block_start", "index": 1, '
    '"content_block": {"type": "tool_use", "id": "call_1", "name": "glm_fleet_health", "input": {}}}\n\n',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 1, '
    '"delta": {"type": "input_json_delta", "partial_json": "{\\"ready\\": true, "}}\n\n',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 1, '
    '"delta": {"type": "input_json_delta", "partial_json": "\\"requests\\": 1}"}}\n\n',
    'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 1}\n\n',
    'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}\n\n',
    'event: message_stop\ndata: {"type": "message_stop"}\n\n',
]
TOOL_MESSAGE = {
    "type": "message",
    "content": [
        {"type": "thinking", "thinking": "Call it."},
        {"type": "tool_use", "id": "call_1", "name": "glm_fleet_health", "input": {"ready": True, "requests": 1}},
    ],
    "stop_reason": "tool_use",
}


def lines(chunks: list[str]) -> list[str]:
    return [line + "\n" for chunk in chunks for line in chunk.split("\n")]


class FakeServer:
    """Answers like SGLang; `broken` names a path that fails, `info` overrides server info."""

    def __init__(self, broken: str | None = None, info: dict | None = None) -> None:
        self.broken, self.info, self.calls = broken, info, []

    def _maybe_fail(self, path: str) -> None:
        self.calls.append(path)
        if path == self.broken:
            raise sh.CheckFailed(f"GET {path}: no answer in 30 s")

    def connect(self) -> None:
        self._maybe_fail("tcp")

    def get(self, path: str, generates: bool = False) -> tuple[int, bytes]:
        assert generates == (path == "/health_generate")
        self._maybe_fail(path)
        if path == "/v1/models":
            return 200, json.dumps({"object": "list", "data": [{"id": SERVED}]}).encode()
        if path == "/get_server_info":
            return 200, json.dumps(self.info or {**EXPECTED, "version": "0.5"}).encode()
        return 200, b""

    def post_json(self, path: str, body: Any) -> Any:
        self._maybe_fail(path)
        if path == "/v1/messages":
            assert body["tool_choice"] == {"type": "tool", "name": "glm_fleet_health"}
            return TOOL_MESSAGE
        return {"choices": [{"message": {"role": "assistant", "content": "Ready."}}]}

    def post_stream(self, path: str, body: Any) -> list[str]:
        self._maybe_fail(path)
        assert body["stream"] is True
        return lines(TOOL_STREAM if "tools" in body else STREAM)


def clock_from(times: list[float]) -> Any:
    values = iter(times)
    last = [0.0]

    def now() -> float:
        last[0] = next(values, last[0])
        return last[0]

    return now


def test_a_serving_server_passes_every_check() -> None:
    server = FakeServer()
    result = sh.run_checks(server, SERVED, EXPECTED)
    assert result["failed_check"] is None
    assert [name for name in sh.CHECKS if result[name]["ok"]] == list(sh.CHECKS)
    assert result["messages"]["detail"] == "streamed: Ready"
    assert result["ttft_ms"] is not None
    assert server.calls == [
        "tcp",
        "/health",
        "/health_generate",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages",
        "/v1/messages",
        "/get_server_info",
    ]
    assert result["tool_use"]["detail"] == (
        'JSON: glm_fleet_health({"ready": true, "requests": 1}); '
        'stream: glm_fleet_health({"ready": true, "requests": 1})'
    )


def test_health_200_with_hung_generation_is_not_ready() -> None:
    result = sh.run_checks(FakeServer(broken="/health_generate"), SERVED, EXPECTED)
    assert result["health"]["ok"] is True
    assert result["failed_check"] == "health_generate"
    assert result["health_generate"]["detail"] == "GET /health_generate: no answer in 30 s"
    assert all(result[name]["skipped"] for name in ("models", "chat", "messages", "tool_use", "server_info"))


def test_wrong_served_model_is_reported() -> None:
    with pytest.raises(sh.CheckFailed, match=r"not 'zai-org/GLM-5\.3-Flash'"):
        sh.models_detail({"data": [{"id": "other/model"}]}, SERVED)


@pytest.mark.parametrize(
    ("info", "expected_drift"),
    [
        ({**EXPECTED, "tp_size": 2}, ["tp_size: server has 2, inventory expects 4"]),
        (
            {**EXPECTED, "revision": "main"},
            [f"revision: server has 'main', inventory expects '{EXPECTED['revision']}'"],
        ),
        ({**EXPECTED, "context_length": "16384"}, []),  # numbers compare as numbers
    ],
)
def test_argument_drift(info: dict, expected_drift: list[str]) -> None:
    assert sh.drift(info, EXPECTED) == expected_drift


def test_drift_fails_the_server_info_check_and_is_returned() -> None:
    result = sh.run_checks(FakeServer(info={**EXPECTED, "ep_size": 1}), SERVED, EXPECTED)
    assert result["failed_check"] == "server_info"
    assert result["drift"] == ["ep_size: server has 1, inventory expects 4"]


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        (STREAM[:-1], "did not run message_start ... message_stop"),
        ([STREAM[0], STREAM[-1]], "generated no text"),
        (['event: message_start\ndata: {"type": "ping"}\n\n'], "carries data of type 'ping'"),
    ],
)
def test_malformed_anthropic_streams_fail(chunks: list[str], message: str) -> None:
    with pytest.raises(sh.CheckFailed, match=message):
        sh.generated_text(sh.anthropic_stream(sh.sse_events(lines(chunks)), lambda: None))


def test_a_thinking_models_first_tokens_are_reasoning() -> None:
    """GLM-5.3 thinks first: 8 tokens may all be reasoning, and that is a generated token."""
    thinking = [TOOL_STREAM[0], *TOOL_STREAM[1:4], STREAM[-2], STREAM[-1]]
    first: list[int] = []
    message = sh.anthropic_stream(sh.sse_events(lines(thinking)), lambda: first.append(1))
    assert sh.generated_text(message) == "Call it."
    assert first == [1]
    body = {"choices": [{"message": {"role": "assistant", "content": None, "reasoning_content": "Let me"}}]}
    assert sh.chat_text(body) == "Let me"


def with_blocks(*blocks: dict, stop: str = "tool_use") -> dict:
    return {"content": list(blocks), "stop_reason": stop}


CALL = {"type": "tool_use", "id": "c", "name": "glm_fleet_health", "input": {"ready": True, "requests": 1}}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (
            with_blocks(
                {"type": "text", "text": "<tool_call>glm_fleet_health<arg_key>ready</arg_key>"}, stop="end_turn"
            ),
            "came back as text, not tool_use .*--tool-call-parser glm47",
        ),
        (
            with_blocks({"type": "text", "text": "Call it.</think>"}, CALL),
            "thinking came back as text .*--reasoning-parser glm45",
        ),
        (
            with_blocks({**CALL, "input": {"ready": "true", "requests": "1"}}),
            "not typed by the tool's schema",
        ),
        (with_blocks({**CALL, "input": {"ready": True, "requests": True}}), "not typed"),
        (with_blocks(CALL, CALL), "expected one tool_use"),
        (with_blocks(CALL, stop="max_tokens"), "stop_reason is 'max_tokens'"),
        ({"type": "error"}, "not a message"),
    ],
)
def test_a_tool_call_claude_code_cannot_run_fails(message: dict, error: str) -> None:
    with pytest.raises(sh.CheckFailed, match=error):
        sh.tool_use_detail(message, "JSON")


def test_a_streamed_call_is_read_from_its_input_json_deltas() -> None:
    message = sh.anthropic_stream(sh.sse_events(lines(TOOL_STREAM)), lambda: None)
    assert message["content"][1]["input"] == {"ready": True, "requests": 1}
    broken = [*TOOL_STREAM[:6], *TOOL_STREAM[7:]]  # the second half of the input never came
    with pytest.raises(sh.CheckFailed, match="streamed input is not JSON"):
        sh.anthropic_stream(sh.sse_events(lines(broken)), lambda: None)


def test_sse_parser_reads_openai_done_marker() -> None:
    events = list(sh.sse_events(['data: {"choices": []}\n', "\n", "data: [DONE]\n", "\n"]))
    assert events == [("message", {"choices": []}), ("message", "[DONE]")]


def test_waits_until_ready_then_stops() -> None:
    rounds = iter([{"failed_check": "health"}, {"failed_check": "health"}, {"failed_check": None}])
    slept: list[float] = []
    result, attempts, _waited = sh.wait_until_ready(
        lambda: next(rounds), 60, 0.5, clock_from([0, 0, 1, 2, 3]), slept.append
    )
    assert result["failed_check"] is None
    assert attempts == 3
    assert slept == [0.5, 0.5]


def test_gives_up_at_the_deadline() -> None:
    slept: list[float] = []
    result, attempts, waited = sh.wait_until_ready(
        lambda: {"failed_check": "tcp"}, 10, 4, clock_from([0, 0, 4, 8, 9.5, 12, 12]), slept.append
    )
    assert result["failed_check"] == "tcp"
    assert attempts == 5
    assert slept == [4, 4, 2, 0.5]  # never sleeps past the deadline
    assert waited == 12


def test_drift_is_not_waited_for() -> None:
    calls = []

    def attempt() -> dict:
        calls.append(1)
        return {"failed_check": "server_info", "drift": ["tp_size: ..."]}

    sh.wait_until_ready(attempt, 600, 1, clock_from([0, 0, 0]), lambda _seconds: None)
    assert len(calls) == 1


def test_module_summary_names_each_check_in_order() -> None:
    result = sh.run_checks(FakeServer(), SERVED, EXPECTED)
    report = sh.summarize(result, attempts=2, waited=1.234)
    assert report["ready"] is True
    assert list(report["checks"]) == list(sh.CHECKS)
    assert report["waited_s"] == 1.23
    assert report["drift"] == []
