"""``ai-scientist serve``: the live web view of a run, with steering (see docs/serve.md)."""
