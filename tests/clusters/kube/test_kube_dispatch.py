"""dispatch / cleanup / orphan sweep over real HTTP against kmock."""

from __future__ import annotations

import pytest

from clusters.kube import names
from clusters.kube.dispatch import attempt_key, cleanup, dispatch, find_orphans, sweep_orphans
from clusters.kube.errors import PermanentError
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement

NS = "tidal"
SETTINGS = ClusterSettings(namespace=NS, instance="ci")


def rendered(job_id: int = 7, attempt: int = 1, replicas: int = 3, launcher: str = "deepspeed") -> list[dict]:
    job = RenderJob(job_id=job_id, name="bert", project="nlp", namespace=NS, attempt=attempt, launcher=launcher,
                    image="train:1", replica_groups=(ReplicaGroup("worker", replicas, 1),))
    placement = Placement(tuple(ReplicaPlacement("worker", i, f"n{i}") for i in range(replicas)))
    return render(job, placement, SETTINGS)


def live(kube) -> set[str]:
    out = set()
    for plural in ("pods", "services", "configmaps", "secrets"):
        out |= {name for (_, name) in kube.objects(plural)}
    return out


def test_dispatch_creates_parent_first_then_children(client, kube) -> None:
    manifests = rendered()
    result = dispatch(client, manifests)
    assert result.objects == len(manifests) == 6
    assert result.adopted == []
    creates = kube.handler[kube.handler.action.CREATE]
    assert creates[0].data["metadata"]["name"] == manifests[0]["metadata"]["name"]  # parent first
    assert live(kube) == {m["metadata"]["name"] for m in manifests}


def test_children_get_the_parent_uid(client, kube) -> None:
    def with_uid(request):
        if request.data["metadata"].get("labels", {}).get(names.LABEL_COMPONENT) == "parent":
            return {**request.data, "metadata": {**request.data["metadata"], "uid": "uid-parent-1"}}
        return request.data

    kube.handler["post /api/v1/namespaces/tidal/configmaps"] << with_uid
    result = dispatch(client, rendered())
    assert result.parent_uid == "uid-parent-1"
    pods = kube.objects("pods")
    assert {p["metadata"]["ownerReferences"][0]["uid"] for p in pods.values()} == {"uid-parent-1"}


def test_redispatch_adopts_everything_on_409(client, kube) -> None:
    manifests = rendered()
    dispatch(client, manifests[:3])  # a previous try died half-way
    result = dispatch(client, manifests)
    assert sorted(result.adopted) == sorted(f"{m['kind']}/{m['metadata']['name']}" for m in manifests[:3])
    assert len(result.created) == 3
    assert live(kube) == {m["metadata"]["name"] for m in manifests}


def test_permanent_error_propagates_with_reason(client, kube) -> None:
    kube.handler["post /api/v1/namespaces/tidal/pods"] << 403 << {
        "kind": "Status", "code": 403, "reason": "Forbidden",
        "message": 'pods is forbidden: exceeded quota: gpu-quota, requested: nvidia.com/gpu=1'}
    with pytest.raises(PermanentError, match="exceeded quota") as info:
        dispatch(client, rendered(), workers=1)
    assert info.value.status == 403


def test_cleanup_deletes_only_that_attempt_with_grace(client, kube) -> None:
    dispatch(client, rendered(attempt=1))
    dispatch(client, rendered(attempt=2))
    deleted = cleanup(client, NS, 7, 1, instance="ci", grace_seconds=45)
    assert len(deleted) == 6
    assert all("-a1" in d for d in deleted)
    remaining = live(kube)
    assert remaining and all("-a2" in name for name in remaining)
    pod_deletes = [r for r in kube.handler[kube.handler.action.DELETE] if "/pods/" in r.url.path]
    assert {r.data["gracePeriodSeconds"] for r in pod_deletes} == {45}
    assert deleted[0].startswith("Pod/")  # pods go first


def test_orphan_sweep_keeps_active_and_foreign_objects(client, kube) -> None:
    dispatch(client, rendered(job_id=1))
    dispatch(client, rendered(job_id=2, replicas=1))
    kube.put("pods", NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "someone-elses", "namespace": NS, "labels": {"app": "jupyter"}}})
    other_instance = rendered(job_id=3)[1]
    other_instance["metadata"]["labels"][names.LABEL_INSTANCE] = "staging"
    other_instance["metadata"]["name"] = "staging-svc"
    client.create(other_instance)

    result = sweep_orphans(client, {attempt_key(1, 1)}, namespaces=[NS], instance="ci", grace_seconds=10)
    assert result.deleted and all("tidal-2-" in d for d in result.deleted) and result.skipped == {}
    remaining = live(kube)
    assert "someone-elses" in remaining and "staging-svc" in remaining
    assert {n for n in remaining if n.startswith("tidal-1-")} == {m["metadata"]["name"] for m in rendered(job_id=1)}
    assert not any(n.startswith("tidal-2-") for n in remaining)


def test_find_orphans_is_label_exact() -> None:
    def obj(**labels):
        return {"metadata": {"name": "x", "namespace": NS, "labels": labels}}

    own = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: "ci"}
    objects = [
        obj(**own, **{names.LABEL_JOB: "1", names.LABEL_ATTEMPT: "1"}),  # active
        obj(**own, **{names.LABEL_JOB: "1", names.LABEL_ATTEMPT: "2"}),  # stale attempt of an active job
        obj(**own),  # unattributable: left alone
        obj(**{names.LABEL_JOB: "9", names.LABEL_ATTEMPT: "1"}),  # not managed
    ]
    orphans = find_orphans(objects, {attempt_key(1, 1)}, instance="ci")
    assert orphans == [objects[1]]
