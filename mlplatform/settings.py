"""Tidal settings: one module, every value read from the environment (see docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_rate,
    env_secret,
    env_str,
    require_strong_secret,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY", "dev-only-insecure-secret-key-change-me-0123456789abcdef" if DEBUG else None)
if not DEBUG:
    require_strong_secret("SECRET_KEY", SECRET_KEY)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "mlplatform",
    "core",
    "tenancy",
    "notifications",
    "quotas",
    "jobs",
    "clusters",
    "replays",
    "tracking",
    "telemetry",
    "costs",
    "reliability",
    "pools",
    "serving",
]

MIDDLEWARE = [
    "mlplatform.metrics.PrometheusMiddleware",
    "mlplatform.errorpages.AddressLimits",
    "django.middleware.security.SecurityMiddleware",
    "core.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tenancy.middleware.RoleMemoMiddleware",
    "tenancy.middleware.CurrentProjectMiddleware",
    "mlplatform.errorpages.UnknownAddresses",
]

ROOT_URLCONF = "mlplatform.urls"
WSGI_APPLICATION = "mlplatform.wsgi.application"
ASGI_APPLICATION = "mlplatform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tenancy.context.navigation",
            ],
        },
    },
]

# SQLite under var/ unless DATABASE_URL says otherwise (PostgreSQL through psycopg 3 in production and CI).
DEFAULT_DATABASE_URL = f"sqlite:///{VAR_DIR / 'tidal.sqlite3'}"
DATABASE_URL = env_secret("DATABASE_URL", DEFAULT_DATABASE_URL)
if DATABASE_URL == DEFAULT_DATABASE_URL:
    VAR_DIR.mkdir(exist_ok=True)  # a fresh clone has no var/ yet; SQLite cannot create the folder itself
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded server, scheduler thread, simulated cluster and demo jobs' logging write from several threads;
    # in WAL mode pages keep reading while a batch of points is written.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis is optional: without REDIS_URL Tidal runs embedded (tasks in-process, local-memory cache).
REDIS_URL = env_secret("REDIS_URL", "")
EMBEDDED = REDIS_URL == ""
if EMBEDDED:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or None
CELERY_TASK_ALWAYS_EAGER = EMBEDDED
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
# Task modules autodiscovery (`<app>.tasks`) does not find: the Kubernetes clusters' periodic tasks, which keep their
# names of `clusters.tasks` (the beat schedule below uses them).
CELERY_IMPORTS = ["clusters.backends.kubernetes.tasks"]
CELERY_BEAT_SCHEDULE = {
    # What the simulated clusters' attempts do; Kubernetes clusters add their resync, node sync and sweep below.
    "simulated-observe": {"task": "clusters.tasks.observe_simulated_task", "schedule": 2.0},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# A mail server (EMAIL_HOST) also turns on alert e-mails to project owners and admins (notifications.send.to_members).
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                        else "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tidal@localhost")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
                    ("vendor/uplot", BASE_DIR / "node_modules" / "uplot" / "dist")]
WHITENOISE_USE_FINDERS = True

# HTTPS when DEBUG is off: redirect HTTP to it, tell browsers to use nothing else (HSTS), keep the cookies off plain
# HTTP. Behind a proxy that terminates TLS, either let the proxy redirect (TIDAL_SSL_REDIRECT=0) or name the header
# it marks HTTPS requests with (TIDAL_PROXY_SSL_HEADER=X-Forwarded-Proto; the proxy must set or strip it).
SECURE_SSL_REDIRECT = env_bool("TIDAL_SSL_REDIRECT", not DEBUG)
# Health probes and metric scrapes come over plain HTTP from inside the deployment (compose, kubelet, Prometheus).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("TIDAL_HSTS_SECONDS", 0 if DEBUG else 365 * 86400, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TIDAL_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("TIDAL_HSTS_PRELOAD", False)
_PROXY_SSL_HEADER = env_str("TIDAL_PROXY_SSL_HEADER", "")
SECURE_PROXY_SSL_HEADER = (f"HTTP_{_PROXY_SSL_HEADER.upper().replace('-', '_')}", "https") if _PROXY_SSL_HEADER \
    else None
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", SESSION_COOKIE_SECURE)
# Preloading (security.W021) puts the domain in browsers' built-in HSTS lists: anyone may submit a domain whose
# header says `preload`, so it stays the domain owner's decision (TIDAL_HSTS_PRELOAD=1), not a default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
# The Content-Security-Policy header of every response (core/csp.py): scripts, styles, images and fonts from this
# origin only.
TIDAL_CONTENT_SECURITY_POLICY = env_str(
    "TIDAL_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")

# Request bodies (core/parsers.py, docs/security.md): JSON or YAML nesting lists and mappings deeper than this is
# refused with a 400. The size limit of JSON bodies is Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB).
TIDAL_MAX_BODY_DEPTH = env_int("TIDAL_MAX_BODY_DEPTH", 32, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenancy.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.PageNumberPagination",
    # DRF's JSON parser reads any size and depth; these refuse what is over the limits above (and NUL characters).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "core.parsers.FormParser",
        "core.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "core.filters.StrictOrderingFilter",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["tenancy.throttling.PerUserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_rate("TIDAL_API_THROTTLE_RATE", "3000/min"),  # per user, whichever of their tokens
        "anon": env_rate("TIDAL_API_ANON_THROTTLE_RATE", "60/min"),
        # Per attempt for its run token (a job's requests, jobs.auth.AttemptThrottle), and per user for logging points,
        # params and tags (tracking.auth.LoggingThrottle).
        "run": env_rate("TIDAL_TRACKING_THROTTLE_RATE", "60000/min"),
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tidal API",
    "DESCRIPTION": "Multi-tenant ML training platform: projects, quotas, jobs and the scheduling queue, experiment "
                   "tracking (MLflow's own tracking API is served too, under /mlflow/<project>/: see docs/mlflow.md).",
    # Two models name a field `status` with their own choices: a replay run's and a tracking run's.
    "ENUM_NAME_OVERRIDES": {"ReplayRunStatusEnum": "replays.models.RunStatus",
                            "TrackingRunStatusEnum": "tracking.models.RunStatus"},
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The enum hook is drf-spectacular's default; core.openapi documents every operation's refusals.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.openapi.document_errors"],
}

# Brute-force protection (tenancy/throttling.py): this many wrong passwords for one account (from the clients it never
# signed in with, together, or from one browser it did), or failed bearer tokens from one address, within the
# window lock them out for the cool-off (seconds); password reset requests per account and per client address.
TIDAL_LOCKOUT = {
    "LOGIN_FAILURES": env_int("TIDAL_LOGIN_FAILURE_LIMIT", 5, minimum=1),
    "TOKEN_FAILURES": env_int("TIDAL_TOKEN_FAILURE_LIMIT", 20, minimum=1),
    "RESETS_PER_ACCOUNT": env_int("TIDAL_PASSWORD_RESET_LIMIT", 3, minimum=1),
    "RESETS_PER_ADDRESS": env_int("TIDAL_PASSWORD_RESET_ADDRESS_LIMIT", 20, minimum=1),
    "WINDOW": env_int("TIDAL_FAILURE_WINDOW", 900, minimum=1),
    "COOL_OFF": env_int("TIDAL_LOCKOUT_SECONDS", 900, minimum=1),
}

# Reverse proxies whose X-Forwarded-For is believed (core/addresses.py): addresses or CIDRs. Empty: none, the
# client is REMOTE_ADDR.
TIDAL_TRUSTED_PROXIES = env_networks("TIDAL_TRUSTED_PROXIES", [])

# /metrics (mlplatform/metrics.py): with a token, only requests bearing it; without, direct connections from these
# addresses.
TIDAL_METRICS_TOKEN = env_secret("TIDAL_METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_networks("METRICS_ALLOWED_IPS", ["127.0.0.1", "::1"])

# Scheduling and the simulated cluster (read by jobs/ and clusters/).
TIDAL = {
    "BACKEND": env_choice("TIDAL_BACKEND", "simulated", ("simulated", "kubernetes")),
    "SCHEDULER_INTERVAL": env_float("TIDAL_SCHEDULER_INTERVAL", 5.0, minimum=0.1),
    "EMBEDDED_LOOP": env_bool("TIDAL_EMBEDDED_LOOP", False),
    "SIM_START_DELAY": env_float("TIDAL_SIM_START_DELAY", 2.0, minimum=0.0),
    # An attempt still admitted (or dispatching with objects missing) this long after its admission lost its
    # dispatch task (its worker died, Redis lost the queue): the periodic observation dispatches it again.
    "REDISPATCH_AFTER": env_float("TIDAL_REDISPATCH_AFTER", 60.0, minimum=1.0),
    # Estimated starts: the scheduler run forward after each cycle, at most this many simulated cycles and seconds.
    "ETA_STEPS": env_int("TIDAL_ETA_STEPS", 200, minimum=0),
    "ETA_SECONDS": env_float("TIDAL_ETA_SECONDS", 1.0, minimum=0.0),
    "POLICY": {
        "ordering": env_choice("TIDAL_POLICY_ORDERING", "priority-fairshare", ("priority-fairshare", "fifo")),
        "blocking": env_choice("TIDAL_POLICY_BLOCKING", "backfill", ("backfill", "skip", "strict")),
        "preemption": env_bool("TIDAL_POLICY_PREEMPTION", True),
        "borrowing": env_bool("TIDAL_POLICY_BORROWING", True),
        # Fair share's memory, the same for the live scheduler and for replays of the current configuration.
        "usage_half_life": env_float("TIDAL_FAIR_SHARE_HALF_LIFE", 7 * 86400.0, minimum=1.0),
        # Seconds a job waits before preempting other projects' jobs (capacity freeing meanwhile spares them).
        "reclaim_grace": env_float("TIDAL_RECLAIM_GRACE", 0.0, minimum=0.0),
        # Seconds a project's recent use and submissions are kept from lending (borrow-then-reclaim churn). 0: off.
        "lend_hold": env_float("TIDAL_LEND_HOLD", 5.0, minimum=0.0),
        # Seconds after a job was queued before a reservation for it may start (the jobs behind it that end by then
        # may use its room meanwhile). 0: at its earliest start.
        "reserve_after": env_float("TIDAL_POLICY_RESERVE_AFTER", 4 * 3600.0, minimum=0.0),
    },
    # Kubernetes clusters (read by clusters/; see docs/kubernetes.md).
    # Kubeconfigs' Fernet key(s), apart from SECRET_KEY (rotating one must not lose the other); derived from
    # SECRET_KEY only in development (clusters/crypto.py).
    "ENCRYPTION_KEY": env_secret("TIDAL_ENCRYPTION_KEY", ""),
    "KUBE_INSTANCE": env_str("TIDAL_KUBE_INSTANCE", "default"),
    "KUBE_NODE_SYNC_INTERVAL": env_float("TIDAL_KUBE_NODE_SYNC_INTERVAL", 60.0, minimum=1.0),
    "KUBE_RESYNC_INTERVAL": env_float("TIDAL_KUBE_RESYNC_INTERVAL", 30.0, minimum=1.0),
    "KUBE_SWEEP_INTERVAL": env_float("TIDAL_KUBE_SWEEP_INTERVAL", 300.0, minimum=1.0),
    "KUBE_LOG_LINES": env_int("TIDAL_KUBE_LOG_LINES", 50, minimum=0),
    # Seconds a node must stay NotReady before the attempts on it are lost (the kubelet's node-monitor grace): the
    # node-lifecycle controller marks every node NotReady for a moment after an API-server outage.
    "NODE_LOST_GRACE": env_float("TIDAL_NODE_LOST_GRACE", 40.0, minimum=0.0),
    # A followed log stream ends after this long with a cursor to resume from (`tidal logs -f` resumes on its own):
    # under gunicorn's 30 s timeouts and a proxy's 60 s idle timeout, so no server ever cuts one off.
    "LOG_FOLLOW_MAX_SECONDS": env_float("TIDAL_LOG_FOLLOW_MAX_SECONDS", 25.0, minimum=1.0),
    # Concurrent followed logs per user (across every web process) and per web process (fewer than its threads,
    # mlplatform/gunicorn.conf.py: the other threads always answer requests).
    "LOG_STREAMS_PER_USER": env_int("TIDAL_LOG_STREAMS_PER_USER", 4, minimum=1),
    "LOG_STREAMS_PER_PROCESS": env_int("TIDAL_LOG_STREAMS_PER_PROCESS", 4, minimum=1),
    # Where a job's process reaches this server to log its run (TIDAL_URL and MLflow's tracking URI).
    "URL": env_str("TIDAL_URL", "http://127.0.0.1:8000").rstrip("/"),
    # Where runs' artifacts are stored (tracking.artifacts.store): file:///a/folder (default var/artifacts) or
    # s3://bucket/prefix, the S3 endpoint of an S3-compatible store (MinIO) and its region; credentials come from
    # boto3's usual chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance role).
    "ARTIFACT_URL": env_str("TIDAL_ARTIFACT_URL", (VAR_DIR / "artifacts").as_uri()),
    "ARTIFACT_S3_ENDPOINT_URL": env_str("TIDAL_ARTIFACT_S3_ENDPOINT_URL", ""),
    "ARTIFACT_S3_REGION": env_str("TIDAL_ARTIFACT_S3_REGION", ""),
    # The largest single artifact, and the artifact bytes a project may keep in all.
    "ARTIFACT_MAX_BYTES": env_int("TIDAL_ARTIFACT_MAX_BYTES", 50 * 2**30, minimum=0),
    "ARTIFACT_QUOTA_BYTES": env_int("TIDAL_ARTIFACT_QUOTA_BYTES", 500 * 2**30, minimum=0),
    # Raw points of runs ended this many days ago are deleted; their series are read from rollups. 0: keep them.
    "TRACKING_RAW_RETENTION_DAYS": env_int("TIDAL_TRACKING_RAW_RETENTION_DAYS", 0, minimum=0),
    "TRACKING_DELETED_RETENTION_DAYS": env_int("TIDAL_TRACKING_DELETED_RETENTION_DAYS", 30, minimum=0),
    # Cost reports (docs/costs.md): the currency every price is in, and the longest range one report may cover.
    "CURRENCY": env_str("TIDAL_CURRENCY", "USD"),
    "COST_MAX_RANGE_DAYS": env_int("TIDAL_COST_MAX_RANGE_DAYS", 400, minimum=1),
    # Failure diagnosis (docs/reliability-diagnosis.md). Infrastructure failures (lost nodes, NCCL, GPU Xid, hangs)
    # are retried without using a job's retry limit, at most this many times per job.
    "INFRA_RETRY_LIMIT": env_int("TIDAL_INFRA_RETRY_LIMIT", 10, minimum=0),
    # A node is quarantined (nothing new placed there) after this many hardware-class failures within the window
    # (seconds), or at once after one Xid 79, 48 or an uncorrectable ECC error. Off: diagnoses only.
    "QUARANTINE_ENABLED": env_bool("TIDAL_QUARANTINE_ENABLED", True),
    "QUARANTINE_FAILURES": env_int("TIDAL_QUARANTINE_FAILURES", 2, minimum=1),
    "QUARANTINE_WINDOW": env_float("TIDAL_QUARANTINE_WINDOW", 86400.0, minimum=1.0),
    "QUARANTINE_CORDON": env_bool("TIDAL_QUARANTINE_CORDON", False),
    # Hang detection: a running job's run with no new step for max(factor x its recent step time, minimum seconds).
    "HANG_STEP_FACTOR": env_float("TIDAL_HANG_STEP_FACTOR", 2.0, minimum=1.0),
    "HANG_MIN_SECONDS": env_float("TIDAL_HANG_MIN_SECONDS", 60.0, minimum=1.0),
    "HANG_CHECK_INTERVAL": env_float("TIDAL_HANG_CHECK_INTERVAL", 5.0, minimum=1.0),
    # GPU telemetry (docs/telemetry.md): the Prometheus that scrapes the clusters' DCGM exporters ("" : none; the
    # simulated clusters make their own), its bearer token, how often it is read, the resolution of what is stored
    # (seconds between points), the longest stretch one read asks for, how far behind now reads stay (a scrape
    # lands late), how far back a cluster's first read starts, and the HTTP timeout.
    "PROMETHEUS_URL": env_str("TIDAL_PROMETHEUS_URL", "").rstrip("/"),
    "PROMETHEUS_TOKEN": env_secret("TIDAL_PROMETHEUS_TOKEN", ""),
    "TELEMETRY_INTERVAL": env_float("TIDAL_TELEMETRY_INTERVAL", 60.0, minimum=1.0),
    "TELEMETRY_STEP": env_int("TIDAL_TELEMETRY_STEP", 15, minimum=1),
    "TELEMETRY_WINDOW": env_int("TIDAL_TELEMETRY_WINDOW", 600, minimum=1),
    "TELEMETRY_DELAY": env_int("TIDAL_TELEMETRY_DELAY", 30, minimum=0),
    "TELEMETRY_LOOKBACK": env_int("TIDAL_TELEMETRY_LOOKBACK", 3600, minimum=1),
    "TELEMETRY_TIMEOUT": env_float("TIDAL_TELEMETRY_TIMEOUT", 10.0, minimum=0.1),
    "TELEMETRY_WRITE_EVERY": env_int("TIDAL_TELEMETRY_WRITE_EVERY", 60, minimum=0),
    "COST_MAX_HOURLY_DAYS": env_int("TIDAL_COST_MAX_HOURLY_DAYS", 7, minimum=1),
    # A project's day of spend over this multiple of the median of the days before it alerts (docs/costs.md).
    "COST_ANOMALY_MULTIPLE": env_float("TIDAL_COST_ANOMALY_MULTIPLE", 3.0, minimum=1.01),
    "COST_ANOMALY_TRAILING_DAYS": env_int("TIDAL_COST_ANOMALY_TRAILING_DAYS", 14, minimum=3),
}
if not DEBUG and not TIDAL["ENCRYPTION_KEY"]:
    raise ImproperlyConfigured(
        "TIDAL_ENCRYPTION_KEY (or TIDAL_ENCRYPTION_KEY_FILE) must be set when DEBUG is off: the key stored "
        "kubeconfigs are encrypted with. Generate one with python -c \"from cryptography.fernet import Fernet; "
        "print(Fernet.generate_key().decode())\" (docs/configuration.md: keeping kubeconfigs saved before readable)")
# Kubernetes clusters: full status resync (the watch runs in `manage.py run_reconciler`), node inventory sync and
# the orphan sweep. Each is a no-op while no cluster has backend = kubernetes.
CELERY_BEAT_SCHEDULE.update({
    "kube-resync": {"task": "clusters.tasks.kube_resync_task", "schedule": TIDAL["KUBE_RESYNC_INTERVAL"]},
    "kube-node-sync": {"task": "clusters.tasks.kube_sync_nodes_task", "schedule": TIDAL["KUBE_NODE_SYNC_INTERVAL"]},
    "kube-orphan-sweep": {"task": "clusters.tasks.kube_sweep_orphans_task", "schedule": TIDAL["KUBE_SWEEP_INTERVAL"]},
    # Running jobs whose run stopped logging steps (docs/alerts.md).
    "tracking-hung-runs": {"task": "tracking.tasks.check_hung_runs", "schedule": 60.0},
    "tracking-raw-retention": {"task": "tracking.tasks.prune_raw_points", "schedule": 3600.0},
    "tracking-artifact-uploads": {"task": "tracking.tasks.sweep_artifact_uploads", "schedule": 3600.0},
    "tracking-deleted-runs": {"task": "tracking.tasks.purge_deleted_runs", "schedule": 3600.0},
    # Closed usage segments cut into priced days (docs/costs.md).
    "costs-roll-segments": {"task": "costs.tasks.roll_segments", "schedule": 60.0},
    # Budget thresholds crossed this month: alerted once each (docs/costs.md#budgets).
    "costs-check-budgets": {"task": "costs.tasks.check_budgets", "schedule": 60.0},
    # Running jobs whose run stopped progressing for max(2 x its step time, 60 s) (docs/reliability-diagnosis.md).
    "reliability-hangs": {"task": "reliability.tasks.check_hangs", "schedule": TIDAL["HANG_CHECK_INTERVAL"]},
    # GPU telemetry read from Prometheus (docs/telemetry.md): a no-op without TIDAL_PROMETHEUS_URL.
    "telemetry-read": {"task": "telemetry.tasks.read_telemetry", "schedule": TIDAL["TELEMETRY_INTERVAL"]},
    # A day's spend over a multiple of its trailing median: alerted once per project and day (docs/costs.md).
    "costs-check-spend-anomalies": {"task": "costs.tasks.check_spend_anomalies", "schedule": 300.0},
    # Services scaled with the HPA's rules on their metric (docs/pools.md#services).
    "serving-autoscale": {"task": "serving.tasks.autoscale_services", "schedule": 5.0},
})
# Alert webhooks may target private, loopback and link-local addresses only when this is on (a private deployment).
TIDAL_WEBHOOK_ALLOW_PRIVATE = env_bool("TIDAL_WEBHOOK_ALLOW_PRIVATE", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice(
        "LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
}
