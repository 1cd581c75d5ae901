"""One module a measurement, each wiring load/ and report/: ladder.py (`fanout bench`: the ladder, then
rates.py's open loop and replay), sweep.py, identity.py, efficiency.py, quality.py, ceiling.py (with its SSE
source, sse_source.py, and its client processes, ceiling_worker.py), typeset.py and calibrate.py
(with judging.py, which scores its judgements)."""
