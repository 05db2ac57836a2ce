"""Kubernetes layer of Tidal: render admitted jobs into manifests, dispatch them, map status back.

Only :mod:`clusters.kube.client` imports the ``kubernetes`` package; every other module here is pure
Python over plain dataclasses and dicts, so the scheduler, the simulated backend and the tests can use
them without a cluster. See ``docs/kubernetes.md``.
"""
