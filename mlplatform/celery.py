"""The Celery app. With REDIS_URL unset (embedded mode) tasks run eagerly in-process."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mlplatform.settings")

app = Celery("mlplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
