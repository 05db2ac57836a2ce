from django.apps import AppConfig


class ReplaysConfig(AppConfig):
    name = "replays"
    verbose_name = "Trace replay and what-if"
