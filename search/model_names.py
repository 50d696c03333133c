"""A model's name as people read it: the catalogue's title for its id, else one made from the id
("gemini38flash" -> "Gemini 3.8 Flash", "gpt52" -> "GPT-5.2"). Ids are Perplexity's own (docs/protocol.md
§4.2); a new one shows up in answers before any catalogue pplxweb holds has a title for it.

No Django and no project imports: pages, the live path and the history all use it."""

from __future__ import annotations

import re

# ids whose name cannot be read from the id (the catalogue's names, where it has them)
KNOWN = {
    "turbo": "Best",  # the anonymous, free default (docs/protocol.md §4.2)
    "auto": "Best",
    "default": "Best",
    "pplx_pro": "Best",
    "pplx_pro_upgraded": "Pro",
    "experimental": "Sonar",
    "pplx_alpha": "Deep research",
    "pplx_beta": "Create files and apps",
    "pplx_reasoning": "Reasoning",
    "pplx_study": "Study",
    "pplx_agentic_research": "Agentic research",
    "pplx_asi": "Computer",
    "chatgpt_tools": "ChatGPT Tools",
    "claudecode": "Claude Code",
}
# the words ids glue together ("opusthinking"), longest first, and how each is written
VOCABULARY = {
    "chatgpt": "ChatGPT", "gpt": "GPT", "glm": "GLM", "claude": "Claude", "gemini": "Gemini", "grok": "Grok",
    "kimi": "Kimi", "llama": "Llama", "qwen": "Qwen", "deepseek": "DeepSeek", "mistral": "Mistral",
    "nemotron": "Nemotron", "sonar": "Sonar", "opus": "Opus", "sonnet": "Sonnet", "haiku": "Haiku",
    "flash": "Flash", "pro": "Pro", "mini": "Mini", "nano": "Nano", "lite": "Lite", "instant": "Instant",
    "fast": "Fast", "thinking": "Thinking", "reasoning": "Reasoning", "non": "non", "sol": "Sol",
    "terra": "Terra", "super": "Super", "ultra": "Ultra", "banana": "Banana", "code": "Code",
    "codex": "Codex", "beta": "Beta", "preview": "Preview", "plus": "Plus", "turbo": "Turbo",
    "low": "Low", "medium": "Medium", "high": "High", "nv": "", "pplx": "", "asi": "", "comet": "Comet",
    "browser": "Browser", "agent": "Agent",
}  # fmt: skip
WORDS = sorted(VOCABULARY, key=len, reverse=True)
EFFORT = {"low": [], "medium": ["Medium", "Thinking"], "high": ["Thinking"]}  # as the catalogue names them
HYPHENATED = ("GPT", "GLM")  # "GPT-5.2", not "GPT 5.2"
FAMILIES = ("Opus", "Sonnet", "Haiku")  # Claude's ids put the version first, its names after the family
MAX_ID = 80


def version(digits: str) -> str:
    """ "52" -> "5.2", "30" -> "3", "5" -> "5"; longer numbers (a size, a date) stay as they are."""
    if len(digits) == 2:
        return digits[0] if digits[1] == "0" else f"{digits[0]}.{digits[1]}"
    return digits


def _segment(letters: str) -> list[str]:
    """Letters split into known words from the left ("opusthinking" -> opus, thinking; what follows
    no known word stays one word)."""
    for word in WORDS:
        if letters.startswith(word):
            return [word, *_segment(letters[len(word) :])]
    return [letters] if letters else []


def _tokens(slug: str) -> list[str]:
    """The id's words and numbers: "glm_5_2" -> glm, 5.2; "claude48opusthinking" -> claude, 4.8, opus,
    thinking (single digits a `_` apart are one version)."""
    tokens: list[str] = []
    for part in re.split(r"[_\-\s.]+", slug):
        for run in re.findall(r"[a-z]\d+|\d+[a-z](?![a-z])|[a-z]+|\d+", part):
            if re.fullmatch(r"[a-z]\d+|\d+[a-z]", run):  # "r1", "v2", "405b", "4o": one word
                tokens.append(run)
            elif run.isdigit():
                if len(run) == 1 and tokens and re.fullmatch(r"\d", tokens[-1]) and part == run:
                    tokens[-1] += "." + run  # glm_5_2
                else:
                    tokens.append(run if len(run) == 1 else version(run))
            else:
                tokens += _segment(run)
    return tokens


def derived_name(slug: str) -> str:
    """A readable name made from a model id alone; "" for no id."""
    slug = (slug or "").strip().lower()[:MAX_ID]
    if not slug:
        return ""
    if slug in KNOWN:
        return KNOWN[slug]
    if re.fullmatch(r"o\d(mini|pro)?", slug):  # OpenAI's o-series: "o4mini" -> "o4-mini"
        return f"{slug[:2]}-{slug[2:]}" if len(slug) > 2 else slug
    words: list[str] = []
    tokens = _tokens(slug)
    for i, token in enumerate(tokens):
        if token in EFFORT and i == len(tokens) - 1:  # "gemini35flash_high"; "gpt51_low_thinking" is "Low"
            words += EFFORT[token]
        elif re.fullmatch(r"\d+o", token) and words and words[-1] == "GPT":
            words[-1] += f"-{token}"  # gpt4o
        elif re.fullmatch(r"[a-z]\d+|\d+[a-z]", token):
            words.append(token.upper())
        elif token in ("thinking", "reasoning", "non") and "non" in tokens[i - 1 : i + 1]:
            continue  # "grok4nonthinking": the model without thinking
        elif token in VOCABULARY:
            if VOCABULARY[token]:
                words.append(VOCABULARY[token])
        elif token[0].isdigit() and words and words[-1] in HYPHENATED:
            words[-1] += f"-{token}"
        else:
            words.append(token if token[0].isdigit() else token.capitalize())
    words = _kimi(words)
    if words and words[0] in FAMILIES:  # "pplx_asi_opus": Claude's
        words.insert(0, "Claude")
    # "Claude 4.8 Opus" -> "Claude Opus 4.8", as the catalogue writes Claude's names
    for i in range(len(words) - 2):
        if words[i] == "Claude" and words[i + 1][0].isdigit() and words[i + 2] in FAMILIES:
            words[i + 1], words[i + 2] = words[i + 2], words[i + 1]
    return " ".join(words) or slug


def _kimi(words: list[str]) -> list[str]:
    """ "Kimi K 2.6" -> "Kimi K2.6"."""
    out: list[str] = []
    for word in words:
        if out and out[-1] == "K" and word[0].isdigit():
            out[-1] = f"K{word}"
        else:
            out.append(word)
    return out


def model_name(slug: str, models: dict | None = None) -> str:
    """The catalogue's name for a model id (`models`: the catalogue's `models` table), else the
    name made from the id; "" for no id."""
    if not slug:
        return ""
    info = (models or {}).get(slug)
    label = info.get("label") if isinstance(info, dict) else None
    if isinstance(label, str) and label.strip():
        return " ".join(label.split())[:MAX_ID]
    return derived_name(slug)
