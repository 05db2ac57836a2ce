from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    verbose_name = "Services"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.embedded import EMBEDDED_LOOPS, Loop
        from pools import source
        from pools.panels import PoolPanel, pool_page
        from serving import demo, scaler, selectors, views

        # Pools count their services' replicas' devices as serving's demand (pools/demand.py).
        source.service_demand.connect(selectors.pool_demand)
        pool_page.connect(PoolPanel("serving/_pool_services.html", views.pool_panel, order=10))
        # Embedded mode (no Celery beat): the autoscaler as beat runs it, and the demo service's synthetic day.
        EMBEDDED_LOOPS.connect(Loop("serving-autoscale", scaler.tick, scaler.INTERVAL))
        EMBEDDED_LOOPS.connect(Loop("serving-demo-traffic", demo.traffic, 5.0))
