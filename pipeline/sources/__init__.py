"""The user's sources: documents a user gives (Markdown, text, HTML, PDF) read, cut into passages that remember their
file, heading path and page, indexed by words and by meaning, and searched: read.py -> passages.py -> index.py,
wired by collect.py; places.py is what the planner sees of them. Below book/ and audit/, above meaning/; its records
are pipeline/records/sources.py. A book run opens them in its sources stage (pipeline/book/sourcestage.py)."""
