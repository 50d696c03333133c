"""pplxweb: a self-hosted web front-end for a Perplexity Pro/Max subscription."""

__version__ = "0.1.0"
