"""Platform plumbing a user relies on: password reset by e-mail, scheduler metrics, the compose file."""

from pathlib import Path

import yaml
from django.core import mail

ROOT = Path(__file__).resolve().parent.parent


def test_password_reset_sends_a_link(tenant, client):
    response = client.post("/accounts/password_reset/", {"email": "member@example.com"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1 and "/accounts/reset/" in mail.outbox[0].body
    assert client.post("/accounts/password_reset/", {"email": "nobody@example.com"}).status_code == 302
    assert len(mail.outbox) == 1  # nothing tells an attacker whether the address exists


def test_scheduler_metrics_are_exported(tenant, client):
    from jobs.loop import run_once

    run_once()
    body = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    for name in ("tidal_scheduler_cycle_seconds", "tidal_admissions_total", "tidal_preemptions_total",
                 "tidal_submit_to_admit_seconds", "tidal_queue_length"):
        assert name in body, name


def test_compose_file_defines_the_services_with_health_checks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "scheduler"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert "pgdata" in compose["volumes"]
    assert services["web"]["command"].startswith("gunicorn")
    assert services["scheduler"]["command"] == "python manage.py run_scheduler"
    assert all(service.get("env_file") == ".env" for name, service in services.items()
               if name not in ("postgres", "redis", "minio", "minio-bucket"))  # the stores take no app settings
