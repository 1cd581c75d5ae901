"""The planner, one module a concern: planner.py (BookSpec -> Outline, pipelined or level by level),
asking.py (one node's asks), schedule.py (how many asks, their notes, the counts), answers.py (reading
answers), checks.py (what a title must pass), coverage.py (the request's asks carried down the plan),
fallbacks.py (the book's title when the model gave none); given.py (what a book's units are about: the request's
concerns and its kind's facets), phrasing.py (the model phrases one given unit), fromgiven.py (a book planned from
what is given). Import from the module that owns a name.
"""
