"""The one dominance memo of the scheduler's accelerations (jobs/scheduling/fast/memo.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.fast.memo import DominanceMemo

sizes = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(sizes, max_size=12), st.lists(sizes, min_size=1, max_size=12), st.integers(0, 18))
def test_a_remembered_answer_is_the_answer_of_any_monotone_question(asked, later, capacity):
    """Whatever a monotone question (a larger size never fits where a smaller one did not) answered, what the memo
    then claims to know of another size is that question's answer, and it never claims what was not implied."""
    def fits(size):
        return sum(size) <= capacity

    memo = DominanceMemo()
    for size in asked:
        memo.record("ctx", size, fits(size))
    for size in later:
        known = memo.known("ctx", size)
        if known is not None:
            assert known == fits(size)
        implied_fail = any(all(s >= a for s, a in zip(size, f, strict=True)) for f in asked if not fits(f))
        implied_fit = any(all(s <= a for s, a in zip(size, f, strict=True)) for f in asked if fits(f))
        assert (known is not None) == (implied_fail or implied_fit)
        assert memo.known_to_fail("ctx", size) == implied_fail


def test_contexts_are_apart_and_an_event_forgets():
    memo = DominanceMemo()
    memo.record(("a", 8), (2, 0, 0), False)
    assert memo.known_to_fail(("a", 8), (3, 0, 0))
    assert not memo.known_to_fail(("a", 8), (1, 0, 0))  # smaller: not implied
    assert not memo.known_to_fail(("b", 8), (3, 0, 0))  # another context
    memo.forget()
    assert memo.known(("a", 8), (3, 0, 0)) is None


def test_the_plain_mode_memo_knows_and_keeps_nothing():
    memo = DominanceMemo(enabled=False)
    memo.record("ctx", (1,), False)
    memo.record("ctx", (9,), True)
    assert memo.known("ctx", (5,)) is None
    assert not memo.known_to_fail("ctx", (5,))
