"""The LLM layer: one client (``client.LLMClient``) over interchangeable backends.

Backends: ``openai_backend`` (any OpenAI-compatible endpoint), ``local_backend``
(in-process llama.cpp), ``replay_backend`` (recorded prompt logs),
``scripted_backend`` (a Python function, for tests). ``factory.make_client`` builds
the client a run uses. Submodules are imported on demand to keep start-up light.
"""
