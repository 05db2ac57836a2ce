"""The system check of the wiring between apps (`core.hooks`): a required hook nothing connected to (the dispatch
port without the clusters app's backends) fails `manage.py check` and every command that runs the checks, instead of
the first job that needs it."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error

from core.hooks import declared


def required_hooks_connected(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [Error(f"Nothing is connected to the hook {hook.name}.",
                  hint="The app that provides it connects in its AppConfig.ready(): is it in INSTALLED_APPS?",
                  id="core.E001")
            for hook in declared() if hook.required and not hook.receivers]
