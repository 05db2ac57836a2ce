from django.apps import AppConfig
from django.conf import settings


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS, Loop
        from core.wakeup import wait_for_wakeup
        from jobs import ports
        from jobs.loop import run_once
        from jobs.selectors import RESUME_ENV_NAMES, held_devices, resume_env
        from quotas.selectors import usage_source

        usage_source.connect(held_devices)
        ports.env_sources.connect(ports.EnvSource(resume_env, RESUME_ENV_NAMES))
        EMBEDDED_LOOPS.connect(Loop("scheduler", run_once, settings.TIDAL["SCHEDULER_INTERVAL"], wait_for_wakeup))
