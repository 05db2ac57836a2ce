"""A world for the API fuzz test: the shared tenants, each holding objects of every kind the API serves (jobs queued
and running, runs with points, experiments, alerts, alert rules, webhooks, memberships, tokens, replays, audit
entries, quotas), the jobs tests' inventory and the costs tests' prices.

Everything a tenant owns carries its marker in a name, so a response that leaks it to the other tenant is found by
a plain substring search."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from django.utils import timezone

from tenancy.models import Membership, Organization, Project, Role
from tenancy.services import token_create
from tests.conftest import make_user
from tests.costs.conftest import prices  # noqa: F401  (fixture)
from tests.jobs.conftest import admit, inventory, submit  # noqa: F401  (fixtures)

# A tenant's marker: in the names of its objects, never in a response to the other tenant.
MARKERS = {"vision": "acme-only-7f3a", "secret": "globex-only-9c1e"}
# `make test` sends the same examples every run (derandomized: a red CI names a change, not a draw); `make fuzz`
# explores new ones each run (TIDAL_FUZZ_EXPLORE=1), as it does the scheduler's properties.
EXPLORE = os.environ.get("TIDAL_FUZZ_EXPLORE", "") == "1"


@dataclass
class World:
    secrets: dict[str, str]  # role -> a Bearer token of its user
    path_parameters: dict[str, list[dict[str, str]]]  # path template -> path parameters of existing objects
    references: dict[str, list[str | int]]  # query parameter or body field -> names or ids of existing objects


@pytest.fixture
def world(tenant, prices, settings, tmp_path) -> World:  # noqa: F811
    settings.REPLAY_DIR = tmp_path / "replays"
    owners = {"vision": tenant.users["owner"], "secret": tenant.users["outsider"]}
    for project in (tenant.project, tenant.other_project):
        _fill(tenant, project, owners[project.slug], prices)
    secrets = {role: token_create(user=tenant.users[role], name=f"fuzz-{role}")[1]
               for role in ("owner", "viewer", "outsider")}
    return World(secrets=secrets, path_parameters=_path_parameters(), references=_references())


@pytest.fixture
def no_throttling(settings):
    """Thousands of requests a minute per token: the fuzz tests measure answers, not the rate limit."""
    rates = dict.fromkeys(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


def _fill(tenant, project: Project, owner, inventory) -> None:  # noqa: F811
    from quotas.models import Quota
    from replays.models import ReplayRun
    from tenancy.audit import audit_record
    from tracking import services as tracking
    from tracking.models import Alert, AlertRule, Webhook

    marker = MARKERS[project.slug]
    Organization.objects.filter(pk=project.organization_id).update(name=f"{project.organization.name} {marker}")
    Project.objects.filter(pk=project.pk).update(name=f"{project.name} {marker}", description=marker)
    a100 = inventory["a100"]
    Quota.objects.get_or_create(project=project, flavor=a100, defaults={"guaranteed": 8})
    user = "owner" if project == tenant.project else "outsider"
    submit(tenant, a100, project=project, user=user, devices=1, name=f"{marker}-queued")
    running = submit(tenant, a100, project=project, user=user, devices=2, name=f"{marker}-running")
    node = "a-n1" if project == tenant.project else "a-n2"
    admit(running, inventory["cluster"], [node])  # its run and its usage segment open here
    _failed_with_diagnosis(tenant, project, user, a100, inventory["cluster"], node, marker)
    _telemetry(running.current_attempt, node)
    experiment = tracking.experiment_create(project=project, name=f"{marker} sweep", description=marker)
    run = tracking.run_create(project=project, experiment=experiment, name=f"{marker}-run", user=owner,
                              params={"note": marker}, tags={"team": marker})
    tracking.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": 1.0 / step, "step": step}
                                                   for step in range(1, 6)])
    Alert.objects.create(run=run, rule="nan", key="loss", step=5, message=f"{marker}: loss is NaN",
                         opened_at=timezone.now())
    AlertRule.objects.create(project=project, rule="loss_spike", params={"z": 8})
    Webhook.objects.create(project=project, url=f"https://hooks.example.com/{marker}", secret="s" * 32)
    member = make_user(f"{marker}-member")
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    token_create(user=owner, name=f"{marker}-token")
    ReplayRun.objects.create(created_by=owner, created_by_name=owner.username, status="succeeded",
                             trace_name=f"{marker}.csv")
    audit_record(actor=owner, action="fuzz.seed", target=project, project=project, changes={"note": marker})


def _failed_with_diagnosis(tenant, project, user, flavor, cluster, node, marker) -> None:
    """A job whose attempt failed with the tenant's marker in its log: its diagnosis (reliability) quotes it."""
    from jobs.lifecycle import AttemptEnd, transition
    from jobs.states import State
    from reliability.models import FailurePattern, ProjectPolicy

    failed = admit(submit(tenant, flavor, project=project, user=user, devices=1, name=f"{marker}-failed"), cluster,
                   [node])
    if failed.state == State.ADMITTED:
        transition(failed, State.DISPATCHING, reason="fuzz", actor="system")
    transition(failed, State.RUNNING, reason="fuzz", actor="system")
    transition(failed, State.FAILED, reason="fuzz", actor="backend", end=AttemptEnd(
        cause="user_error", exit_code=1, logs={"worker-0": ["Traceback (most recent call last):",
                                                            f"ValueError: {marker} bad batch"]}))
    FailurePattern.objects.get_or_create(pattern="fuzz pattern", defaults={"cause": "nccl"})
    ProjectPolicy.objects.create(project=project, restart_on_hang=True)


