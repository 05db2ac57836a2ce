from django.apps import AppConfig
from django.conf import settings


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS
        from core.wakeup import wait_for_wakeup
        from jobs import ports
        from jobs.loop import run_once
        from jobs.selectors import RESUME_ENV_NAMES, held_devices, resume_env
        from quotas.selectors import register_usage_source

        register_usage_source(held_devices)
        ports.register_env_source(resume_env, RESUME_ENV_NAMES)
        EMBEDDED_LOOPS.append(("scheduler", run_once, settings.TIDAL["SCHEDULER_INTERVAL"], wait_for_wakeup))
