"""gunicorn's configuration of the web service: `gunicorn -c mlplatform/gunicorn.conf.py` (Dockerfile,
docker-compose.yml). docs/reliability.md ("Followed logs") says why it is so.

A followed log (`GET /api/v1/jobs/<id>/logs/?follow=true`) holds whoever serves it for its whole stream. A sync
worker serves one request at a time, so with sync workers each follower took a whole process, and a few stopped
the API. Threaded workers (gthread) serve a request per thread; each process streams at most
TIDAL_LOG_STREAMS_PER_PROCESS logs (the app answers 429 beyond), fewer than its threads, so the other threads always
answer requests. Every stream ends, with a cursor to resume from, after TIDAL_LOG_FOLLOW_MAX_SECONDS, before
`graceful_timeout`: a restart lets every stream finish its body properly instead of cutting it.

gunicorn reads the environment here; the app reads the same variables, with the same defaults, in its settings.
"""

from core.env import env_float, env_int

bind = "0.0.0.0:8000"
wsgi_app = "mlplatform.wsgi:application"
worker_class = "gthread"
workers = env_int("TIDAL_WEB_WORKERS", 4, minimum=1)
threads = env_int("TIDAL_WEB_THREADS", 8, minimum=2)
# Room above Tidal's own 4,096-byte limit on addresses, which answers in the API's shape.
limit_request_line = 8190

_streams = env_int("TIDAL_LOG_STREAMS_PER_PROCESS", 4, minimum=1)
_stream_seconds = env_float("TIDAL_LOG_FOLLOW_MAX_SECONDS", 25.0, minimum=1.0)
if _streams >= threads:
    raise SystemExit(f"TIDAL_LOG_STREAMS_PER_PROCESS ({_streams}) must be below TIDAL_WEB_THREADS ({threads}): "
                     "the threads left answer the requests while the others stream logs")
# A gthread worker's main loop keeps telling the master it is alive while its threads serve, so `timeout` never cuts
# a long stream; a restart waits `graceful_timeout` for requests in flight, which outlasts any stream.
timeout = 30
graceful_timeout = max(30, int(_stream_seconds) + 5)
# Kept-alive connections wait in the worker's poller, not on a thread, so they cost little. The client side must
# close an idle one first: gunicorn's default of 2 s closed it under clients that keep theirs longer (httpx 5 s, a
# load balancer's 60 s), and a request sent as it closed got no answer (a ReadError, a proxy's 502).
keepalive = env_int("TIDAL_WEB_KEEPALIVE", 75, minimum=1)
