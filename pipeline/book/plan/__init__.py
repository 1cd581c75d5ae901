"""The planner, one module a concern: planner.py (BookSpec -> Outline, pipelined or level by level),
asking.py (one node's asks), schedule.py (how many asks, their notes, the counts), answers.py (reading
answers), checks.py (what a title must pass), coverage.py (the request's asks carried down the plan),
fallbacks.py (what a node takes when its asks are spent). Import from the module that owns a name.
"""
