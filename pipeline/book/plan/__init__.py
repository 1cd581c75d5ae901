"""The planner, one module a concern, in the order one node meets them: planner.py (BookSpec -> Outline, as the schedule
says), levels.py (the planner of every level, in both modes), asking.py (one open node's rounds and its last
resorts), phrasing.py (the model phrasing what a given plan gives, pipeline/meaning/given.py; levels.py plans a book
from it), rounds.py (a node's rounds and sampling them, both modes, and the planner's counts), prompts.py (what
fanout says to the model and how its answers are read), choose.py (a node's choosing, the one ranker, the book's
title), checks.py (the book's claims and what the rules read of the book), policy.py (the rules, as the table that
runs them). Import from the module that owns a name.
"""
