"""Ask and follow-up requests: body and headers (docs/protocol.md §2, §4)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime

API_VERSION = "2.18"
MODES = ("auto", "pro", "research")  # what a person picks; see `perplexity_mode`
SOURCES = ("web", "scholar", "social", "finance")
RECENCY = ("", "hour", "day", "week", "month", "year")
MAX_DOMAINS = 20
RESEARCH_MODEL = "pplx_alpha"
SUPPORTED_BLOCKS = [
    "answer_modes",
    "media_items",
    "knowledge_cards",
    "inline_entity_cards",
    "place_widgets",
    "finance_widgets",
    "sports_widgets",
    "shopping_widgets",
    "jobs_widgets",
    "search_result_widgets",
    "inline_images",
    "inline_assets",
    "placeholder_cards",
    "diff_blocks",
    "inline_knowledge_cards",
    "entity_group_v2",
    "refinement_filters",
    "canvas_mode",
    "answer_tabs",
    "preserve_latex",
    "in_context_suggestions",
    "pending_followups",
    "inline_claims",
    "unified_assets",
    "workflow_steps",
    "prediction_market_widgets",  # the newest clients' list (docs/protocol.md §4.1)
    "flight_status_widgets",
]
CHROME_UA = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/136.0.0.0 Safari/537.36"
)


@dataclass(frozen=True)
class AskOptions:
    """Everything a person can choose for one question."""

    model: str = "pplx_pro"
    mode: str = "pro"
    sources: tuple[str, ...] = ("web",)  # empty: no web search ("writing" focus)
    recency: str = ""
    after: date | None = None
    before: date | None = None
    include_domains: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    language: str = "en-US"
    incognito: bool = True
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if any(s not in SOURCES for s in self.sources):
            raise ValueError(f"sources must be among {', '.join(SOURCES)}")
        if self.recency not in RECENCY:
            raise ValueError(f"recency must be one of {', '.join(r for r in RECENCY if r)}")
        if len(self.include_domains) + len(self.exclude_domains) > MAX_DOMAINS:
            raise ValueError(f"at most {MAX_DOMAINS} domains")
        if self.after and self.before and self.after > self.before:
            raise ValueError("the 'after' date is later than the 'before' date")

    @property
    def research(self) -> bool:
        return self.mode == "research" or self.model == RESEARCH_MODEL


@dataclass(frozen=True)
class FollowUp:
    """What a thread needs to continue: the last entry's backend_uuid and the thread's token;
    and what pplxweb knows of that thread, to tell when it is gone (docs/protocol.md §12.4): its
    context_uuid, and when it expires (an incognito thread's expiry_time, §4.5)."""

    last_backend_uuid: str
    read_write_token: str = ""
    context_uuid: str = ""
    expires: datetime | None = None


@dataclass(frozen=True)
class AskRequest:
    query: str
    options: AskOptions = field(default_factory=AskOptions)
    follow_up: FollowUp | None = None
    frontend_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    attachments: tuple[str, ...] = ()  # the uploaded files' URLs (uploads.py, docs/protocol.md §10.4)


def _us_date(value: date) -> str:
    return f"{value.month}/{value.day}/{value.year}"


def ask_body(request: AskRequest) -> dict:
    """The JSON body of POST /rest/sse/perplexity_ask."""
    options = request.options
    model = RESEARCH_MODEL if options.mode == "research" else options.model
    params: dict = {
        "attachments": list(request.attachments),
        "language": options.language,
        "timezone": options.timezone,
        "search_focus": "internet" if options.sources else "writing",
        "sources": list(options.sources),
        "frontend_uuid": request.frontend_uuid,
        "mode": "concise" if options.mode == "auto" else "copilot",
        "model_preference": model,
        "is_incognito": options.incognito,
        "source": "default",
        "use_schematized_api": True,
        "send_back_text_in_streaming_api": False,
        "supported_block_use_cases": list(SUPPORTED_BLOCKS),
        "prompt_source": "user",
        "is_related_query": False,
        "is_sponsored": False,
        "skip_search_enabled": False,
        "always_search_override": bool(options.sources),
        "override_no_search": False,
        # we cannot render tool-approval dialogs, so never let the stream wait for one
        "should_ask_for_mcp_tool_confirmation": False,
        "supports_tool_approval_modal": False,
        "mentions": [],
        "version": API_VERSION,
    }
    if request.follow_up:
        params["query_source"] = "followup"
        params["followup_source"] = "link"
        params["last_backend_uuid"] = request.follow_up.last_backend_uuid
        if request.follow_up.read_write_token:
            params["read_write_token"] = request.follow_up.read_write_token
    else:
        params["query_source"] = "home"
        params["frontend_context_uuid"] = str(uuid.uuid4())
        params["dsl_query"] = request.query
        if not options.research:
            params["client_search_results_cache_key"] = request.frontend_uuid
    _filters(params, options)
    return {"query_str": request.query, "params": params}


def _filters(params: dict, options: AskOptions) -> None:
    if options.after or options.before:
        params["search_recency_filter"] = None  # recency and absolute dates do not combine
        if options.after:
            params["search_after_date_filter"] = _us_date(options.after)
        if options.before:
            params["search_before_date_filter"] = _us_date(options.before)
    else:
        params["search_recency_filter"] = options.recency or None
    domains = [*options.include_domains, *(f"-{d}" for d in options.exclude_domains)]
    if domains:
        params["search_domain_filter"] = domains
    primary = options.language.split("-")[0].lower()
    if primary:
        params["search_language_filter"] = [primary]


def rest_headers(base_url: str, path: str, reason: str, account_id: str = "") -> dict[str, str]:
    """The web app's headers on a `/rest/` call (docs/protocol.md §2.3, where peers saw empty
    results when one was missing): why it is made, its try number, its absolute URL, the account
    (`user.id` of /api/auth/session, when known) and the sec-fetch set."""
    headers = {
        "x-perplexity-request-reason": reason,
        "x-perplexity-request-try-number": "1",
        "x-perplexity-request-endpoint": base_url + path.split("?", 1)[0],
        "sec-fetch-dest": "empty",
        "sec-fetch-mode": "cors",
        "sec-fetch-site": "same-origin",
    }
    if account_id:
        headers["x-pplx-account"] = account_id
    return headers


def ask_headers(request: AskRequest, base_url: str, account_id: str = "") -> dict[str, str]:
    """Web-identity headers (docs/protocol.md §2.3). The session travels in the cookie jar, never as
    a bearer."""
    return {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Origin": base_url,
        "Referer": f"{base_url}/",
        "X-Request-ID": request.frontend_uuid,
        "X-App-ApiClient": "default",
        "X-App-ApiVersion": API_VERSION,
        **rest_headers(base_url, "/rest/sse/perplexity_ask", "ask-query-state-provider", account_id),
    }


# The Agent API's preset per mode (docs/protocol.md §13.2): quick is its `fast`; Pro search
# `low`, what Sonar Pro became (hex/llm-perplexity pull 27, vercel/ai issue 18988); deep research
# `high`, what Sonar Deep Research became.
PRESETS = {"auto": "fast", "pro": "low", "research": "high"}


def agent_body(request: AskRequest) -> dict:
    """Body of the Agent API's streamed response (POST /v1/agent, docs/protocol.md §13.2). Web
    search is a tool the model may skip: it is forced, so answers stay grounded; no sources ticked
    (the "writing" focus) offers no search at all."""
    options = request.options
    body: dict = {
        "preset": PRESETS["research" if options.research else options.mode],
        "input": request.query,
        "stream": True,
    }
    primary = options.language.split("-")[0].lower()
    if primary:
        body["language_preference"] = primary
    if not options.sources:
        return body
    filters: dict = {}
    if options.after:
        filters["search_after_date_filter"] = _us_date(options.after)
    if options.before:
        filters["search_before_date_filter"] = _us_date(options.before)
    if options.recency and not (options.after or options.before):
        filters["search_recency_filter"] = options.recency
    domains = [*options.include_domains, *(f"-{d}" for d in options.exclude_domains)]
    if domains:
        filters["search_domain_filter"] = domains
    if primary:
        filters["search_language_filter"] = [primary]
    body["tools"] = [{"type": "web_search", "filters": filters} if filters else {"type": "web_search"}]
    body["tool_choice"] = "required"
    return body
