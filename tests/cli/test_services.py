"""`tidal submit` of a `launcher: service` file, `tidal services` and `tidal service NAME` against a live server."""

from __future__ import annotations

import pytest

from pools.models import Pool
from quotas.models import ResourceFlavor
from tests.cli.conftest import EXAMPLES

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(demo_cluster):
    a100 = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
    return Pool.objects.create(name="chat", cluster=demo_cluster, flavor=a100, node_pattern="rack-b2-*")


def test_submit_a_service_file_then_list_and_show_it(cli, pool):
    created = cli("submit", str(EXAMPLES / "service.yaml"), "--project", "vision")
    assert created.code == 0, created.err
    assert created.out.startswith("Created service ") and "pool chat: 1 replica(s) of 1..8" in created.out
    listed = cli("services", user="viewer")
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()[:2]
    assert header.split()[:8] == ["ID", "PROJECT", "NAME", "POOL", "STATE", "READY", "MIN..MAX", "DEVICES"]
    assert row.split()[1:8] == ["vision", "chat-small", "chat", "pending", "0/1", "1..8", "2"]
    shown = cli("service", "chat-small", user="viewer")
    assert shown.code == 0, shown.err
    assert "created at its minimum of 1" in shown.out and "p99 800 ms" in shown.out
    assert cli("service", "chat-small", "--json").json()["replicas"] == {"min": 1, "max": 8, "desired": 1,
                                                                          "ready": 0}


def test_a_bad_service_file_names_the_line_and_a_missing_service_is_not_found(cli, pool, job_file):
    path = job_file(text="launcher: service\nname: s\npool: chat\nimage: x:1\ndevices_per_replica: 0\n"
                         "replicas: {min: 1, max: 2}\ntarget_per_replica: 5\n", filename="svc.yaml")
    refused = cli("submit", str(path), "--project", "vision")
    assert refused.code == 1 and "svc.yaml line 5: " in refused.err and "devices_per_replica" in refused.err
    missing = cli("service", "nope", user="outsider")
    assert missing.code == 1 and "Service nope not found" in missing.err
