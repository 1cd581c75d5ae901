"""From a bench's raw samples to what a reader gets: latency and goodput (latency.py), a level's figures
(figures.py, ratefigures.py, fit.py), where it ran (provenance.py), per-request rows (requestrows.py), and the
report's tables and charts (table.py, loadreport.py, report.py, charts.py, latencycharts.py)."""
