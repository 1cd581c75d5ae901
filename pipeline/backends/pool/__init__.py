"""The backend pool, one module a part: pool.py (BackendPool, the coordinator), admission.py (slots, queues,
the reservation and the planning lane), health.py (down-marking, probes, holds, the fleet's verdict), retry.py
(which failure is asked again, where, how often, how soon), policy.py (RetryPolicy, their numbers), state.py
(the records they share). Each module's docstring states its contract; the Transport each attempt goes through
is pipeline/backends/transport.py. The names other stages use are re-exported here.
"""

from pipeline.backends.pool.health import FleetUnavailable
from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.pool import BackendPool
from pipeline.backends.pool.retry import RequestFailed, RequestRefused
from pipeline.backends.pool.state import BackendSnapshot

__all__ = ["BackendPool", "BackendSnapshot", "FleetUnavailable", "RequestFailed", "RequestRefused", "RetryPolicy"]
