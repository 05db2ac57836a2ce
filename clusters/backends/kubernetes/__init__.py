"""The Kubernetes adapter: everything Tidal does with a Kubernetes cluster, on top of the API layer `clusters.kube`.

    backend.py    KubernetesBackend (jobs.ports.Backend): dispatch, stop, observe, logs
    mapping.py    pure mapping between Tidal's models and `clusters.kube`'s dataclasses (namespaces, render inputs)
    watch.py      the pod watch of `manage.py run_reconciler`: an event -> the observation of one attempt
    nodesync.py   nodes and pods -> Node rows; devices an attempt whose stop failed keeps taking
    sweep.py      deletes the platform's objects of no active attempt
    loops.py      the resync, node sync and sweep of every Kubernetes cluster, one failure isolated per cluster
    tasks.py      their Celery tasks (named as when they were `clusters.tasks`)
    clients.py    one API client per cluster and process, its shared request budget, the connection test
"""
