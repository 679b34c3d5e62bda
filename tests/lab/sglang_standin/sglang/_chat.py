"""SGLang's own chat path in the stand-in: everything between the model's raw text and the client.

Only token generation is stood in. The stand-in's model writes raw GLM-5.3 text, the way the real
model does after the template's `<|assistant|><think>`:

    REASONING</think>ANSWER<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>...

cut into the tokens of the lab's tokenizer. From there on the code is SGLang's, from the pinned
wheel (`tests/lab/standin_deps.py` checks its sha256), imported and run unchanged:

- the prompt: `sglang.srt.parser.glm53_chat_template` renders it (token counts follow the real
  template);
- `sglang.srt.parser.reasoning_parser.ReasoningParser` with `--reasoning-parser` (glm45);
- `sglang.srt.function_call.glm47_moe_detector` with `--tool-call-parser` (glm47), looked up in
  the same table SGLang's FunctionCallParser uses (`parser_names` is not importable without torch,
  so the table is mirrored: `DETECTORS`);
- `sglang.srt.entrypoints.anthropic.serving.AnthropicServing`: the Anthropic request's
  conversion, the stream builder and the JSON response, for /v1/messages and count_tokens;
- `sglang.srt.entrypoints.openai.protocol` and `sse_utils` / `usage_processor`: every request and
  response type and every chunk.

`sglang.srt.entrypoints.openai.serving_chat.OpenAIServingChat` does not import without torch. The
few of its methods that AnthropicServing and /v1/chat/completions call are mirrored in
`ServingChat` below, each citing the lines of SGLang 0.5.23 it follows, for the one path the fleet
runs (one choice, no logprobs, no response-template grammar, no chat-encoding adapter); a contract
test (tests/unit/lab/test_sglang_chat.py) checks those lines are still in the wheel.

Three modules SGLang imports but this path does not use are stubbed: `transformers` (type hints
only), `IPython.display` (notebook helpers of `sglang.utils`) and
`sglang.srt.observability.req_time_stats` (its `monotonic_time`, which is `time.perf_counter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from http import HTTPStatus
from typing import Any

FOLLOWS = "0.5.23"  # the SGLang release whose serving_chat.py the mirror below follows


def _stub(name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules.setdefault(name, module)


_stub("transformers", PreTrainedTokenizerBase=object)
_stub("IPython")
_stub("IPython.display", HTML=None, display=None)
_stub("sglang.srt.observability.req_time_stats", monotonic_time=time.perf_counter)

from fastapi.responses import ORJSONResponse  # noqa: E402 - after the stubs
from pydantic import ValidationError  # noqa: E402

from sglang.srt.entrypoints.anthropic.protocol import (  # noqa: E402
    AnthropicCountTokensRequest,
    AnthropicMessagesRequest,
)
from sglang.srt.entrypoints.anthropic.serving import AnthropicServing  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import (  # noqa: E402
    ChatCompletionMessageGenericParam,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionResponseChoice,
    ChatCompletionResponseStreamChoice,
    ChatCompletionStreamResponse,
    ChatMessage,
    DeltaMessage,
    ErrorResponse,
    FunctionResponse,
    PromptTokensDetails,
    ToolCall,
    ToolChoice,
)
from sglang.srt.entrypoints.openai.sse_utils import build_sse_content  # noqa: E402
from sglang.srt.entrypoints.openai.usage_processor import UsageProcessor  # noqa: E402
from sglang.srt.function_call.glm4_moe_detector import Glm4MoeDetector  # noqa: E402
from sglang.srt.function_call.glm47_moe_detector import Glm47MoeDetector  # noqa: E402
from sglang.srt.parser.glm53_chat_template import render_glm53_flash_segments  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402
from sglang.version import __version__ as SGLANG_VERSION  # noqa: E402

if SGLANG_VERSION != FOLLOWS:
    raise ImportError(f"the stand-in's chat path follows SGLang {FOLLOWS}; the wheel in the image is {SGLANG_VERSION}")

# function_call/function_call_parser.py FunctionCallParser.ToolCallParserEnum, the GLM entries.
DETECTORS: dict[str, type] = {"glm45": Glm4MoeDetector, "glm47": Glm47MoeDetector}

# parser/python_chat_template.py _GLM53_FEATURES: what SGLang derives from the GLM-5.3 template.
FORCE_REASONING = True  # reasoning_config=ReasoningToggleConfig(special_case="always")
SUPPORTS_INLINE_SYSTEM = True  # supports_inline_system=True


class ToolParser:
    """function_call/function_call_parser.py FunctionCallParser (__init__, has_tool_call,
    parse_non_stream, parse_stream_chunk, parse_stream_end) for the GLM detectors: the module
    itself imports xgrammar and torch."""

    def __init__(self, tools: list[Any], name: str, tool_choice: Any = None) -> None:
        self.tools = tools
        detector = DETECTORS[name]()
        if isinstance(detector, Glm47MoeDetector):
            detector.use_full_assistant_constraint = not any(tool.function.strict for tool in tools)
        if isinstance(tool_choice, dict):
            tool_choice = ToolChoice(function={"name": tool_choice["name"]})
        self.detector = detector.get_required_tool_parser(tool_choice) or detector

    def active(self) -> bool:
        return bool(self.tools) or self.detector.parses_without_tools()

    def has_tool_call(self, text: str) -> bool:
        return self.active() and self.detector.has_tool_call(text)

    def parse_non_stream(self, text: str) -> tuple[str, list[Any]]:
        if not self.active():
            return text, []
        has_call = self.detector.has_tool_call(text)
        parsed = self.detector.detect_and_parse(text, self.tools)
        return (parsed.normal_text, parsed.calls) if parsed.calls or has_call else (text, [])

    def parse_stream_chunk(self, chunk: str) -> tuple[str, list[Any]]:
        if not self.active():
            return chunk, []
        result = self.detector.parse_streaming_increment(chunk, self.tools)
        return result.normal_text or "", list(result.calls or [])

    def parse_stream_end(self) -> tuple[str, list[Any]]:
        if not self.active():
            return "", []
        result = self.detector.finish(self.tools)
        return result.normal_text, result.calls


class Generation:
    """What the scheduler hands back for one request (tokenizer_manager.generate_request's dicts):
    `text` is each step's new text, `meta_info` SGLang's counts and finish reason."""

    def __init__(self, pieces: list[str], finish: str, prompt_tokens: int, cached_tokens: int) -> None:
        self.pieces, self.finish, self.prompt_tokens, self.cached_tokens = pieces, finish, prompt_tokens, cached_tokens
        self.id = uuid.uuid4().hex

    def meta(self, completion: int, last: bool) -> dict[str, Any]:
        finish = {"type": self.finish, "matched": None} if last else None
        return {
            "id": self.id, "prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
            "cached_tokens": self.cached_tokens, "reasoning_tokens": 0, "finish_reason": finish,
        }  # fmt: skip


class ServingChat:
    """The methods of serving_chat.py's OpenAIServingChat that the fleet's requests reach.

    `engine` is the stand-in's scheduler: `prompt(text) -> int` counts a prompt,
    `generate(request, prompt_tokens)` is a generator that validates the request against the
    context length (raising SGLang's ValueError), takes a running slot, yields the tokens it will
    decode with the finish reason, then each token at the decode pace."""

    def __init__(self, args: Any, engine: Any, context_len: int) -> None:
        self.reasoning_parser = args.reasoning_parser
        self.tool_call_parser = args.tool_call_parser
        self.allow_auto_truncate = args.allow_auto_truncate
        self.stream_interval = args.stream_interval
        self.enable_cache_report = args.enable_cache_report
        self.custom_labels_header = args.tokenizer_metrics_custom_labels_header
        self.allowed_custom_labels = set(args.tokenizer_metrics_allowed_custom_labels or ())
        self.context_len = context_len
        self.engine = engine
        self.supports_inline_system = SUPPORTS_INLINE_SYSTEM
        # the reasoning parser's detector, which rewraps history (serving_chat.py, __init__, 399-410)
        self._reasoning_detector = None
        if self.reasoning_parser:
            self._reasoning_detector = ReasoningParser(
                model_type=self.reasoning_parser, stream_reasoning=True, tokenizer=None
            ).detector
        self.tokenizer_manager = types.SimpleNamespace(
            tokenizer=None,
            model_config=types.SimpleNamespace(is_multimodal=False),
            create_abort_task=lambda _request: None,
        )

    # serving_chat.py 641-650 _effective_tools
    def _effective_tools(self, request: ChatCompletionRequest) -> list[Any]:
        tools = list(request.tools or [])
        for message in request.messages:
            if (
                isinstance(message, ChatCompletionMessageGenericParam)
                and message.role in ("root", "system", "developer")
                and message.tools
            ):
                tools.extend(message.tools)
        return tools

    # serving_chat.py 1103-1197 _validate_request: the checks a text-only GLM request can meet
    def _validate_request(self, request: ChatCompletionRequest) -> str | None:
        if not request.messages:
            return "Messages cannot be empty."
        tools = self._effective_tools(request)
        if isinstance(request.tool_choice, str) and request.tool_choice.lower() == "required" and not tools:
            return "Tools cannot be empty if tool choice is set to required."
        if request.tool_choice is not None and not isinstance(request.tool_choice, str):
            if not tools:
                return "Tools cannot be empty if tool choice is set to a specific tool."
            name = request.tool_choice.function.name
            if not any(tool.function.name == name for tool in tools):
                return f"Tool '{name}' not found in tools list."
        max_output_tokens = request.max_completion_tokens or request.max_tokens
        if max_output_tokens and max_output_tokens > self.context_len and not self.allow_auto_truncate:
            return (
                f"max_completion_tokens is too large: {max_output_tokens}."
                f"This model supports at most {self.context_len} completion tokens."
            )
        return None

    # serving_chat.py 1080-1093 _tool_call_parsing_active
    def _tool_call_parsing_active(self, request: ChatCompletionRequest) -> bool:
        if not self.tool_call_parser:
            return False
        if not self._effective_tools(request):
            return DETECTORS[self.tool_call_parser].parses_without_tools()
        return request.tool_choice != "none"

    # serving_chat.py 3429-3511 apply_reasoning_enabled, for the parsers a GLM-5.3 server can run:
    # none, or one under GLM-5.3's template, whose reasoning python_chat_template.py declares always on
    def apply_reasoning_enabled(self, request: ChatCompletionRequest, enabled: bool) -> None:
        if not self.reasoning_parser:
            if enabled:
                raise ValueError("Anthropic thinking is not supported for models without a reasoning parser")
            return
        if not enabled:
            raise ValueError(
                f"Reasoning parser '{self.reasoning_parser}' is always-on and cannot be disabled via Anthropic thinking"
            )

    # serving_chat.py 3379-3388 supports_native_reasoning_history: GLM-5.3 has no chat encoding spec
    # and glm45's detector is not a response template's, so prior thinking is rewrapped in content
    def supports_native_reasoning_history(self) -> bool:
        return False

    # serving_chat.py 3390-3409 wrap_reasoning_history
    def wrap_reasoning_history(self, reasoning_text: str) -> str:
        if self._reasoning_detector is None:
            raise ValueError("Cannot rewrap thinking history: no reasoning detector is configured for this model")
        d = self._reasoning_detector
        return f"{d.think_start_token}{d.think_start_self_label}{reasoning_text}\n{d.think_end_token}"

    def prompt(self, request: ChatCompletionRequest) -> list[str]:
        """serving_chat.py 1793 _process_messages -> 2011-2160 _apply_jinja_template, with the
        Python template SGLang installs for GLM-5.3 (python_chat_template.py GLM53): history
        tool-call arguments parsed (198-216, strict), a missing content made "", a tool's text
        parts joined (159-178), reasoning_effort and chat_template_kwargs passed to the template."""
        messages = []
        for message in (m.model_dump() for m in request.messages):
            for item in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
                function = item.get("function") if isinstance(item, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    function["arguments"] = _tool_call_arguments(function["arguments"])
            if message.get("content") is None:
                message["content"] = ""
            if message["role"] == "tool" and isinstance(message["content"], list):
                parts = message["content"]
                if all((isinstance(p, dict) and p.get("type") == "text") or isinstance(p, str) for p in parts):
                    message["content"] = " ".join(p.get("text", "") if isinstance(p, dict) else p for p in parts)
            messages.append(message)
        kwargs: dict[str, Any] = {}
        if request.reasoning_effort is not None:
            kwargs["reasoning_effort"] = request.reasoning_effort
        kwargs.update(request.chat_template_kwargs or {})
        tools = [tool.model_dump() for tool in request.tools] if request.tools else None
        return render_glm53_flash_segments(messages, tools=tools, add_generation_prompt=True, **kwargs)

    def _process_messages(self, request: ChatCompletionRequest, _is_multimodal: bool) -> Any:
        return types.SimpleNamespace(prompt_ids=[0] * self.engine.prompt(self.prompt(request)))

    def _convert_to_internal_request(self, request: ChatCompletionRequest, raw: Any) -> tuple[Any, Any]:
        adapted = types.SimpleNamespace(
            prompt_tokens=self.engine.prompt(self.prompt(request)), received_time=None,
            custom_labels=self.extract_custom_labels(raw),
        )  # fmt: skip
        return adapted, request

    # serving_base.py 239-264 extract_custom_labels (the header's JSON object, its allowed keys)
    def extract_custom_labels(self, raw_request: Any) -> dict[str, str] | None:
        if not self.allowed_custom_labels or not self.custom_labels_header:
            return None
        custom_labels = None
        header = self.custom_labels_header
        try:
            raw_labels = (
                json.loads(raw_request.headers.get(header)) if raw_request and raw_request.headers.get(header) else None
            )
        except json.JSONDecodeError:
            raw_labels = None
        if isinstance(raw_labels, dict):
            custom_labels = {label: value for label, value in raw_labels.items() if label in self.allowed_custom_labels}
        return custom_labels

    async def _generations(self, adapted: Any, request: ChatCompletionRequest) -> AsyncIterator[dict[str, Any]]:
        """tokenizer_manager.generate_request, incremental: one dict per output the scheduler sends,
        which is what output_streamer.py 444-470 accept lets through: every token
        at --stream-interval 1, else the first token at once, then whenever `stream_interval`
        tokens are unsent, and the last."""
        generation = self.engine.generate(request, adapted.prompt_tokens, adapted.custom_labels)
        # the first step: validated and admitted: the tokens it will decode, and the prefix it found cached
        pieces, finish, cached = generation.send(None)
        run = Generation(pieces, finish, adapted.prompt_tokens, cached)
        unsent, sent = "", 0
        for count, piece in enumerate(generation, start=1):
            unsent += piece
            last = count == len(pieces)
            if last or self.stream_interval == 1 or count - sent >= self.stream_interval or sent == 0:
                yield {"index": 0, "text": unsent, "meta_info": run.meta(count, last)}
                unsent, sent = "", count
        if not pieces:
            yield {"index": 0, "text": "", "meta_info": run.meta(0, True)}

    def create_error_response(self, message: str, status_code: int = 400) -> ORJSONResponse:
        """serving_base.py 205-221."""
        error = ErrorResponse(object="error", message=message, type="BadRequestError", param=None, code=status_code)
        return ORJSONResponse(content=error.model_dump(), status_code=status_code)

    def create_streaming_error_response(self, message: str, status_code: int = 400) -> str:
        """serving_base.py 223-237."""
        error = ErrorResponse(object="error", message=message, type="BadRequestError", param=None, code=status_code)
        return json.dumps({"error": error.model_dump()})

    # serving_chat.py 2807-2830 _handle_non_streaming_request
    async def _handle_non_streaming_request(self, adapted: Any, request: ChatCompletionRequest, _raw: Any) -> Any:
        try:
            text, meta = "", None
            async for content in self._generations(adapted, request):
                text += content["text"]
                meta = content["meta_info"]
        except ValueError as e:
            return self.create_error_response(str(e))
        return self._build_chat_response(request, {"text": text, "meta_info": meta}, int(time.time()))

    # serving_chat.py 2832-3051 _build_chat_response, one choice
    def _build_chat_response(self, request: ChatCompletionRequest, ret: dict[str, Any], created: int) -> Any:
        finish_reason = ret["meta_info"]["finish_reason"]
        text = ret["text"]
        reasoning_text = None
        if self.reasoning_parser and request.separate_reasoning:
            parser = ReasoningParser(
                model_type=self.reasoning_parser, stream_reasoning=False, force_reasoning=FORCE_REASONING,
                request=request, tokenizer=None, tool_call_parser_active=self._tool_call_parsing_active(request),
            )  # fmt: skip
            reasoning_text, text = parser.parse_non_stream(text)
        tool_calls = None
        if self._tool_call_parsing_active(request):
            tool_calls, text, finish_reason = self._process_tool_calls(
                text, self._effective_tools(request), finish_reason, request.tool_choice
            )
        choice = ChatCompletionResponseChoice(
            index=0,
            message=ChatMessage(
                role="assistant", content=text if text else "", tool_calls=tool_calls,
                reasoning_content=reasoning_text if reasoning_text else None,
            ),
            logprobs=None,
            finish_reason=finish_reason["type"] if finish_reason else None,
            matched_stop=finish_reason["matched"] if finish_reason and "matched" in finish_reason else None,
        )  # fmt: skip
        usage = UsageProcessor.calculate_response_usage(
            [ret], n_choices=1, enable_cache_report=self.enable_cache_report
        )
        return ChatCompletionResponse(
            id=ret["meta_info"]["id"], created=created, model=request.model, choices=[choice], usage=usage
        )

    # serving_chat.py 3150-3279 _process_tool_calls, with a detector that owns its format
    def _process_tool_calls(
        self, text: str, tools: list[Any], finish_reason: dict[str, Any], tool_choice: Any
    ) -> tuple[list[ToolCall] | None, str, dict[str, Any]]:
        parser = ToolParser(tools, self.tool_call_parser, tool_choice)
        if not parser.has_tool_call(text):
            return None, text, finish_reason
        try:
            text, calls = parser.parse_non_stream(text)
        except Exception:  # SGLang logs "Tool call parsing error" and keeps the text
            return None, text, finish_reason
        if not calls:
            return None, text, finish_reason
        tool_calls = [
            ToolCall(
                id=f"call_{uuid.uuid4().hex[:24]}",
                index=i,
                function=FunctionResponse(name=call.name, arguments=call.parameters),
            )
            for i, call in enumerate(calls)
        ]
        if finish_reason["type"] == "stop":
            finish_reason["type"] = "tool_calls"
            finish_reason["matched"] = None
        return tool_calls, text, finish_reason

    def _usage(self, content: dict[str, Any]) -> Any:
        meta = content["meta_info"]
        return UsageProcessor.calculate_token_usage(
            prompt_tokens=meta["prompt_tokens"], reasoning_tokens=meta["reasoning_tokens"],
            completion_tokens=meta["completion_tokens"], cached_tokens=self._continuous_usage_cached_details(content),
        )  # fmt: skip

    # serving_chat.py 834-841 _continuous_usage_cached_details
    def _continuous_usage_cached_details(self, content: dict[str, Any]) -> PromptTokensDetails | None:
        if not self.enable_cache_report:
            return None
        return PromptTokensDetails(cached_tokens=content["meta_info"].get("cached_tokens", 0))

    # serving_chat.py 2441-2805 _generate_chat_stream, one choice
    async def _generate_chat_stream(
        self, adapted: Any, request: ChatCompletionRequest, _raw: Any
    ) -> AsyncIterator[str]:
        created = int(time.time())
        state: dict[str, Any] = {"reasoning": None, "tools": None, "has_tool_calls": False}
        finish = None
        content: dict[str, Any] = {}
        stream_started = False
        try:
            # utils.py 250-264 should_include_usage, with stream_response_default_include_usage off
            options = request.stream_options
            include_usage = bool(options and options.include_usage)
            continuous = bool(options and options.continuous_usage_stats)
            async for content in self._generations(adapted, request):
                finish = content["meta_info"]["finish_reason"]
                if not stream_started:
                    yield build_sse_content(
                        chunk_id=content["meta_info"]["id"], created=created, model=request.model,
                        index=0, role="assistant", content="",
                    )  # fmt: skip
                    stream_started = True
                async for chunk in self._generate_stream_content(content, request, created, state, continuous):
                    yield chunk
            if finish is not None:
                final = finish["type"]
                parser = state["tools"]
                incomplete = parser is not None and _incomplete_tool_calls(parser)
                if state["has_tool_calls"] and final == "stop" and not incomplete:
                    final = "tool_calls"
                yield build_sse_content(
                    chunk_id=content["meta_info"]["id"], created=created, model=request.model, index=0,
                    finish_reason=final, matched_stop=finish.get("matched"),
                )  # fmt: skip
            if include_usage:
                usage = UsageProcessor.calculate_streaming_usage(
                    {0: content["meta_info"]["prompt_tokens"]}, {0: 0},
                    {0: content["meta_info"]["completion_tokens"]},
                    cached_tokens={0: content["meta_info"].get("cached_tokens", 0)}, n_choices=1,
                    enable_cache_report=self.enable_cache_report,
                )  # fmt: skip
                chunk = ChatCompletionStreamResponse(
                    id=content["meta_info"]["id"], created=created, choices=[], model=request.model, usage=usage
                )
                yield f"data: {chunk.model_dump_json()}\n\n"
        except ValueError as e:
            if not stream_started:
                raise
            yield f"data: {self.create_streaming_error_response(str(e))}\n\n"
        yield "data: [DONE]\n\n"

    # serving_chat.py 919-1078 _generate_stream_content, without logprobs
    async def _generate_stream_content(
        self, content: dict[str, Any], request: ChatCompletionRequest, created: int, state: dict, continuous: bool
    ) -> AsyncIterator[str]:
        finish = content["meta_info"]["finish_reason"]
        finish_type = finish["type"] if finish else None
        delta = content["text"]
        usage = self._usage(content).model_dump() if continuous else None
        ident = content["meta_info"]["id"]
        if self.reasoning_parser and request.separate_reasoning:
            reasoning_text, delta = self._process_reasoning_stream(delta, request, state, finish_type)
            if reasoning_text:
                yield build_sse_content(
                    chunk_id=ident, created=created, model=request.model, index=0,
                    reasoning_content=reasoning_text, usage=usage,
                )  # fmt: skip
        if self._tool_call_parsing_active(request):
            flush = finish_type is not None and finish_type != "abort"
            async for chunk in self._process_tool_call_stream(
                delta, content, request, state, created=created, continuous=continuous, flush=flush
            ):
                yield chunk
            if finish_type is not None and state["tools"] is not None:
                remaining = self._check_for_unstreamed_tool_args(state["tools"], content, request, created)
                if remaining:
                    yield remaining
        elif delta:
            yield build_sse_content(
                chunk_id=ident, created=created, model=request.model, index=0, content=delta, usage=usage
            )

    # serving_chat.py 3302-3333 _process_reasoning_stream
    def _process_reasoning_stream(
        self, delta: str, request: ChatCompletionRequest, state: dict, finish_type: str | None
    ) -> tuple[str | None, str]:
        if state["reasoning"] is None:
            state["reasoning"] = ReasoningParser(
                self.reasoning_parser, request.stream_reasoning, FORCE_REASONING, request,
                tokenizer=None, tool_call_parser_active=self._tool_call_parsing_active(request),
            )  # fmt: skip
        parser = state["reasoning"]
        reasoning_text, normal_text = parser.parse_stream_chunk(delta)
        if finish_type is not None and finish_type != "abort":
            end_reasoning, end_normal = parser.parse_stream_end()
            if end_reasoning:
                reasoning_text = (reasoning_text or "") + end_reasoning
            if end_normal:
                normal_text = (normal_text or "") + end_normal
        return reasoning_text, normal_text

    # serving_chat.py 3604-3756 _process_tool_call_stream, with a detector that owns its format
    async def _process_tool_call_stream(
        self, delta: str, content: dict, request: ChatCompletionRequest, state: dict, *, created: int,
        continuous: bool, flush: bool,
    ) -> AsyncIterator[str]:  # fmt: skip
        if state["tools"] is None:
            state["tools"] = ToolParser(self._effective_tools(request), self.tool_call_parser, request.tool_choice)
        parser = state["tools"]
        normal_text, calls = parser.parse_stream_chunk(delta)
        if flush:
            end_text, end_calls = parser.parse_stream_end()
            normal_text = (normal_text or "") + end_text
            calls = list(calls) + end_calls
        usage = self._usage(content) if continuous else None
        if normal_text:
            choice = ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(content=normal_text))
            yield self._chunk(content, request, created, choice, usage)
        for call in calls:
            state["has_tool_calls"] = True
            tool_call = ToolCall(
                id=f"call_{uuid.uuid4().hex[:24]}" if call.name else None, index=call.tool_index,
                function=FunctionResponse(name=call.name or None, arguments=call.parameters),
            )  # fmt: skip
            choice = ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(tool_calls=[tool_call]))
            yield self._chunk(content, request, created, choice, usage)

    @staticmethod
    def _chunk(content: dict, request: ChatCompletionRequest, created: int, choice: Any, usage: Any) -> str:
        chunk = ChatCompletionStreamResponse(
            id=content["meta_info"]["id"], created=created, choices=[choice], model=request.model
        )
        if usage is not None:
            chunk.usage = usage
        return f"data: {chunk.model_dump_json()}\n\n"

    # serving_chat.py 3758-3833 _check_for_unstreamed_tool_args
    def _check_for_unstreamed_tool_args(
        self, parser: ToolParser, content: dict, request: ChatCompletionRequest, created: int
    ) -> str | None:
        detector = parser.detector
        if not getattr(detector, "prev_tool_call_arr", None) or not getattr(detector, "streamed_args_for_tool", None):
            return None
        index = len(detector.prev_tool_call_arr) - 1
        if index < 0 or index >= len(detector.streamed_args_for_tool):
            return None
        expected = detector.prev_tool_call_arr[index].get("arguments", {})
        expected = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
        actual = detector.streamed_args_for_tool[index]
        remaining = expected[len(actual) :] if expected.startswith(actual) else ""
        if not remaining:
            return None
        call = ToolCall(id=None, index=index, function=FunctionResponse(name=None, arguments=remaining))
        choice = ChatCompletionResponseStreamChoice(index=0, delta=DeltaMessage(tool_calls=[call]))
        return self._chunk(content, request, created, choice, None)


def _tool_call_arguments(arguments: str) -> dict[str, Any]:
    """serving_chat.py 181-195 parse_tool_call_arguments."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ValueError("Assistant tool call function.arguments must be valid JSON.") from exc
    if not isinstance(parsed, dict):
        raise ValueError("Assistant tool call function.arguments must be a JSON object.")
    return parsed


def _incomplete_tool_calls(parser: ToolParser) -> bool:
    """serving_chat.py 154-157 _incomplete_tool_call_indices: a call the text cut off."""
    indices = getattr(parser.detector, "incomplete_tool_call_indices", None)
    return bool(indices() if callable(indices) else indices)


class ChatPath:
    """/v1/messages, /v1/messages/count_tokens and /v1/chat/completions through SGLang's code.
    Each handler returns (status, content type, body chunks); the caller writes them."""

    def __init__(self, args: Any, engine: Any, context_len: int) -> None:
        self.chat = ServingChat(args, engine, context_len)
        self.anthropic = AnthropicServing(self.chat)

    @staticmethod
    def _drive(response: Any) -> tuple[int, str, Iterator[bytes]]:
        """A FastAPI response as status, media type and bytes, on this thread's own event loop."""
        if hasattr(response, "body_iterator"):
            return response.status_code, response.media_type, _sync(response.body_iterator)
        return response.status_code, "application/json", iter([bytes(response.body)])

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run(coroutine)

    def messages(self, body: dict[str, Any], raw: Any = None) -> tuple[int, str, Iterator[bytes]]:
        try:
            request = AnthropicMessagesRequest.model_validate(body)
        except ValidationError as e:
            return _validation_error(e, anthropic=True)
        return self._drive(self._run(self.anthropic.handle_messages(request, raw)))

    def count_tokens(self, body: dict[str, Any], _raw: Any = None) -> tuple[int, str, Iterator[bytes]]:
        try:
            request = AnthropicCountTokensRequest.model_validate(body)
        except ValidationError as e:
            return _validation_error(e, anthropic=True)
        return self._drive(self._run(self.anthropic.handle_count_tokens(request, None)))

    def chat_completions(self, body: dict[str, Any], raw: Any = None) -> tuple[int, str, Iterator[bytes]]:
        """serving_chat.py / serving_base.py handle_request: validate, convert, then a JSON body or
        an SSE stream; a ValueError before the first chunk is a 400 (serving_base 120-137)."""
        try:
            request = ChatCompletionRequest.model_validate(body)
        except ValidationError as e:
            return _validation_error(e, anthropic=False)
        error = self.chat._validate_request(request)
        if error:
            return _json(self.chat.create_error_response(error))
        adapted, request = self.chat._convert_to_internal_request(request, raw)
        if not request.stream:
            response = self._run(self.chat._handle_non_streaming_request(adapted, request, None))
            if isinstance(response, ChatCompletionResponse):
                return 200, "application/json", iter([response.model_dump_json().encode()])
            return _json(response)
        stream = self.chat._generate_chat_stream(adapted, request, None)
        loop = asyncio.new_event_loop()
        try:
            first = loop.run_until_complete(stream.__anext__())
        except ValueError as e:
            loop.close()
            return _json(self.chat.create_error_response(str(e)))
        return 200, "text/event-stream", _rest(loop, first, stream)


def _json(response: Any) -> tuple[int, str, Iterator[bytes]]:
    return response.status_code, "application/json", iter([bytes(response.body)])


def _validation_error(error: ValidationError, anthropic: bool) -> tuple[int, str, Iterator[bytes]]:
    """http_server.py 636-690 validation_exception_handler: HTTP 400; for /v1/messages Anthropic's
    envelope with 542-564 _anthropic_validation_message's digest, else ErrorResponse."""
    if anthropic:
        parts = []
        for err in error.errors():
            loc = ".".join(str(p) for p in err.get("loc") or () if p != "body")
            msg = (err.get("msg") or "").strip()
            parts.append(f"{loc}: {msg}" if loc and msg else msg)
        text = "; ".join(p for p in parts if p) or "Invalid request"
        text = text[:500] + "\u2026" if len(text) > 500 else text
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    else:
        message = f"{error} {error.errors()}"
        body = ErrorResponse(message=message, type=HTTPStatus.BAD_REQUEST.phrase, code=400).model_dump()
    return int(HTTPStatus.BAD_REQUEST), "application/json", iter([json.dumps(body).encode()])


def _sync(iterator: AsyncIterator[Any]) -> Iterator[bytes]:
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = loop.run_until_complete(iterator.__anext__())
            except StopAsyncIteration:
                return
            yield item.encode() if isinstance(item, str) else bytes(item)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(iterator.aclose())
        loop.close()


def _rest(loop: asyncio.AbstractEventLoop, first: str, stream: AsyncIterator[str]) -> Iterator[bytes]:
    try:
        yield first.encode()
        while True:
            try:
                yield loop.run_until_complete(stream.__anext__()).encode()
            except StopAsyncIteration:
                return
    finally:
        loop.close()