def _telemetry(attempt, node: str) -> None:
    """GPU telemetry of the running job's attempt, as the simulated cluster makes it, and a source of each cluster."""
    from clusters.models import Cluster
    from telemetry import store
    from telemetry.attribution import Attribution, group
    from telemetry.models import TelemetrySource
    from telemetry.simulated import samples_of

    attempt.refresh_from_db()
    now = int(timezone.now().timestamp())
    made = [s for t in range(now - 60, now, 15) for s in samples_of(attempt, {}, t)]
    found = Attribution(attempt.cluster, now - 60, now)
    store.store(found.holders, group(found, made)[0])
    for cluster in Cluster.objects.all():
        TelemetrySource.objects.get_or_create(cluster=cluster)


def _path_parameters() -> dict[str, list[dict[str, str]]]:
    """Every existing object of each endpoint, both tenants' and the catalogs', as the path parameters naming it."""
    from clusters.models import Cluster, Node
    from costs.models import ClassDiscount, CpuPrice, DevicePrice, TidalRate
    from jobs.models import Attempt, Job
    from quotas.models import PriorityClass, Quota, ResourceFlavor
    from reliability.models import Diagnosis, FailurePattern, ProjectPolicy
    from replays.models import ReplayRun
    from tenancy.models import ApiToken, AuditEntry
    from tracking.models import Alert, AlertRule, Experiment, Run, Webhook

    by_id = {"alert-rules": AlertRule, "alerts": Alert, "audit": AuditEntry, "experiments": Experiment, "jobs": Job,
             "diagnoses": Diagnosis, "failure-patterns": FailurePattern, "quarantine": Node, "attempts": Attempt,
             "reliability-policies": ProjectPolicy,
             "memberships": Membership, "nodes": Node, "prices/cpu": CpuPrice, "prices/devices": DevicePrice,
             "prices/discounts": ClassDiscount, "prices/tidal": TidalRate, "quotas": Quota, "replays": ReplayRun,
             "runs": Run, "tokens": ApiToken, "webhooks": Webhook}
    by_name = {"clusters": Cluster, "flavors": ResourceFlavor, "priority-classes": PriorityClass}
    by_slug = {"organizations": Organization, "projects": Project}
    parameters = {}
    for lookup, models in (("id", by_id), ("name", by_name), ("slug", by_slug)):
        column = "pk" if lookup == "id" else lookup
        for prefix, model in models.items():
            parameters[f"/api/v1/{prefix}/"] = [{lookup: str(value)}
                                                for value in model.objects.values_list(column, flat=True)]
    from telemetry.models import AttemptTelemetry, TelemetrySource

    parameters["/api/v1/telemetry/attempts/"] = [
        {"id": str(value)} for value in AttemptTelemetry.objects.values_list("attempt_id", flat=True)]
    parameters["/api/v1/telemetry/sources/"] = [
        {"cluster": value} for value in TelemetrySource.objects.values_list("cluster__name", flat=True)]
    return parameters


def _references() -> dict[str, list[str | int]]:
    """What a filter or a body field naming an object can name, in both tenants: without them nearly every random
    name is refused with a 400 and the code behind it is never reached."""
    from clusters.models import Cluster
    from jobs.models import Job
    from quotas.models import PriorityClass, ResourceFlavor
    from tracking.models import Experiment, Run

    def values(model, column: str = "pk") -> list:
        return list(model.objects.values_list(column, flat=True))

    return {"project": values(Project, "slug"), "organization": values(Organization, "slug"),
            "flavor": values(ResourceFlavor, "name"), "cluster": values(Cluster, "name"),
            "priority_class": values(PriorityClass, "name"),
            "user": [f"{marker}-member" for marker in MARKERS.values()],
            "experiment": values(Experiment), "run": values(Run), "job": values(Job), "page": [1]}
