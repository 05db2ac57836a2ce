from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
