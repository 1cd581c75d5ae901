"""The bench: what the fleet sustains and how it answers, measured under load.

load/ sends requests (the closed loop, the open loop, workloads, samplers, and the runners that send from
this process or from worker processes); report/ turns what was sent into figures, tables, charts and
per-request rows; studies/ wires the two into one measurement each (the ladder and open loop of
`fanout bench`, the sweep, identity, efficiency, quality, the client ceiling and the typesetting bench).
Arrows point down: studies -> report -> load."""
