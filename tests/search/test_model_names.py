"""Model names: the catalogue's title for an id, else a name made from the id (search/model_names.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.model_names import derived_name, model_name

FIXTURES = Path(__file__).resolve().parents[1] / "perplexity" / "fixtures"  # copies of ../shared/fixtures
FALLBACK = Path(__file__).resolve().parents[2] / "accounts" / "data" / "models_fallback.json"


@pytest.mark.parametrize(
    ("slug", "name"),
    [
        ("gemini38flash", "Gemini 3.8 Flash"),
        ("gemini30pro", "Gemini 3 Pro"),
        ("gemini35flash_high", "Gemini 3.5 Flash Thinking"),
        ("gemini35flash_medium", "Gemini 3.5 Flash Medium Thinking"),
        ("gemini31pro_low", "Gemini 3.1 Pro"),
        ("gemini37flashthinking", "Gemini 3.7 Flash Thinking"),
        ("claude48opusthinking", "Claude Opus 4.8 Thinking"),  # the catalogue's order: family, then version
        ("claude50sonnet", "Claude Sonnet 5"),
        ("claude45haikuthinking", "Claude Haiku 4.5 Thinking"),
        ("claude2", "Claude 2"),
        ("gpt52", "GPT-5.2"),
        ("gpt5", "GPT-5"),
        ("gpt4o", "GPT-4o"),
        ("gpt41", "GPT-4.1"),
        ("gpt5_mini", "GPT-5 Mini"),
        ("gpt51_low_thinking", "GPT-5.1 Low Thinking"),
        ("gpt56_sol_thinking", "GPT-5.6 Sol Thinking"),
        ("gpt53codex", "GPT-5.3 Codex"),
        ("GPT52", "GPT-5.2"),
        ("glm_5_2", "GLM-5.2"),
        ("o4mini", "o4-mini"),
        ("o3pro", "o3-pro"),
        ("o3", "o3"),
        ("grok4", "Grok 4"),
        ("grok4nonthinking", "Grok 4"),
        ("grok45low", "Grok 4.5"),
        ("kimik26thinking", "Kimi K2.6 Thinking"),
        ("kimik3thinking", "Kimi K3 Thinking"),
        ("nv_nemotron_3_super", "Nemotron 3 Super"),
        ("nanobanana2", "Nano Banana 2"),
        ("nanobananapro", "Nano Banana Pro"),
        ("veo31fast", "Veo 3.1 Fast"),
        ("pplx_asi_opus", "Claude Opus"),
        ("llama3_1_405b", "Llama 3.1 405B"),
        ("deepseek_r1", "DeepSeek R1"),
        ("turbo", "Best"),  # the anonymous, free default
        ("pplx_pro", "Best"),
        ("pplx_pro_upgraded", "Pro"),
        ("pplx_alpha", "Deep research"),
        ("pplx_reasoning", "Reasoning"),
        ("experimental", "Sonar"),
        ("chatgpt_tools", "ChatGPT Tools"),
        ("somethingnew", "Somethingnew"),
        ("weird-id.v2", "Weird Id V2"),
        ("123", "123"),
        ("____", "____"),
        ("", ""),
    ],
)
def test_a_name_is_made_from_an_id(slug, name):
    assert derived_name(slug) == name


def test_a_hostile_id_gives_a_short_name_and_no_error():
    assert len(derived_name("x" * 100_000)) <= 80
    assert derived_name("<script>alert(1)</script>") == "Script Alert 1 Script"  # the page escapes it anyway
    assert derived_name("  gpt52  ") == "GPT-5.2"


def test_the_catalogues_title_wins_and_a_missing_or_odd_one_falls_back():
    models = {"gpt52": {"label": "GPT-5.2 (new)"}, "odd": {"label": 7}, "blank": {"label": "  "}, "bad": "x"}
    assert model_name("gpt52", models) == "GPT-5.2 (new)"
    assert model_name("gemini38flash", models) == "Gemini 3.8 Flash"
    assert model_name("odd", models) == "Odd"
    assert model_name("blank", models) == "Blank"
    assert model_name("bad", models) == "Bad"
    assert model_name("gpt52", None) == "GPT-5.2"
    assert model_name("", models) == ""


@pytest.mark.parametrize(
    "path",
    [
        FALLBACK,
        FIXTURES / "smdex__cli-test__models-config-capture.json",
        FIXTURES / "escapeWu__catalog__model_config_v2.json",
    ],
    ids=["shipped", "2026-03", "2026-08"],
)
def test_most_made_names_are_the_catalogues_own(path):
    """Made from the id alone, most names agree with real catalogues (where the catalogue does not
    give a model a name its id does not say, such as "pplx_asi" -> "Computer")."""
    models = json.loads(path.read_text())["models"]
    same = [slug for slug, info in models.items() if derived_name(slug) == info["label"]]
    assert len(same) / len(models) > 0.7, sorted(set(models) - set(same))
    for slug in ("gpt52", "gemini35flash", "claude46opusthinking", "kimik26thinking", "o4mini"):
        if slug in models:
            assert derived_name(slug) == models[slug]["label"]
