"""The part of MLflow's tracking REST API that the `mlflow` client uses, served per project at
`/mlflow/<project>/api/2.0/mlflow/`: MLflow experiments are a project's experiments, MLflow runs its runs, and
points go through the same validated, all-or-nothing ingestion as Tidal's own log-batch (see docs/mlflow.md)."""
