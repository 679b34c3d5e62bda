"""What the SGLang stand-in enforces, each rule taken from sglang 0.5.23's source (file and function
named at each rule), so that the lab refuses what a real server refuses:

- the API key (`sglang/srt/utils/auth.py`, `decide_request_auth`);
- the context length (`sglang/srt/managers/tokenizer_manager.py`, `_validate_one_request`);
- the error envelopes of each route (`sglang/srt/entrypoints/openai/serving_base.py`,
  `create_error_response`; `sglang/srt/entrypoints/anthropic/serving.py`, `_error_response`,
  `_convert_openai_error_response` and `_flush_on_error`; `sglang/srt/entrypoints/http_server.py`,
  `_create_error_response` and `stream_results`);
- token counting: the prompt is rendered in the shape of GLM's chat template (roles, the tool
  schemas as JSON, tool calls and results) and tokenized with the snapshot's `tokenizer.json`, as
  SGLang applies the chat template and tokenizes with the model's tokenizer.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer as HFTokenizer  # the stand-in image carries the wheel

# --- API keys: sglang/srt/utils/auth.py, decide_request_auth --------------------------------------

# The stand-in's routes that SGLang marks @auth_level(AuthLevel.ADMIN_OPTIONAL) (http_server.py).
ADMIN_OPTIONAL = ("/flush_cache", "/update_weights_from_disk", "/start_profile", "/stop_profile", "/set_internal_state")


def _bearer(authorization: str | None, expected: str) -> bool:
    """`<bearer, any case> <token>` (one space splits scheme and token), compared in constant time."""
    if not authorization:
        return False
    parts = authorization.split(" ", 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return False
    return hmac.compare_digest(parts[1].encode(), expected.encode())


def auth_status(
    method: str, path: str, authorization: str | None, api_key: str | None, admin_api_key: str | None
) -> int:
    """SGLang's decision as an HTTP status (200 allowed, else 401): OPTIONS, /health*, /ready* and
    /metrics* are always open; an admin route takes the admin key when one is set (the API key is
    then refused), else the API key; every other route takes the API key when one is set.
    `x-api-key` is not read."""
    if method == "OPTIONS" or path.startswith(("/health", "/ready", "/metrics")):
        return 200
    key = (admin_api_key or api_key) if path in ADMIN_OPTIONAL else api_key
    if not key:
        return 200
    return 200 if _bearer(authorization, key) else 401


# --- Context length: sglang/srt/managers/tokenizer_manager.py, _validate_one_request -------------


class ContextError(ValueError):
    """The ValueError that SGLang's tokenizer manager raises; its text is SGLang's, word for word."""


def validate_context(
    input_tokens: int, max_new_tokens: int | None, context_len: int, auto_truncate: bool
) -> int | None:
    """Raise ContextError as SGLang does; return the (possibly truncated) max_new_tokens."""
    if input_tokens >= context_len:
        if not auto_truncate:
            raise ContextError(
                f"The input ({input_tokens} tokens) is longer than the model's context length ({context_len} tokens)."
            )
        input_tokens = context_len
    if max_new_tokens is not None and max_new_tokens + input_tokens > context_len:
        if auto_truncate:
            return max(0, context_len - input_tokens)
        raise ContextError(
            "Requested token count exceeds the model's maximum context length "
            f"of {context_len} tokens. You requested a total of {max_new_tokens + input_tokens} "
            f"tokens: {input_tokens} tokens from the input messages and "
            f"{max_new_tokens} tokens for the completion. Please reduce the number "
            "of tokens in the input messages or the completion to fit within the limit."
        )
    return max_new_tokens


# --- Error envelopes ------------------------------------------------------------------------------


def openai_error(message: str, status: int = 400, err_type: str = "BadRequestError") -> dict[str, Any]:
    """serving_base.py, create_error_response (ErrorResponse.model_dump())."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": status}


ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "request_timeout_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
}


