"""A long, realistic answer for the answer-page journeys: 8 sources, 12 steps, headings, a table,
a list, a code block and citations, streamed in small chunks like Perplexity's.

`python -m tests.e2e.rich_answer` (re)writes FIXTURE, which the fake Perplexity replays
(`{"ask": {"fixture": FIXTURE.name, "pace": ...}}`).
"""

from __future__ import annotations

import json
from pathlib import Path

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "perplexity"
    / "fixtures"
    / "pplxweb__answer-page__rich.synthetic.events.jsonl"
)
SITES = [
    (
        "How bread rises - King Arthur Baking",
        "https://www.kingarthurbaking.com/blog/rise",
        "Yeast eats sugars and makes carbon dioxide, which the gluten traps.",
    ),
    (
        "Sourdough - Wikipedia",
        "https://en.wikipedia.org/wiki/Sourdough",
        "Sourdough is bread made by the fermentation of dough using wild lactobacilli and yeast.",
    ),
    (
        "The science of salt in bread",
        "https://www.seriouseats.com/salt-bread",
        "Salt tightens gluten and slows fermentation.",
    ),
    (
        "Baker's percentages explained",
        "https://www.theperfectloaf.com/bakers-percentage/",
        "Every ingredient is a percentage of the flour's weight.",
    ),
    ("Hydration and crumb", "https://bread.example.org/hydration", "Wetter doughs give a more open crumb."),
    (
        "Steam in home ovens",
        "https://www.bbcgoodfood.com/howto/steam",
        "Steam keeps the crust soft so the loaf can expand.",
    ),
    ("Flour protein levels", "https://www.bakingbusiness.com/flour", "Bread flour has 12-14% protein."),
    ("Proofing temperatures", "https://www.breadtopia.com/proofing", "Dough proofs best at 24-27 °C."),
]
ANSWER = """Bread rises because **yeast** ferments the sugars in flour and gives off carbon dioxide, which the stretchy *gluten* network traps like a balloon [1][2]. Salt slows that down and makes the dough stronger [3].

## What happens, step by step

1. Mixing hydrates the flour, and gluten starts to form [7].
2. During the first rise the yeast multiplies and the dough doubles [1].
3. Shaping builds surface tension, so the loaf holds its form.
4. In the oven, steam and heat make a last burst of growth called *oven spring* [6].

## A basic loaf in baker's percentages

| Ingredient | Grams | Baker's % |
|---|---:|---:|
| Bread flour | 500 | 100% |
| Water | 350 | 70% |
| Salt | 10 | 2% |
| Instant yeast | 5 | 1% |

The numbers are relative to the flour's weight, which makes scaling easy [4]. Wetter doughs (75-80% water) give a more open crumb [5].

## Timing it

Proof at 24-27 °C; a cooler kitchen simply takes longer [8]. To work out the water for another loaf size:

```python
def water_for(flour_g: int, hydration: float = 0.70) -> int:
    return round(flour_g * hydration)
```

> A slow, cold rise overnight in the fridge gives more flavour.

See the [King Arthur guide](https://www.kingarthurbaking.com/blog/rise) for pictures of each stage."""


def events(chunk: int = 60) -> list[dict]:
    sources = [{"name": t, "url": u, "snippet": s, "timestamp": ""} for t, u, s in SITES]
    steps = [{"step_type": "SEARCH_WEB", "search_web_content": {"queries": [{"query": q} for q in
             ("why does bread rise", "yeast carbon dioxide gluten", "salt in bread dough", "bakers percentage", "oven spring steam")]}},
             {"step_type": "SEARCH_RESULTS", "search_results_content": {"web_results": sources[:6]}}]  # fmt: skip
    out: list[dict] = [
        {"backend_uuid": "rich-b-1", "context_uuid": "rich-c", "read_write_token": "rich-rw", "thread_url_slug": "rich-slug",
         "display_model": "pplx_pro", "user_selected_model": "pplx_pro", "status": "PENDING"},
        {"status": "PENDING", "blocks": [{"intended_usage": "pro_search_steps", "plan_block": {"goals": [{"description": "Explain why bread rises"}], "steps": steps[:1]}}]},
        {"status": "PENDING", "blocks": [{"intended_usage": "pro_search_steps", "plan_block": {"goals": [{"description": "Explain why bread rises"}], "steps": steps}}]},
        {"status": "PENDING", "blocks": [{"intended_usage": "web_results", "web_result_block": {"web_results": sources}}]},
    ]  # fmt: skip
    chunks = [ANSWER[i : i + chunk] for i in range(0, len(ANSWER), chunk)]
    for i, text in enumerate(chunks):
        out.append(
            {
                "status": "PENDING",
                "blocks": [
                    {
                        "intended_usage": "ask_text",
                        "markdown_block": {"chunks": [text], "chunk_starting_offset": i},
                    }
                ],
            }
        )
    out[-1].update(final=True, text_completed=True)
    out.append({"status": "COMPLETED", "final": True, "final_sse_message": True,
                "related_queries": ["How do I get a more open crumb?", "Why did my bread not rise?"],
                "blocks": [{"intended_usage": "ask_text", "markdown_block": {"chunks": chunks, "chunk_starting_offset": 0, "answer": ANSWER}}]})  # fmt: skip
    return out


if __name__ == "__main__":
    FIXTURE.write_text("".join(json.dumps(e) + "\n" for e in events()))
    print(FIXTURE, len(events()), "events")
