"""The bench: closed-loop throughput ladders over the fleet (ladder.py wires the stages: loadgen, sampler,
figures, fit, provenance; report.py and charts.py render the record)."""
