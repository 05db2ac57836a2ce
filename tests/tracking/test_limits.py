"""Bodies over the size limit are refused with a clear 4xx on the ingestion paths, never a 500."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_an_oversized_batch_is_a_413_and_writes_nothing(run, run_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"metrics": [{"key": "k" * 200, "value": 1.0, "step": i} for i in range(100)]})
    response = run_client.post(reverse("run-log-batch", kwargs={"pk": run.pk}), body,
                               content_type="application/json")
    assert response.status_code == 413, response.content
    assert "size" in response.json()["error"]["message"].lower()
    assert not run.series.exists()


def test_an_oversized_mlflow_batch_answers_in_mlflows_shape(run, run_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"run_id": str(run.pk), "metrics": [{"key": "k" * 200, "value": 1.0, "step": i, "timestamp": 1}
                                                          for i in range(100)]})
    response = run_client.post(f"/mlflow/{run.project.slug}/api/2.0/mlflow/runs/log-batch", body,
                               content_type="application/json")
    assert response.status_code in (400, 413), response.content
    assert set(response.json()) >= {"error_code", "message"}
    assert not run.series.exists()


@pytest.mark.parametrize("keys", [1_000, 10_000])
def test_a_batch_of_as_many_keys_as_points_is_stored_whole(run, run_client, keys):
    """Up to 10,000 points, each of its own key if it likes: every key's series and points are written (SQLite's
    limit on an expression's depth, 1,000, must not turn a wide batch into a 500)."""
    body = json.dumps({"metrics": [{"key": f"layer{k}/grad_norm", "value": float(k), "step": 1} for k in range(keys)]})
    response = run_client.post(reverse("run-log-batch", kwargs={"pk": run.pk}), body,
                               content_type="application/json")
    assert response.status_code == 200, response.content
    assert run.series.count() == keys
