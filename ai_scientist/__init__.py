"""ai_scientist: a research-automation pipeline with sandboxed execution and exact prompt logs."""

__version__ = "0.1.0"
