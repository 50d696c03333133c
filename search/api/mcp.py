"""The MCP server at /mcp: the official SDK's MCPServer with four tools, as the person whose
agent token the request carries.

ask and research start answers exactly as /v1/ does (search.api.answers); search_history and
read_conversation read the person's own history only. A refusal is a tool error with a sentence.
The server speaks Streamable HTTP, stateless (no session to keep between requests, so any server
process can answer any request), through search.api.mcp_http.
"""

from __future__ import annotations

import html
from typing import Annotated, Literal

from channels.db import database_sync_to_async
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from accounts.models import AgentToken
from accounts.services import agent_tokens
from search.api import answers, auth, conversations
from search.api.errors import WRONG_TOKEN, ApiError
from search.history import query as history
from search.models import Thread

TICK = 2.0  # seconds between progress notifications (and checks that the token still stands)
FOUND = 20  # search_history's matches
INSTRUCTIONS = (
    "pplxweb answers questions with its household's Perplexity subscription and keeps every "
    "answer in the person's pplxweb history. ask: a question (quick, pro or research mode); "
    "research: a Deep Research report (minutes); search_history and read_conversation: the "
    "person's earlier answers."
)


class Source(BaseModel):
    n: int
    title: str
    url: str


class Answer(BaseModel):
    answer: str = Field(description="Markdown; citations are footnotes [^n], the sources listed under it")
    sources: list[Source]
    conversation_id: str = Field(description="pass it to ask to follow up in the same conversation")
    status: str = Field(description="completed, or how the answer ended (truncated, failed, ...)")


class Match(BaseModel):
    question: str
    conversation_id: str
    snippet: str


class Matches(BaseModel):
    matches: list[Match]


class Turn(BaseModel):
    question: str
    answer: str
    status: str
    asked: str
    sources: list[Source]


class Conversation(BaseModel):
    conversation_id: str
    title: str
    turns: list[Turn]


server = MCPServer("pplxweb", instructions=INSTRUCTIONS, version="1")


async def _token(ctx: Context) -> AgentToken:
    """The token this call came with (checked again: a revoked one stops here)."""
    headers = ctx.headers or {}
    value = auth.bearer_value(headers.get("authorization", ""))
    token = await database_sync_to_async(agent_tokens.authenticate)(value) if value else None
    if token is None:
        raise ToolError(WRONG_TOKEN)
    return token


def _sources(sources: list) -> list[Source]:
    return [
        Source(n=n, title=str(s.get("title") or s.get("url") or ""), url=str(s.get("url") or ""))
        for n, s in enumerate(sources, start=1)
        if isinstance(s, dict)
    ]


async def _answered(ctx: Context, token: AgentToken, question: str, model, mode, thread_id) -> CallToolResult:
    try:
        asked = await answers.ask(token, question, model, mode, thread_id)
    except ApiError as exc:
        raise ToolError(exc.message) from None
    step = 0
    async for seen in answers.progress(asked, TICK):
        if not await database_sync_to_async(agent_tokens.still_valid)(token.pk):
            raise ToolError("This agent token was revoked; the answer goes on in the person's history.")
        if not seen.ended:
            step += 1
            latest = seen.steps[-1] if seen.steps else "Perplexity is working on it…"
            await ctx.report_progress(step, None, latest[:300])
    final = await answers.final(asked)
    if not final.content.strip() and final.status != "completed":
        raise ToolError(final.error or "Perplexity gave no answer.")
    result = Answer(
        answer=final.content, sources=_sources(final.sources), conversation_id=str(final.thread_id),
        status=final.status,
    )  # fmt: skip
    text = (
        final.content
        if final.status == "completed"
        else f"{final.content}\n\n({final.status}: {final.error})"
    )
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )


@server.tool()
async def ask(
    question: Annotated[str, Field(description="the question, as a person would type it")],
    ctx: Context,
    mode: Annotated[
        Literal["quick", "pro", "research"] | None, Field(description="default: the person's own")
    ] = None,
    model: Annotated[str | None, Field(description="a model id of GET /v1/models; default: best")] = None,
    conversation_id: Annotated[str | None, Field(description="follow up in this conversation")] = None,
) -> Annotated[CallToolResult, Answer]:
    """Ask Perplexity (with the household's subscription) and get the answer with its numbered
    sources. The answer is kept in the person's pplxweb history."""
    token = await _token(ctx)
    thread_id = None
    if conversation_id:
        thread_id = await database_sync_to_async(conversations.named)(token.user, conversation_id)
    return await _answered(ctx, token, question, model, mode, thread_id)


@server.tool()
async def research(
    question: Annotated[str, Field(description="what to research")], ctx: Context
) -> Annotated[CallToolResult, Answer]:
    """A Deep Research report on the question (it takes minutes; progress is reported as it
    goes). The report is kept in the person's pplxweb history."""
    token = await _token(ctx)
    return await _answered(ctx, token, question, answers.RESEARCH, None, None)


@server.tool()
async def search_history(query: Annotated[str, Field(description="words to find")], ctx: Context) -> Matches:
    """Find the person's earlier questions and answers in their pplxweb history."""
    token = await _token(ctx)

    def found() -> list[Match]:
        try:
            results = history.search(token.user, history.Filters(text=query), 0, FOUND)
        except history.QueryTooLong as exc:
            raise ToolError(exc.message) from None
        return [
            Match(
                question=hit.entry.question,
                conversation_id=str(hit.entry.thread_id),
                snippet=_plain(hit.excerpt),
            )
            for hit in results
        ]

    return Matches(matches=await database_sync_to_async(found)())


@server.tool()
async def read_conversation(
    conversation_id: Annotated[str, Field(description="as ask and search_history give it")], ctx: Context
) -> Conversation:
    """One of the person's conversations: every question with its answer and sources."""
    token = await _token(ctx)

    def read() -> Conversation:
        thread_id = conversations.named(token.user, conversation_id)
        if thread_id is None:
            raise ToolError(f"There is no conversation {str(conversation_id)[:30]!r} in your history.")
        thread = Thread.objects.get(pk=thread_id)
        turns = [
            Turn(
                question=e.question,
                answer=conversations.reply_text(e),
                status=e.status,
                asked=e.created.isoformat(),
                sources=_sources(e.sources),
            )
            for e in conversations.shown(thread.pk)
        ]
        return Conversation(conversation_id=str(thread.pk), title=thread.title, turns=turns)

    return await database_sync_to_async(read)()


def _plain(snippet) -> str:
    """A history search's highlighted excerpt as text."""
    return html.unescape(str(snippet).replace("<mark>", "").replace("</mark>", ""))
