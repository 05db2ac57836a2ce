from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """No models: an installed app so that Celery's autodiscovery finds `notifications.tasks`."""

    name = "notifications"
    verbose_name = "Notifications"
