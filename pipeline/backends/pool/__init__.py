"""The backend pool: BackendPool (pool.py) sends requests to a fleet of backends and returns their Completions.

The names other stages use are re-exported here; the pool's parts are imported from the module that owns them.
"""

from pipeline.backends.pool.pool import (
    BackendPool,
    BackendSnapshot,
    FleetUnavailable,
    RequestFailed,
    RequestRefused,
    RetryPolicy,
)

__all__ = ["BackendPool", "BackendSnapshot", "FleetUnavailable", "RequestFailed", "RequestRefused", "RetryPolicy"]
