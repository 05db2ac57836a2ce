"""Pure series code: no Django, no I/O (a convention test holds it), so it can be tested and timed alone."""
