"""Scripted fault injection (`make chaos`): the Tidal stack on a private PostgreSQL and Redis, one fault at a time,
and the invariants that must hold after each (`chaos.invariants`, shared with the in-process faults of
tests/faults/). See docs/reliability.md#faults."""
