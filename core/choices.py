"""`TextChoices`, Django's, as mypy should see it.

Django ships no type information and the project checks without django-stubs, so to mypy `models.TextChoices` is
`Any`, and a member written `QUEUED = "queued", "Queued"` is the tuple it is written as, not the `str` Django makes
of it: every comparison with a state, every `dict[str, ...]` keyed by one, would then be a type error. Under
`TYPE_CHECKING` this declares what Django's class is (a `StrEnum` with a label per member, and the class-level lists
Django adds); at run time it is Django's class itself, so nothing changes in the models or the migrations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

if TYPE_CHECKING:
    import enum
    from typing import ClassVar

    class TextChoices(enum.StrEnum):
        choices: ClassVar[list[tuple[str, str]]]
        labels: ClassVar[list[str]]
        values: ClassVar[list[str]]
        names: ClassVar[list[str]]

        @property
        def label(self) -> str: ...

        @property  # Django makes a member's value the first element of what it is written as: a str
        def value(self) -> str: ...
else:
    TextChoices = models.TextChoices
