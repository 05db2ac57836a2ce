"""The scheduler core's accelerations, apart from its rules: what only makes the same decisions cheaper.

- `memo`: the one dominance memo ("a shape at least this big is known not to fit, one at most this big is known
  to fit"), cleared by the state's invalidation events (capacity grew, usage fell, borrowing grew);
- `preemption`: the victim search with its may-skip predicates (each states the fact it relies on) and the victim
  pools, sorted when built.

Every one of them is off in the plain mode (`run_cycle(..., accelerate=False)`), which must decide the same
(tests/scheduling/test_properties.py::test_the_plain_mode_decides_the_same). The facts they rely on, and what
makes each stale: docs/scheduling-invariants.md.
"""
