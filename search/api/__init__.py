"""The household's agents: an OpenAI-compatible API under /v1/ and an MCP server at /mcp.

Each request carries a person's agent token (accounts.services.agent_tokens) and acts as that
person. Answers run through the live path exactly as the page's do (search.live.starts ->
runner.launch): saved, in the person's history, live on their open pages, continued from the page.
Here: auth (the token, the browser origin, failed tries per address), answers (asking and
following an answer), conversations (which conversation a request continues), views (/v1/) and
mcp (/mcp).
"""
