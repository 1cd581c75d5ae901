"""FAKE engines and the helpers that drive them: in-process and `python -m tests.fakes.<name>` servers."""
