"""What measures meaning, below the planner, the writer and the audit that all use it: the request read as a person
reads it (asks.py, framing.py), the sentence encoders (embed.py, minilm.py), the judges of a line's fit to the
request (onsubject.py, offrequest.py), nearness of titles, points and texts (nearness.py) and words no handbook
prints (offensive.py)."""
