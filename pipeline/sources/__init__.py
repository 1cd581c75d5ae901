"""The sources stage: documents a user gives (Markdown, text, HTML, PDF) read, cut into passages that remember their
file, heading path and page, indexed by words and by meaning, and searched: read.py -> passages.py -> index.py,
wired by collect.py. Below book/ and audit/, above meaning/; its records are pipeline/records/sources.py."""
