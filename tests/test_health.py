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


@override_settings(TIDAL_METRICS_TOKEN="s3cret")
def test_a_configured_token_is_required_from_everywhere(db, client):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200


@override_settings(TIDAL_METRICS_TOKEN="")
def test_without_a_token_only_direct_connections_from_allowed_addresses(db, client, settings):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    # A proxy on the same host: its connections come from 127.0.0.1, whoever the client is.
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 403
    settings.TIDAL_TRUSTED_PROXIES = ["127.0.0.1"]
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    settings.TIDAL_TRUSTED_PROXIES, settings.METRICS_ALLOWED_IPS = [], ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200


def test_made_up_methods_share_one_label(db, client):
    from mlplatform.metrics import REQUESTS

    for method in ("BREW", "PROPFIND", "X" * 50):
        client.generic(method, "/healthz")
    client.get("/healthz")
    methods = {sample.labels["method"] for metric in REQUESTS.collect() for sample in metric.samples}
    assert "other" in methods and "GET" in methods and not {"BREW", "PROPFIND", "X" * 50} & methods


def test_schema_and_docs(db, client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
