"""`tidal logs` against a live server: the tail, errors, and --follow reading the server's stream."""

import re

import pytest
from tidal_cli.client import Api
from tidal_cli.commands import logs as logs_command
from tidal_cli.main import main

from clusters.backends import simulated
from jobs.lifecycle import transition
from jobs.loop import run_once
from jobs.models import Job
from jobs.states import State
from tenancy.services import token_create
from tests.clusters.test_kubernetes_backend import NS, pods_of
from tests.jobs.conftest import submit


@pytest.mark.django_db(transaction=True)
def test_logs_of_a_running_replica_and_errors(cli, job_file):
    submitted = cli("submit", str(job_file()), "--project", "vision")
    assert submitted.code == 0, submitted.err
    job = re.search(r"\d+", submitted.out).group()
    run_once()
    shown = cli("logs", job, "--replica", "worker-1")
    assert shown.code == 0, shown.err
    assert "replica worker-1" in shown.out and "[simulated]" in shown.out
    bad = cli("logs", job, "--replica", "worker-7")
    assert bad.code == 1 and "Unknown replica" in bad.err
    assert cli("logs", job, user="outsider").err.startswith(f"tidal: Job {job} not found")


@pytest.mark.django_db(transaction=True)
def test_follow_resumes_each_paused_stream_until_the_replica_ends(cli, job_file, settings, monkeypatch):
    """The server pauses the stream every 0.3 s; `tidal logs -f` resumes it at once from its cursor, printing neither
    the cursor lines nor the first line again; the job ends while the third stream is over, and the fourth says so
    and ends the command."""
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.3}
    monkeypatch.setattr(simulated, "FOLLOW_INTERVAL", 0.05)
    job = re.search(r"\d+", cli("submit", str(job_file()), "--project", "vision").out).group()
    run_once()
    streams = []
    stream_lines = Api.stream_lines

    def stream_then_end_the_job(api, path, **query):  # the command's own streams, counted
        streams.append(query)
        yield from stream_lines(api, path, **query)
        if len(streams) == 3:
            transition(Job.objects.get(pk=job), State.SUCCEEDED, reason="done", actor="backend")

    monkeypatch.setattr(Api, "stream_lines", stream_then_end_the_job)
    shown = cli("logs", job, "--replica", "worker-1", "--follow")
    assert shown.code == 0, shown.err
    printed = shown.out.splitlines()
    assert printed[0].startswith("[simulated] cluster") and len(printed) >= 8
    assert set(printed[1:-1]) == {f"[simulated] job {job} attempt 1 replica worker-1 is dispatching."}
    assert printed[-1] == "# no log kept for worker-1: attempt 1 ended (succeeded)"
    assert len(streams) == 4 and "cursor" not in streams[0] and streams[0]["tail"] == 200
    assert all(query["cursor"].startswith("1:") and "tail" not in query for query in streams[1:])
    gone = cli("logs", job, "--follow", user="outsider")
    assert gone.code == 1 and gone.err.startswith(f"tidal: Job {job} not found")


@pytest.mark.django_db(transaction=True)
def test_follow_of_a_pod_log_gives_every_line_once_across_resumes(live_server, tenant, kube_inventory, kube,
                                                                   settings, monkeypatch, capsys):
    """A Kubernetes pod's log followed through two pauses: each resumed stream starts at the second of the last line
    printed (the API server's sinceTime has whole seconds), and the command prints each line exactly once."""
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.3}
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    run_once()
    pod = next(iter(pods_of(kube, Job.objects.get(pk=job.pk))))
    log = kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"]
    # The first request, the second, then the others (kmock slices requests by their order).
    log[:1] << (b"2026-05-01T10:00:07Z step 7\n2026-05-01T10:00:07Z step 7 again\n", ...)  # silent, still open
    log[1:2] << (b"2026-05-01T10:00:07Z step 7\n2026-05-01T10:00:07Z step 7 again\n2026-05-01T10:00:07Z step 7 "
                 b"thrice\n2026-05-01T10:00:08Z step 8\n", ...)
    log << (b"2026-05-01T10:00:08Z step 8\n2026-05-01T10:00:09Z step 9\n")  # then the container ends
    monkeypatch.setenv("TIDAL_URL", live_server.url)
    monkeypatch.setenv("TIDAL_TOKEN", token_create(user=tenant.users["member"], name="cli")[1])
    capsys.readouterr()
    assert main(["logs", str(job.pk), "--follow", "--tail", "5"]) == 0
    assert capsys.readouterr().out.splitlines() == ["step 7", "step 7 again", "step 7 thrice", "step 8", "step 9"]
    assert [request.params.get("sinceTime") for request in log] == [
        None, "2026-05-01T10:00:07Z", "2026-05-01T10:00:08Z"]


