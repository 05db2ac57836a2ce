"""Lightning, for real, logging to a live Tidal through its MLFlowLogger: a tiny LightningModule built in code trains
a few steps on CPU with `MLFlowLogger(log_model=True)` and a ModelCheckpoint keeping every checkpoint, as a user
outside a job (MLFLOW_TRACKING_URI, a personal token) and as a job (its run token, the logger given MLFLOW_RUN_ID).
What arrived is read back through Tidal: the run in the right project and experiment with the module's
hyperparameters and every logged loss at its step, each checkpoint stored as the run's artifacts (the file byte for
byte, with the logger's metadata and aliases beside it), and the run FINISHED. A token of another project stops
`fit` before its first step with MLflow's RESOURCE_DOES_NOT_EXIST, and nothing is written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import lightning
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import MLFlowLogger
from mlflow.exceptions import MlflowException
from torch.utils.data import DataLoader, TensorDataset

from tests.tracking.test_mlflow import live, use_mlflow, user_token  # noqa: F401  (use_mlflow: fixture)
from tracking.artifacts import services as artifact_services
from tracking.models import Artifact, Experiment, Run, RunStatus, Series
from tracking.points import stored_points
from tracking.tokens import run_token

EPOCHS, BATCHES, SAVE_STEPS = 2, 4, 4


class Regression(lightning.LightningModule):
    """One linear layer fitting y = sum(x); remembers each step's loss as it logged it."""

    def __init__(self, learning_rate: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)
        self.losses: list[float] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate)


def fit(tmp_path: Path, run_id: str | None = None) -> tuple[Regression, ModelCheckpoint]:
    """Fit on 4 batches a epoch; with `run_id` the logger continues that run (a job's, as docs/mlflow.md has it)."""
    torch.manual_seed(0)
    x = torch.randn(BATCHES * 4, 4)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)
    module = Regression()
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "checkpoints", every_n_train_steps=SAVE_STEPS, save_top_k=-1)
    logger = MLFlowLogger(experiment_name="tiny lightning", run_name="regression", run_id=run_id,
                          tracking_uri=os.environ["MLFLOW_TRACKING_URI"], log_model=True)
    trainer = lightning.Trainer(max_epochs=EPOCHS, logger=logger, callbacks=[checkpoints], log_every_n_steps=1,
                                accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
                                default_root_dir=tmp_path)
    trainer.fit(module, data)
    return module, checkpoints


def assert_kept(run: Run, module: Regression, checkpoints: ModelCheckpoint, tmp_path: Path) -> None:
    """The run holds every loss the module logged at its step and every checkpoint saved, and ended."""
    assert run.status == RunStatus.FINISHED
    # Every step's loss as the module logged it (Lightning sends the float of the tensor) and the epoch beside it.
    expected = {("train_loss", step): loss for step, loss in enumerate(module.losses)}
    expected |= {("epoch", step): step // BATCHES for step in range(EPOCHS * BATCHES)}
    assert {(point.key, point.step): point.value for point in stored_points(run.pk)} == expected

    saved = sorted((tmp_path / "checkpoints").iterdir())
    assert [path.name for path in saved] == ["epoch=0-step=4.ckpt", "epoch=1-step=8.ckpt"]
    kept = {artifact.path: artifact for artifact in Artifact.objects.filter(run=run)}
    assert set(kept) == {f"{path.stem}/{name}" for path in saved
                         for name in (path.name, "metadata.yaml", "aliases.txt")}
    for path in saved:
        artifact = kept[f"{path.stem}/{path.name}"]
        assert artifact.size == path.stat().st_size
        with artifact_services.read(run, artifact) as stream:
            assert stream.read() == path.read_bytes(), path.name
    with artifact_services.read(run, kept[f"{Path(checkpoints.best_model_path).stem}/aliases.txt"]) as stream:
        assert stream.read() == b"['latest', 'best']"


@live
def test_a_users_lightning_run_keeps_hyperparameters_losses_and_checkpoints(tenant, use_mlflow,  # noqa: F811
                                                                            tmp_path):
    use_mlflow(user_token(tenant.users["member"]))
    module, checkpoints = fit(tmp_path)

    run = Run.objects.get()
    assert (run.project, run.experiment.name, run.name, run.user) == (
        tenant.project, "tiny lightning", "regression", tenant.users["member"])
    assert run.params == {"learning_rate": "0.05"}
    assert_kept(run, module, checkpoints, tmp_path)


@live
def test_a_jobs_lightning_run_continues_the_jobs_run_with_its_run_token(tenant, run, job_of_run, monkeypatch,
                                                                        use_mlflow, tmp_path):  # noqa: F811
    use_mlflow(run_token(run.pk, 1))
    monkeypatch.setenv("MLFLOW_RUN_ID", str(run.pk))  # as the job's environment has it
    module, checkpoints = fit(tmp_path, run_id=os.environ["MLFLOW_RUN_ID"])

    assert list(Run.objects.values_list("pk", flat=True)) == [run.pk]
    run.refresh_from_db()
    assert (run.experiment.name, run.name, run.params) == (
        "sweep", "lr-3e-4", {"lr": "0.0003", "learning_rate": "0.05"})
    assert_kept(run, module, checkpoints, tmp_path)


@live
def test_a_token_of_another_project_stops_fit_and_writes_nothing(tenant, use_mlflow, tmp_path):  # noqa: F811
    use_mlflow(user_token(tenant.users["outsider"]), project="vision")
    with pytest.raises(MlflowException) as raised:
        fit(tmp_path)
    assert raised.value.error_code == "RESOURCE_DOES_NOT_EXIST" and "No project 'vision'" in str(raised.value)
    assert not (tmp_path / "checkpoints").exists()  # stopped before its first step
    assert not Run.objects.exists() and not Experiment.objects.filter(name="tiny lightning").exists()
    assert not Series.objects.exists() and not Artifact.objects.exists()
