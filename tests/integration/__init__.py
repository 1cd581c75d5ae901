"""Integration tests: the real embedded engine (marked `engine`), real `fanout` processes, the built wheel."""
