"""A pushed p99 latency goes to the pools' interference rule (pools/interference.py, another branch's) where that
module exists, with the service's pool, the pool's nodes and the SLO; without it, or without an SLO, nothing more."""

from __future__ import annotations

import sys
import types

from django.urls import reverse

from serving.models import Service


def _stand_in(monkeypatch) -> list[tuple]:
    calls: list[tuple] = []
    module = types.ModuleType("pools.interference")
    module.report_latency = lambda pool, nodes, p99_ms, slo_ms: calls.append((pool.name, nodes, p99_ms, slo_ms))
    monkeypatch.setitem(sys.modules, "pools.interference", module)
    return calls


def test_a_latency_push_reaches_the_interference_rule(monkeypatch, clients, service,
                                                      django_capture_on_commit_callbacks):
    calls = _stand_in(monkeypatch)
    Service.objects.filter(pk=service.pk).update(latency_slo_ms=500)
    url = reverse("service-metric", kwargs={"pk": service.pk})
    with django_capture_on_commit_callbacks(execute=True):
        assert clients["member"].put(url, {"value": 3, "p99_latency_ms": 720}, format="json").status_code == 200
    assert calls == [("chat", ["sim/a-n1", "sim/a-n2"], 720.0, 500)]
    with django_capture_on_commit_callbacks(execute=True):
        clients["member"].put(url, {"value": 3}, format="json")  # no latency: nothing to report
    assert len(calls) == 1


def test_without_an_slo_or_the_module_nothing_is_reported(monkeypatch, clients, service,
                                                          django_capture_on_commit_callbacks):
    calls = _stand_in(monkeypatch)
    url = reverse("service-metric", kwargs={"pk": service.pk})
    with django_capture_on_commit_callbacks(execute=True):
        clients["member"].put(url, {"value": 3, "p99_latency_ms": 720}, format="json")
    assert calls == []
    monkeypatch.setitem(sys.modules, "pools.interference", None)  # not installed: an import of it fails
    Service.objects.filter(pk=service.pk).update(latency_slo_ms=500)
    with django_capture_on_commit_callbacks(execute=True):
        response = clients["member"].put(url, {"value": 3, "p99_latency_ms": 720}, format="json")
    assert response.status_code == 200 and response.json()["p99_latency_ms"] == 720.0
