"""A chat completion request read and checked: the question, the model, the earlier messages.

Every refusal is an ApiError with a sentence; nothing here touches the database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from search.api.errors import ApiError, invalid

MAX_BODY = 2 * 1024 * 1024
MAX_MESSAGES = 2000
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TOOLS_IGNORED = (
    "pplxweb answers with Perplexity's own search and does not call a client's tools or functions; "
    "this answer was made without them."
)


@dataclass(frozen=True)
class ChatRequest:
    question: str
    model: str | None
    stream: bool
    earlier: list[tuple[str, str]]  # (role, text) before the question
    conversation_id: str | None
    notice: str = ""


def body_of_size(request: HttpRequest) -> bytes:
    """The request's body, at most MAX_BODY bytes (else ApiError 413)."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raw = None
    if raw is None or len(raw) > MAX_BODY:
        raise ApiError(413, "That request is too large (at most 2 MB).", code="request_too_large")
    return raw


def body_of(request: HttpRequest) -> dict:
    raw = body_of_size(request)
    try:
        data = json.loads(raw)
    except ValueError:
        raise invalid(
            "The request body must be JSON: OpenAI's chat completions shape.", "invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise invalid(
            "The request body must be a JSON object: OpenAI's chat completions shape.", "invalid_json"
        )
    return data


def chat_request(data: dict) -> ChatRequest:
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages must be a list ending with the question (role user).", "invalid_messages")
    if len(messages) > MAX_MESSAGES:
        raise invalid(
            f"At most {MAX_MESSAGES} messages; this request has {len(messages)}.", "too_many_messages"
        )
    turns = [_message(m, i) for i, m in enumerate(messages)]
    role, question = turns[-1]
    if role != "user":
        raise invalid("The last message must be the question (role user).", "invalid_messages")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid("model must be a model id from GET /v1/models.", "invalid_model")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("stream must be true or false.", "invalid_stream")
    n = data.get("n", 1)
    if n not in (1, None):
        raise invalid("pplxweb gives one answer per request (n must be 1).", "invalid_n")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise invalid('metadata must be an object, e.g. {"conversation_id": "12"}.', "invalid_metadata")
    conversation = metadata.get("conversation_id")
    conversation = str(conversation) if isinstance(conversation, str | int) and conversation != "" else None
    return ChatRequest(question, model or None, stream, turns[:-1], conversation, _tools_notice(data))


def _message(message, index: int) -> tuple[str, str]:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise invalid(
            f"Message {index + 1} needs a role ({', '.join(ROLES[:4])}) and its content.", "invalid_messages"
        )
    content = message.get("content")
    if content is None:
        return message["role"], ""
    if isinstance(content, str):
        return message["role"], content
    if not isinstance(content, list):
        raise invalid(f"Message {index + 1}'s content must be text.", "invalid_messages")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            raise invalid(
                f"Message {index + 1} holds a part pplxweb does not take here ({str(kind)[:40]}): the API "
                "takes text only. Attach images and files on the pplxweb page.",
                "unsupported_content",
            )
    return message["role"], "\n".join(texts)


def _tools_notice(data: dict) -> str:
    """Tools the client offers are not called (a sentence says so); a client that insists on a
    call (tool_choice "required" or a named function) is refused."""
    tools = data.get("tools") or data.get("functions")
    if not tools:
        return ""
    choice = data.get("tool_choice", data.get("function_call"))
    if choice == "required" or isinstance(choice, dict):
        raise invalid(
            "pplxweb cannot call your tools or functions (it answers with Perplexity's search), so it "
            "cannot honour tool_choice; send the request without it.",
            "tools_unsupported",
        )
    return TOOLS_IGNORED