@pytest.mark.django_db(transaction=True)
def test_follow_waits_while_the_server_is_busy_streaming(cli, job_file, settings, monkeypatch, clients):
    """Every stream place of the process is taken: the server answers 429 (streams_busy) with Retry-After, and the
    command waits that long and tries again instead of failing."""
    settings.TIDAL = {**settings.TIDAL, "LOG_STREAMS_PER_PROCESS": 1, "LOG_FOLLOW_MAX_SECONDS": 0.3}
    monkeypatch.setattr(simulated, "FOLLOW_INTERVAL", 0.05)
    job = re.search(r"\d+", cli("submit", str(job_file()), "--project", "vision").out).group()
    run_once()
    held = clients["viewer"].get(f"/api/v1/jobs/{job}/logs/?follow=true")  # takes the place, read by nobody
    waits = []

    def wait(seconds):
        waits.append(seconds)
        held.close()  # meanwhile, that stream ends

    monkeypatch.setattr(logs_command, "_sleep", wait)
    stream_lines = Api.stream_lines

    def stream_then_end_the_job(api, path, **query):  # the job ends after the first stream served
        yield from stream_lines(api, path, **query)
        if Job.objects.get(pk=job).state != State.SUCCEEDED:
            transition(Job.objects.get(pk=job), State.SUCCEEDED, reason="done", actor="backend")

    monkeypatch.setattr(Api, "stream_lines", stream_then_end_the_job)
    shown = cli("logs", job, "--follow")
    assert shown.code == 0, shown.err
    assert len(waits) == 1 and 1 <= waits[0] <= 5  # refused once, then served
    printed = shown.out.splitlines()
    assert printed[0].startswith("[simulated] cluster")
    assert printed[-1] == "# no log kept for worker-0: attempt 1 ended (succeeded)"


@pytest.mark.django_db(transaction=True)
def test_attempts_show_in_job_and_an_earlier_attempts_log_stays_readable(cli, job_file):
    """A job whose first attempt lost its node: `tidal job` lists both attempts and why the first ended, and
    `tidal logs --attempt 1` reads what the first attempt kept."""
    from clusters.backends import observe_simulated
    from clusters.models import Node
    from jobs.models import Attempt, Job

    job = cli("submit", str(job_file(replicas=1)), "--project", "vision", "--quiet").out.strip()
    Job.objects.filter(pk=job).update(retry_limit=1, retry_backoff=0)
    run_once()
    first = Attempt.objects.get(job_id=job)
    Node.objects.filter(name=first.placement[0]["node"]).update(ready=False)
    observe_simulated()  # the attempt is lost with its node
    Attempt.objects.filter(pk=first.pk).update(logs={"worker-0": ["epoch 3", "NCCL timeout"]})
    run_once()  # the retry is due at once: attempt 2 runs elsewhere
    detail = cli("job", job)
    assert detail.code == 0, detail.err
    rows = detail.out.split("Attempts", 1)[1].splitlines()[2:4]
    assert rows[0].split()[0] == "1" and "lost" in rows[0] and "node_lost" in rows[0]
    assert rows[1].split()[0] == "2" and "(current)" in rows[1]
    earlier = cli("logs", job, "--attempt", "1")
    assert earlier.code == 0, earlier.err
    assert earlier.out.splitlines()[-2:] == ["epoch 3", "NCCL timeout"]
    assert cli("logs", job, "--attempt", "9").code == 1
