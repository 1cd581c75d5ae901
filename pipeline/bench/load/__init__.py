"""What sends a bench's requests: runner.py (the plans of a level and the Runner interface), send.py (one
request), closed.py (a closed-loop level), openloop.py (an open-loop level), local.py and workers.py (the
in-process and the worker-process runners), workload.py and prompts.py (what is sent), sampler.py (the
engines' counters and GPU power beside the load)."""
