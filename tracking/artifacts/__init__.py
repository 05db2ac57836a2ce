"""Runs' artifacts: where their bytes are stored (store), the paths accepted (paths), writes (services), reads
(selectors) and the run page's list, previews and downloads (views). MLflow's artifact proxy, through which
clients log them, is tracking.mlflow.artifacts."""
