from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