def anthropic_error(message: str, error_type: str) -> dict[str, Any]:
    """anthropic/serving.py, _error_response (AnthropicErrorResponse.model_dump())."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def anthropic_from_openai_error(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """anthropic/serving.py, _convert_openai_error_response: a 4xx keeps the upstream error type
    (for a context error that is "BadRequestError", not one of Anthropic's names) and its message,
    cut at 500 characters."""
    error_type = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    if status < 500 and isinstance(body.get("type"), str) and body["type"]:
        error_type = body["type"]
    message = str(body.get("message") or "")
    message = "Internal server error" if status >= 500 else (message[:500] + "…" if len(message) > 500 else message)
    return anthropic_error(message or "Request failed", error_type)


def generate_error(message: str) -> dict[str, Any]:
    """http_server.py, _create_error_response (non-streaming /generate)."""
    return {"error": {"message": message}}


def generate_stream_error(message: str) -> dict[str, Any]:
    """http_server.py, generate_request's stream_results."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}


# --- Prompts: the chat template's shape, tokenized with the snapshot's tokenizer ---------------------


def _text(content: Any) -> str:
    """A message's content as the template writes it: text blocks, tool calls and tool results."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content)
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "thinking":
            parts.append(str(block.get("thinking", "")))
        elif block.get("type") == "tool_use":
            parts.append(f"<tool_call>{block.get('name')}\n{json.dumps(block.get('input', {}))}</tool_call>")
        elif block.get("type") == "tool_result":
            parts.append(f"<tool_response>{_text(block.get('content'))}</tool_response>")
        elif block.get("type") in ("image", "image_url", "document"):
            parts.append("<|begin_of_image|><|image|><|end_of_image|>")
        else:
            parts.append(json.dumps(block))
    return "\n".join(parts)


def _tools(tools: Any) -> str:
    if not tools:
        return ""
    return "\n# Tools\n" + "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)


def render_messages(request: dict[str, Any]) -> str:
    """An Anthropic /v1/messages (or count_tokens) request as the prompt the model would read."""
    system = _text(request.get("system"))
    out = ["[gMASK]<sop>"]
    if system or request.get("tools"):
        out.append(f"<|system|>\n{system}{_tools(request.get('tools'))}")
    for message in request.get("messages") or []:
        role = message.get("role", "user") if isinstance(message, dict) else "user"
        content = message.get("content") if isinstance(message, dict) else message
        out.append(f"<|{role}|>\n{_text(content)}")
    out.append("<|assistant|>\n")
    return "".join(out)


def render_chat(request: dict[str, Any]) -> str:
    """An OpenAI /v1/chat/completions request as the prompt the model would read."""
    tools = [t.get("function", t) for t in request.get("tools") or [] if isinstance(t, dict)]
    out = ["[gMASK]<sop>"]
    if tools:
        out.append(f"<|system|>\n{_tools(tools)}")
    for message in request.get("messages") or []:
        calls = "".join(
            f"<tool_call>{c.get('function', {}).get('name')}\n{c.get('function', {}).get('arguments')}</tool_call>"
            for c in message.get("tool_calls") or []
        )
        out.append(f"<|{message.get('role', 'user')}|>\n{_text(message.get('content'))}{calls}")
    out.append("<|assistant|>\n")
    return "".join(out)


@dataclass
class Tokenizer:
    """The snapshot's tokenizer.json, loaded as SGLang's tokenizer manager loads the model's."""

    backend: Any

    @classmethod
    def from_file(cls, path: str) -> Tokenizer:
        return cls(HFTokenizer.from_file(path))

    def count(self, text: str) -> int:
        return len(self.backend.encode(text, add_special_tokens=False).ids)

    def pieces(self, text: str) -> list[str]:
        """The text cut at its tokens' boundaries, one piece per token (how it streams, a token a
        chunk), so that joined they are the text and counted they are count(text)."""
        starts = [start for start, _end in self.backend.encode(text, add_special_tokens=False).offsets]
        if not starts:
            return [""]
        starts[0] = 0
        return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]

    def count_prompt(self, prompt: Any) -> int:
        """A completions prompt or /generate input: text, a list of texts, or token ids."""
        if isinstance(prompt, str):
            return self.count(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return len(prompt)
        if isinstance(prompt, list):
            return sum(self.count_prompt(p) for p in prompt)
        return 0
