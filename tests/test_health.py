from django.test import override_settings


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_database(db, client):
    body = client.get("/readyz").json()
    assert body["checks"]["database"] == "ok"


@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_readyz_reports_unreachable_redis(db, client):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"].startswith("error")


def test_metrics_from_allowed_address(db, client):
    client.get("/healthz")
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert b"tidal_http_requests_total" in response.content


@override_settings(METRICS_TOKEN="s3cret")
def test_metrics_refused_elsewhere_unless_token(db, client):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200


def test_schema_and_docs(db, client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
