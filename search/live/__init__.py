"""The live path: a question asked, its answer streamed to the page and saved as it comes."""
