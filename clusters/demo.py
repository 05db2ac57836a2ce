"""A simulated cluster of mixed flavors for the demo: two blocks of racks, so topology and gangs matter."""

from __future__ import annotations

from clusters.models import Cluster, Node
from clusters.services import cluster_save, node_save
from quotas.models import ResourceFlavor
from quotas.services import flavor_save

FLAVORS = [
    # name, vendor, device resource, arch, rdma
    ("nvidia-h100-80gb", "nvidia", "nvidia.com/gpu", "amd64", True),
    ("nvidia-a100-40gb", "nvidia", "nvidia.com/gpu", "amd64", False),
    ("ascend-910b", "huawei", "huawei.com/Ascend910", "arm64", False),
]
# flavor, block, rack, nodes, devices per node
LAYOUT = [
    ("nvidia-h100-80gb", "block-a", "rack-a1", 4, 8),
    ("nvidia-h100-80gb", "block-a", "rack-a2", 4, 8),
    ("nvidia-a100-40gb", "block-b", "rack-b1", 4, 8),
    ("nvidia-a100-40gb", "block-b", "rack-b2", 2, 8),
    ("ascend-910b", "block-c", "rack-c1", 2, 8),
]


ACTOR = "seed_demo"


def seed_cluster() -> Cluster:
    """Create what is missing of the demo flavors, cluster and nodes, through the same services as the console."""
    flavors = {}
    for name, vendor, resource, arch, rdma in FLAVORS:
        flavors[name] = ResourceFlavor.objects.filter(name=name).first() or flavor_save(
            actor=ACTOR, flavor=ResourceFlavor(name=name, vendor=vendor, device_resource=resource, arch=arch,
                                               rdma=rdma))
    cluster = Cluster.objects.filter(name="sim-1").first() or cluster_save(
        actor=ACTOR, cluster=Cluster(name="sim-1", description="Simulated demo cluster"))
    existing = set(cluster.nodes.values_list("name", flat=True))
    position = 0
    for flavor, block, rack, count, devices in LAYOUT:
        for i in range(1, count + 1):
            position += 1
            if f"{rack}-n{i}" not in existing:
                node_save(actor=ACTOR, node=Node(
                    cluster=cluster, name=f"{rack}-n{i}", flavor=flavors[flavor], devices=devices, block=block,
                    rack=rack, arch=flavors[flavor].arch, cpu_millis=96000, memory_mib=1024 * 1024,
                    position=position))
    return cluster
