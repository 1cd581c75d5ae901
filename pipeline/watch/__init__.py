"""Watchers of a run: the listener interfaces (listeners.py), the terminal display (terminal.py) and the live page
(live.py), each display a listener beside the other."""
