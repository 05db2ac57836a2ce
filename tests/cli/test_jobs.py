"""Submit a job from a YAML file, then follow it with jobs, job, queue, quota, cancel and resubmit."""

from __future__ import annotations

import pytest

from jobs import loop
from tests.cli.conftest import EXAMPLES

pytestmark = pytest.mark.django_db(transaction=True)


def submit(cli, path, *extra, user="member") -> int:
    result = cli("submit", str(path), "--project", "vision", *extra, user=user)
    assert result.code == 0, result.err
    return int(result.out.split()[2])


def test_submit_prints_id_state_and_wait_reason(cli, job_file):
    result = cli("submit", str(job_file()), "--project", "vision")
    assert result.code == 0, result.err
    assert result.out.startswith("Submitted job ")
    assert "to project vision: queued" in result.out
    assert "reason:" in result.out and "waiting for the next scheduling cycle" in result.out
    assert "tidal job " in result.out


def test_follow_a_job_through_jobs_job_queue_and_cancel(cli, job_file):
    first = submit(cli, job_file(name="first"))
    submit(cli, job_file(name="borrower"))
    second = submit(cli, job_file(name="second"))
    loop.run_once()  # 16 guaranteed H100 + 16 borrowed: vision is at its borrow limit, the third job waits

    jobs = cli("jobs")
    assert jobs.code == 0
    lines = {line.split()[0]: line for line in jobs.out.splitlines()[1:]}
    assert {str(first), str(second)} <= set(lines)
    assert "queued" in lines[str(second)] and "dispatching" in lines[str(first)]

    queue = cli("queue", "--project", "vision")
    assert queue.code == 0
    assert queue.out.splitlines()[0].split()[:3] == ["FLAVOR", "POS", "PROJ"]
    row = next(line for line in queue.out.splitlines() if f" {second} " in line)
    assert "nvidia-h100-80gb" in row and "second" in row and "(range " in row  # its start, with a range
    assert str(first) not in [line.split()[3] for line in queue.out.splitlines()[1:]]

    detail = cli("job", str(second))
    assert detail.code == 0
    assert detail.out.startswith(f"Job {second}  second  [queued]")
    for section in ("Replica groups", "Waiting", "Events", "estimated start", "position:", "new -> queued"):
        assert section in detail.out
    admitted = cli("job", str(first))
    assert "Placement on sim-1" in admitted.out and "queued -> admitted" in admitted.out

    quota = cli("quota", "--project", "vision")
    assert quota.code == 0
    h100 = next(line for line in quota.out.splitlines() if "nvidia-h100-80gb" in line)
    assert h100.split()[2:5] == ["16", "32", "16"]  # guaranteed, used, borrowed
    assert "[##########|++++++++++]" in h100

    cancelled = cli("cancel", str(second))
    assert cancelled.code == 0 and f"Cancelled job {second}" in cancelled.out and "cancelled" in cancelled.out
    assert str(second) not in [line.split()[0] for line in cli("jobs").out.splitlines()[1:]]
    assert str(second) in [line.split()[0] for line in cli("jobs", "--all").out.splitlines()[1:]]
    assert "queued -> cancelled" in cli("job", str(second)).out
    assert cli("queue").out.strip() == "The queue is empty: nothing is waiting."

    again = cli("cancel", str(second))
    assert again.code == 1 and "already cancelled" in again.err

    resubmitted = cli("resubmit", str(second))
    assert resubmitted.code == 0, resubmitted.err
    assert f"Resubmitted job {second} as job " in resubmitted.out and ": queued" in resubmitted.out


def test_json_output_parses(cli, job_file):
    submitted = cli("submit", str(job_file()), "--project", "vision", "--json")
    assert submitted.code == 0
    job = submitted.json()
    assert job["state"] == "queued" and job["waiting"]["reason"]
    assert [j["id"] for j in cli("jobs", "--json").json()] == [job["id"]]
    assert cli("job", str(job["id"]), "--json").json()["groups"][0]["flavor"] == "nvidia-h100-80gb"
    assert [j["id"] for j in cli("queue", "--json").json()] == [job["id"]]
    quotas = cli("quota", "--json").json()
    assert {(q["flavor"], q["guaranteed"]) for q in quotas} == {("nvidia-h100-80gb", 16), ("nvidia-a100-40gb", 32)}
    assert {f["name"] for f in cli("flavors", "--json").json()} == {
        "nvidia-h100-80gb", "nvidia-a100-40gb", "ascend-910b"}
    assert "normal" in {p["name"] for p in cli("priority-classes", "--json").json()}
    assert cli("whoami", "--json").json()["username"] == "member"
    assert cli("cancel", str(job["id"]), "--json").json()["state"] == "cancelled"
    assert cli("resubmit", str(job["id"]), "--json").json()["id"] != job["id"]


