"""The planner, one module a concern: planner.py (BookSpec -> Outline, as the schedule says), levels.py (one planner
for every level of an open plan), asking.py (one node's rounds and its last resorts; the book title), rounds.py
(sampling a question, both modes), choose.py (a node's choosing and the one ranker), policy.py (the rules, as the
table that runs them), checks.py (what the rules read of the book), claims.py (the book's titles), answers.py
(reading answers), prompts.py (what fanout says to the model), stats.py (the counts); given.py, phrasing.py,
fromgiven.py (a book planned from what is given); fallbacks.py (the book's title when the model gave none). Import
from the module that owns a name.
"""
