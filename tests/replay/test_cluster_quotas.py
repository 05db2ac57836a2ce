"""Cluster shape and quota files, CSV and YAML."""

import pytest

from replay.api import cluster_for_quotas, with_quota
from replay.cluster import ConfigError, load_cluster, load_quotas, write_cluster, write_quotas


def test_cluster_csv_with_counts_and_topology(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("# shape\nname,flavor,devices,count,rack,block\n,a100,8,3,r1,b1\nbig,h100,4,1,r2,b1\n")
    c = load_cluster(p)
    assert [n.name for n in c.nodes] == ["a100-0000", "a100-0001", "a100-0002", "big"]
    assert c.devices_by_flavor() == {"a100": 24, "h100": 4}
    assert c.nodes[0].rack == "r1" and c.nodes[3].block == "b1"
    assert all(n.free == n.devices for n in c.nodes)
    out = tmp_path / "again.csv"
    write_cluster(c, out)
    assert load_cluster(out).nodes == c.nodes


def test_cluster_yaml(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("nodes:\n  - {name: n, flavor: a100, devices: 8, count: 2, rack: r1}\n  - {flavor: t4, devices: 1}\n")
    c = load_cluster(p)
    assert [n.name for n in c.nodes] == ["n-0", "n-1", "t4-0002"]
    assert c.limits().node_devices == {"a100": 8, "t4": 1}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("flavor,devices\n,8\n", "missing flavor"),
        ("flavor,devices\na100,eight\n", "devices must be a whole number"),
        ("flavor,devices\na100,-8\n", "must not be negative"),
        ("name,flavor,devices\nx,a100,8\nx,a100,8\n", "duplicate node name"),
        ("flavor,devices\n", "no nodes"),
    ],
)
def test_cluster_errors(tmp_path, text, words):
    p = tmp_path / "c.csv"
    p.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_cluster(p)


def test_quota_csv_and_yaml(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("project,flavor,guaranteed,borrow_limit,lend_limit,cohort,max_running_jobs\n"
                 "vision,a100,16,8,,org1,3\nnlp,a100,8,0,4,org1,\n")  # fmt: skip
    q = load_quotas(p)
    assert [(x.project, x.guaranteed, x.borrow_limit, x.lend_limit) for x in q.quotas] == [
        ("vision", 16, 8, None),
        ("nlp", 8, 0, 4),
    ]
    assert [(x.name, x.cohort, x.max_running_jobs) for x in q.projects] == [
        ("vision", "org1", 3),
        ("nlp", "org1", None),
    ]
    assert q.guarantee("vision") == 16
    out = tmp_path / "again.csv"
    write_quotas(q, out)
    assert load_quotas(out) == q
    y = tmp_path / "q.yaml"
    y.write_text("quotas:\n  - {project: vision, flavor: a100, guaranteed: 16}\n")
    qy = load_quotas(y)
    assert qy.quotas[0].guaranteed == 16 and qy.projects[0].cohort == "default"
    with pytest.raises(ConfigError, match="required"):
        y.write_text("quotas:\n  - {project: vision, guaranteed: 16}\n")
        load_quotas(y)


def test_cluster_for_quotas_and_what_if_edit(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("project,flavor,guaranteed\na,gpu,12\nb,gpu,8\nc,t4,1\n")
    q = load_quotas(p)
    c = cluster_for_quotas(q, node_devices=8)
    assert c.devices_by_flavor() == {"gpu": 24, "t4": 8}
    q2 = with_quota(q, "a", "gpu", guaranteed=4, borrow_limit=2)
    assert [(x.project, x.guaranteed, x.borrow_limit) for x in q2.quotas][0] == ("a", 4, 2)
    q3 = with_quota(q, "new", "gpu", guaranteed=2)
    assert q3.quotas[-1].project == "new" and q3.guarantee("new") == 2
