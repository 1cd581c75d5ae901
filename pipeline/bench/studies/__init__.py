"""One module a measurement, each wiring load/ and report/: ladder.py (`fanout bench`: the ladder, then
rates.py's open loop and replay), sweep.py, identity.py, efficiency.py, quality.py, ceiling.py (with its SSE
source, sse_source.py), typeset.py and calibrate.py."""