def test_jobs_filters_by_state_and_project(cli, job_file):
    job = submit(cli, job_file())
    assert cli("jobs", "--state", "running").out.strip() == "No jobs."
    assert str(job) in cli("jobs", "--state", "running,queued").out
    assert str(job) in cli("jobs", "--state", "running", "--state", "queued").out
    assert str(job) in cli("jobs", "--project", "vision").out
    refused = cli("jobs", "--project", "secret")  # another tenant's project: an error, as if it did not exist
    assert refused.code == 1 and refused.out == "" and "No project named 'secret'" in refused.err
    assert cli("jobs", "--state", "sleeping").code == 2


@pytest.mark.parametrize("example", ["pytorch-ddp.yaml", "deepspeed.yaml", "megatron.yaml", "ray.yaml",
                                     "elastic-ddp.yaml"])
def test_shipped_examples_are_accepted(cli, example):
    result = cli("submit", str(EXAMPLES / example), "--json")
    assert result.code == 0, result.err
    job = result.json()
    assert job["project"] == "vision" and job["state"] == "queued"


def test_project_and_name_come_from_flags_then_file_then_default(cli, job_file, monkeypatch):
    path = job_file()
    missing = cli("submit", str(path))
    assert missing.code == 1 and "no project" in missing.err
    monkeypatch.setenv("TIDAL_PROJECT", "vision")
    assert cli("submit", str(path), "--json").json()["project"] == "vision"
    assert cli("submit", str(path), "--name", "renamed", "--json").json()["name"] == "renamed"
    in_file = job_file(extra="project: secret\n")
    refused = cli("submit", str(in_file))  # the file's project wins over the default: not one of member's
    assert refused.code == 1 and "project" in refused.err
    assert cli("submit", str(in_file), "--project", "vision", "--json").json()["project"] == "vision"


def test_flavors_and_priority_classes_tables(cli):
    flavors = cli("flavors")
    assert flavors.code == 0 and flavors.out.splitlines()[0].startswith("FLAVOR")
    assert "huawei.com/Ascend910" in flavors.out
    classes = cli("priority-classes")
    assert [line.split()[0] for line in classes.out.splitlines()[1:]] == ["high", "normal", "low", "preemptible"]


def test_submit_wait_shows_the_schedulers_explanation(cli, job_file, monkeypatch):
    from tidal_cli.commands import jobs as jobs_command

    submit(cli, job_file(name="first"))
    submit(cli, job_file(name="borrower"))
    monkeypatch.setattr(jobs_command, "sleep", lambda seconds: loop.run_once())  # the scheduler decides meanwhile
    result = cli("submit", str(job_file(name="third")), "--project", "vision", "--wait", "5")
    assert result.code == 0, result.err
    assert "queued" in result.out and "so it would borrow 32, over its borrow limit of 16" in result.out
    assert "position:        #1 in project vision, #1 in the nvidia-h100-80gb queue" in result.out
    assert "estimated start: in " in result.out


def test_quiet_submit_prints_only_the_id_for_scripts(cli, job_file):
    result = cli("submit", str(job_file()), "--project", "vision", "--quiet")
    assert result.code == 0, result.err
    job = int(result.out)  # the whole output is the id
    assert cli("job", str(job), "--json").json()["state"] == "queued"
    assert cli("submit", str(job_file()), "--project", "vision", "--quiet", "--json").code == 2


def test_tidal_job_shows_the_diagnosis_of_a_failed_attempt(cli, tenant, demo_cluster):
    from jobs.lifecycle import AttemptEnd, transition
    from jobs.states import State
    from quotas.models import ResourceFlavor
    from tests.jobs.conftest import run, submit

    node = demo_cluster.nodes.filter(flavor__name="nvidia-a100-40gb").first()
    job = run(submit(tenant, ResourceFlavor.objects.get(name="nvidia-a100-40gb"), devices=1), demo_cluster,
              [node.name])
    transition(job, State.FAILED, reason="failed", actor="backend", end=AttemptEnd(
        cause="user_error", exit_code=1, logs={"worker-0": [
            "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]}))
    shown = cli("job", str(job.pk))
    assert shown.code == 0, shown.err
    assert "Diagnosis" in shown.out and "attempt 1: cuda_oom (mixed, confidence 0.9" in shown.out
    assert "action: Reduce the batch size" in shown.out
    assert "[log worker-0 line 3] torch.OutOfMemoryError: CUDA out of memory" in shown.out
    assert cli("job", str(job.pk), "--json").json()["diagnoses"][0]["cause"] == "cuda_oom"
