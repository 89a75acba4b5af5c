"""Settings for the control panel, from environment variables with safe local defaults (docs/configuration.md)."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet

from panel import files, signing
from panel.env import (
    env_bool,
    env_int,
    env_list,
    env_port_range,
    env_positive,
    env_str,
    new_django_secret,
    secret_from_file,
)
from panel.schedule import beat_schedule

BASE_DIR = Path(__file__).resolve().parent.parent
RUNNING_AS_ROOT = os.geteuid() == 0

# Everything the panel writes (cluster data directories, certificates, logs, keys, the SQLite
# metadata database) lives under one directory. As root the clusters run as an unprivileged user
# that must traverse every directory on the way, so the default is a system location then.
_default_data_dir = "/var/lib/pgpanel" if RUNNING_AS_ROOT else str(BASE_DIR / "var")
PANEL_DATA_DIR = Path(env_str("PANEL_DATA_DIR", _default_data_dir)).resolve()
# 0711, with keys/ 0700 and clusters/ 0711, before anything is written into it (panel/files.py).
# A DATABASE_URL of the operator's own is left where it is; the default database moves into db/.
files.ensure_data_dir(PANEL_DATA_DIR, move_legacy_db=not os.environ.get("DATABASE_URL"))
PANEL_RUN_AS_USER = env_str("PANEL_RUN_AS_USER", "postgres")
PANEL_PG_BINDIR = env_str("PANEL_PG_BINDIR", "")
PANEL_PORT_RANGE = env_port_range("PANEL_PORT_RANGE", (25060, 25259))
PANEL_PUBLIC_HOST = env_str("PANEL_PUBLIC_HOST", "localhost")
PANEL_LISTEN_ADDRESSES = env_str("PANEL_LISTEN_ADDRESSES", "127.0.0.1")
PANEL_SUPERUSER = "pgpanel"
# The panel's roles in a cluster. Monitor: collection inside tenants' databases (pg_monitor; the
# superuser never enters those). Migration: owns online migrations' subscriptions. Replication: the
# replicas' streaming login. Backup: pgBackRest's, by peer. Member: the members' streaming and rewind.
PANEL_MONITOR_ROLE = "pgpanel_monitor"
PANEL_MIGRATION_ROLE = "pgpanel_migrate"
PANEL_REPLICATION_ROLE = "pgpanel_replication"
PANEL_BACKUP_ROLE = "pgpanel_backup"
PANEL_MEMBER_ROLE = "pgpanel_member"
# The one list of them (a new role goes here): the guard reserves them, no user may take their
# names, the panel alters or drops one only if it made it (clusters.engine.panel_roles).
PANEL_ROLES: tuple[str, ...] = (PANEL_SUPERUSER, PANEL_MONITOR_ROLE, PANEL_MIGRATION_ROLE, PANEL_REPLICATION_ROLE)  # fmt: skip
PANEL_ROLES += (PANEL_BACKUP_ROLE, PANEL_MEMBER_ROLE)
# PgBouncer's server_idle_timeout for every cluster (seconds). PgBouncer's own 600 s kept a busy
# pool's idle server connections, and so the direct clients' slots, for ten minutes after a run;
# 60 s gives them back within about a minute (measured: issue 11). PgBouncer 1.18 has no per-pool
# idle timeout, so this is one value for all pools of a cluster.
PANEL_POOL_SERVER_IDLE_TIMEOUT = env_int("PANEL_POOL_SERVER_IDLE_TIMEOUT", 60)
# As root: pgbench runs as this system user, which owns nothing of any cluster (created on demand),
# and each cluster's PostgreSQL and PgBouncer run as a system user of their own named
# PANEL_CLUSTER_USER_PREFIX + a short id (created on provision, removed on delete).
PANEL_BENCH_USER = env_str("PANEL_BENCH_USER", "pgpanel-bench")
# The memory limit of the node's benchmark clients' cgroup (pgbench, sysbench; docs/benchmarks.md).
PANEL_BENCH_MEMORY_MB = env_int("PANEL_BENCH_MEMORY_MB", 1024, minimum=64)
# Modules of further benchmark engines (comma-separated), imported at start in the web and every
# worker; each registers its engine (benchmarks/lib/engines.py, docs/benchmarks.md).
PANEL_BENCH_ENGINES = env_list("PANEL_BENCH_ENGINES", [])
PANEL_CLUSTER_USER_PREFIX = env_str("PANEL_CLUSTER_USER_PREFIX", "pgc-")
PANEL_RECONCILE_SECONDS = env_int("PANEL_RECONCILE_SECONDS", 15, minimum=1)
PANEL_COMMAND_TIMEOUT = env_int("PANEL_COMMAND_TIMEOUT", 120, minimum=5)
# New data directories copied from one initdb made once (clusters/engine/pgdata_template.py).
PANEL_PGDATA_TEMPLATE = env_bool("PANEL_PGDATA_TEMPLATE", False)
# How often a node agent reads the roles of its clusters' members from Patroni (clusters with
# standbys): PgBouncer follows a new primary within this, should Patroni's callback have failed.
PANEL_MEMBER_WATCH_SECONDS = env_int("PANEL_MEMBER_WATCH_SECONDS", 2, minimum=1)
PANEL_METRICS_INTERVAL = env_int("PANEL_METRICS_INTERVAL", 15, minimum=5)
# Clusters one collection cycle reads at once (mostly waiting on their servers): 4 per core, 4 to 32.
_COLLECT_DEFAULT = min(32, max(4, 4 * (os.cpu_count() or 1)))
PANEL_COLLECT_CONCURRENCY = env_int("PANEL_COLLECT_CONCURRENCY", _COLLECT_DEFAULT, minimum=1)
# Backups (panel/backups): the pgBackRest program, the first full backup queued as soon as a new
# cluster is online, the hour (UTC) of the daily backup, and the longest a backup or restore may run.
PANEL_PGBACKREST = env_str("PANEL_PGBACKREST", "pgbackrest")
PANEL_BACKUP_AFTER_CREATE = env_bool("PANEL_BACKUP_AFTER_CREATE", True)
PANEL_BACKUP_HOUR = env_int("PANEL_BACKUP_HOUR", 3, minimum=0)
PANEL_BACKUP_TIMEOUT = env_int("PANEL_BACKUP_TIMEOUT", 6 * 3600, minimum=60)
# An S3-compatible repository for every cluster instead of the local one (several nodes): set the
# endpoint (host or host:port, HTTPS) and bucket to use it. The secret key is given encrypted with
# the panel's key (`manage.py backup encrypt-secret`), never in clear in the environment.
PANEL_BACKUP_S3_ENDPOINT = env_str("PANEL_BACKUP_S3_ENDPOINT", "")
PANEL_BACKUP_S3_BUCKET = env_str("PANEL_BACKUP_S3_BUCKET", "")
PANEL_BACKUP_S3_REGION = env_str("PANEL_BACKUP_S3_REGION", "us-east-1")
PANEL_BACKUP_S3_KEY = env_str("PANEL_BACKUP_S3_KEY", "")
PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED = env_str("PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED", "")
PANEL_BACKUP_S3_PATH = env_str("PANEL_BACKUP_S3_PATH", "/pgpanel")
PANEL_BACKUP_S3_URI_STYLE = env_str("PANEL_BACKUP_S3_URI_STYLE", "host")
PANEL_BACKUP_S3_VERIFY_TLS = env_bool("PANEL_BACKUP_S3_VERIFY_TLS", True)
# Storage quotas (panel/quotas): how long "Allow writes" lifts a stop, and the plan's disk as the
# outer hard limit: read-only from the high watermark until the data is under the low one.
PANEL_QUOTA_ALLOW_WRITES_SECONDS = env_int("PANEL_QUOTA_ALLOW_WRITES_SECONDS", 900, minimum=60)
PANEL_DISK_READONLY_PERCENT = env_int("PANEL_DISK_READONLY_PERCENT", 97, minimum=50)
PANEL_DISK_WRITABLE_PERCENT = env_int("PANEL_DISK_WRITABLE_PERCENT", 93, minimum=40)
# The node's volume (where PANEL_DATA_DIR lives): a warning from WARN, every cluster on it
# read-only from READONLY until it is under WRITABLE again (before PostgreSQL PANICs on a full
# disk); and an emergency reserve, a preallocated file released on demand
# (manage.py quota reserve release) so that a stopped cluster can start and its data be deleted.
PANEL_VOLUME_WARN_PERCENT = env_int("PANEL_VOLUME_WARN_PERCENT", 85, minimum=10)
PANEL_VOLUME_READONLY_PERCENT = env_int("PANEL_VOLUME_READONLY_PERCENT", 95, minimum=10)
PANEL_VOLUME_WRITABLE_PERCENT = env_int("PANEL_VOLUME_WRITABLE_PERCENT", 90, minimum=10)
PANEL_DISK_RESERVE_MB = env_int("PANEL_DISK_RESERVE_MB", 256, minimum=0)

SECRET_KEY = env_str("DJANGO_SECRET_KEY", "") or secret_from_file(
    PANEL_DATA_DIR / "keys" / "django_secret_key", new_django_secret
)
# Role passwords are stored encrypted with this key; it stays outside the database.
PANEL_ENCRYPTION_KEY = env_str("PANEL_ENCRYPTION_KEY", "") or secret_from_file(
    PANEL_DATA_DIR / "keys" / "encryption.key", lambda: Fernet.generate_key().decode()
)
# Bearer token for /metrics (Prometheus scrapes with it); `manage.py insights token` prints it.
PANEL_METRICS_TOKEN = env_str("PANEL_METRICS_TOKEN", "") or secret_from_file(
    PANEL_DATA_DIR / "keys" / "metrics_token", lambda: secrets.token_urlsafe(32)
)

DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "axes",
    "csp",
    "django_htmx",
    "template_partials",
    "panel.accounts",
    "panel.clusters",
    "panel.pools",
    "panel.insights",
    "panel.quotas",
    "panel.logs",
    "panel.backups",
    "panel.migrate",
    "panel.logsink",
    "benchmarks",
    "panel.managed",
    "panel.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files before sessions, login and CSP: public, and answered without touching the database.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    # /v2/ (the API): a request id on every response, Django's error pages in the API's shape.
    "panel.api.middleware.ApiRequestMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # The account's chosen language over the cookie and Accept-Language LocaleMiddleware read.
    "panel.accounts.middleware.AccountLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lock-out page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "panel.urls"
WSGI_APPLICATION = "panel.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # `number`, the one formatter of every figure on a page (digits grouped per language).
            "builtins": ["panel.clusters.templatetags.numbers"],
        },
    },
]

_sqlite_path = PANEL_DATA_DIR / files.DB_DIR / "panel.sqlite3"
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{_sqlite_path}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # WAL lets the web server and the workers read while one of them writes; IMMEDIATE
    # transactions take the write lock up front instead of failing on upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # A file, not memory, so Celery workers started by the tests share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(PANEL_DATA_DIR / "test-panel.sqlite3")}


def _sqlite_files() -> list[Path]:
    db = DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3" or str(db["NAME"]).startswith(":memory:"):
        return []
    return [Path(db["NAME"]), Path(db.get("TEST", {}).get("NAME") or db["NAME"])]


# The unprivileged user make run's web server runs as when make run runs as root.
PANEL_WEB_USER = env_str("PANEL_WEB_USER", "pgpanel")

PANEL_SQLITE_FILES = _sqlite_files()
# Installs from before umask 077 have a 0644 database and a 0755 data directory: repaired on every
# start; the system check says what was repaired and refuses what cannot be (panel/files.py).
PANEL_WEB_GID = files.group_id(PANEL_WEB_USER)  # its group may read keys/
files.secure_at_start(PANEL_DATA_DIR, PANEL_SQLITE_FILES, PANEL_WEB_GID)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out user and address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed logins are counted per user name *and* address: one address guessing one account is
# locked out, while the same account from elsewhere, and other accounts, still log in.
AXES_FAILURE_LIMIT = env_int("PANEL_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env_int("PANEL_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "panel.lockout.locked_out"
# The client's address: REMOTE_ADDR, or behind PANEL_BEHIND_PROXY the address the proxy appended.
AXES_CLIENT_IP_CALLABLE = "panel.lockout.client_address"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "clusters:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Dates and numbers per language (panel/formats): ISO dates in English, 24.11.2026 14:03 in German.
FORMAT_MODULE_PATH = ["panel.formats"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = PANEL_DATA_DIR / "staticfiles"
# Public files, served without a login by WhiteNoise from what `collectstatic` gathered (make run,
# the image): hashed names kept a year by browsers, a gzip copy beside each; readable by others on
# purpose (a web server running as another user), whatever the panel's umask 077 gives them.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "panel.staticstorage.PublicStaticFilesStorage",
        "OPTIONS": {"file_permissions_mode": 0o644, "directory_permissions_mode": 0o755},
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Served over TLS (directly or behind a proxy that terminates it): cookies only over HTTPS, HSTS,
# and plain HTTP redirected. Off by default because `make run` serves http://127.0.0.1:8000/.
PANEL_HTTPS = env_bool("PANEL_HTTPS", False)
PANEL_BEHIND_PROXY = env_bool("PANEL_BEHIND_PROXY", False)
SESSION_COOKIE_SECURE = PANEL_HTTPS
CSRF_COOKIE_SECURE = PANEL_HTTPS
SECURE_SSL_REDIRECT = PANEL_HTTPS and env_bool("PANEL_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("PANEL_HSTS_SECONDS", 31536000, minimum=0) if PANEL_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PANEL_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("PANEL_HSTS_PRELOAD", True)
if PANEL_BEHIND_PROXY:
    # Only behind a proxy that sets this header itself (and strips the client's): otherwise a
    # client could claim HTTPS.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = env_bool("PANEL_USE_X_FORWARDED_HOST", False)

# No inline script or style anywhere: every script and stylesheet is a static file of the panel.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Attaching a server: staff only unless opened to every account (panel/clusters/services/attach.py).
PANEL_ATTACH_FOR_ALL = env_bool("PANEL_ATTACH_FOR_ALL", False)
PANEL_ATTACH_RATE = env_int("PANEL_ATTACH_RATE", 5, minimum=1)  # attempts per account…
PANEL_ATTACH_RATE_SECONDS = env_int("PANEL_ATTACH_RATE_SECONDS", 600, minimum=1)  # …per this window
# Every failed attempt of such an account takes at least this long, whatever failed.
PANEL_ATTACH_FAILURE_SECONDS = env_int("PANEL_ATTACH_FAILURE_SECONDS", 5, minimum=0)
PANEL_ATTACH_NETWORKS = env_list("PANEL_ATTACH_NETWORKS", [])  # docs/configuration.md
PANEL_MIGRATION_SOURCE_NETWORKS = env_list("PANEL_MIGRATION_SOURCE_NETWORKS", [])  # docs/online-migration.md
PANEL_MIGRATION_RATE = env_int("PANEL_MIGRATION_RATE", 20, minimum=1)
PANEL_LOGSINK_TARGET_NETWORKS = env_list("PANEL_LOGSINK_TARGET_NETWORKS", [])  # docs/logsink.md
PANEL_LOGSINK_SECONDS = env_int("PANEL_LOGSINK_SECONDS", 10, minimum=1)
# Counters shared by the web server's processes (the attach rate limit) without another service.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(PANEL_DATA_DIR / files.DB_DIR / "cache"),
    }
}

# The default broker is the private Redis `make run` starts, with a generated password (0600 in
# keys/): any local user reaches 127.0.0.1, and whoever writes to the broker sends the workers,
# which run as root, their tasks. An external Redis must have a password in REDIS_URL.
REDIS_URL = env_str("REDIS_URL", "") or (
    "redis://:"
    + secret_from_file(PANEL_DATA_DIR / "keys" / "redis_password", lambda: secrets.token_hex(24))
    + "@127.0.0.1:6379/0"
)
CELERY_BROKER_URL = REDIS_URL
# Every message, results too, is signed and only signed ones are taken (panel/signing.py).
globals().update(signing.celery_settings(PANEL_DATA_DIR / "keys", env_str("PANEL_TASK_SIGNING_KEY", ""), env_str("PANEL_TASK_SIGNING_CERT", "")))  # fmt: skip
# Only the node agent's answers to the web are results (panel/core/agent.py); other tasks use rows.
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_RESULT_EXPIRES = 600
CELERY_TASK_IGNORE_RESULT = True
CELERY_IMPORTS = ("panel.core.agent",)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ACKS_LATE = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Fail fast when Redis is down so a form can say so instead of hanging.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 5}
# Beat runs anywhere and touches no cluster: what it sends, and how often (panel/schedule.py).
CELERY_BEAT_SCHEDULE = beat_schedule(PANEL_RECONCILE_SECONDS, PANEL_METRICS_INTERVAL, PANEL_LOGSINK_SECONDS)

# What this process may touch (panel/core/agent.py): "all" works on a cluster's processes, sockets
# and files in place (tests, manage.py); "web" sends that to the node agent and waits (make run's
# gunicorn, as PANEL_WEB_USER); "agent" is the worker of the node's queue, node.<PANEL_NODE_NAME>.
PANEL_PROCESS_ROLE = env_str("PANEL_PROCESS_ROLE", "all")
if PANEL_PROCESS_ROLE not in ("all", "web", "agent"):
    raise ValueError(f"PANEL_PROCESS_ROLE must be all, web or agent, not {PANEL_PROCESS_ROLE!r}")
PANEL_NODE_NAME = env_str("PANEL_NODE_NAME", "local")
# The API's requests per hour per token (the managed service's limit), counted in Redis.
PANEL_API_RATE_LIMIT = env_int("PANEL_API_RATE_LIMIT", 5000, minimum=1)
# The agent's heartbeat (seconds between two); the silence after which its clusters show as unknown.
PANEL_NODE_HEARTBEAT_SECONDS = env_int("PANEL_NODE_HEARTBEAT_SECONDS", 10, minimum=1)
PANEL_NODE_DEAD_AFTER = env_int("PANEL_NODE_DEAD_AFTER", 45, minimum=2)
# The capacity a node registers with the first time (0: the machine's memory, 2 vCPUs a core: a
# plan's vCPUs are a CPU quota that may share cores); `manage.py node add` sets them explicitly.
PANEL_NODE_RAM_GB = env_int("PANEL_NODE_RAM_GB", 0, minimum=0)
PANEL_NODE_VCPUS = env_int("PANEL_NODE_VCPUS", 0, minimum=0)
# The disk (GB) a node needs free to take a new server (docs/nodes.md); not a reservation.
PANEL_NODE_MIN_FREE_DISK_GB = env_positive("PANEL_NODE_MIN_FREE_DISK_GB", 1.0)
PANEL_VIP_INTERFACE = env_str("PANEL_VIP_INTERFACE", "eth0")  # a new node's floating addresses' (checks.py)
CELERY_BEAT_SCHEDULE_FILENAME = str(PANEL_DATA_DIR / files.DB_DIR / "celerybeat-schedule")

# Alert emails. The console backend prints them; set EMAIL_BACKEND and EMAIL_HOST… to send.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "pgpanel@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("PANEL_LOG_LEVEL", "INFO")},
    # django-axes announces itself at INFO in every process (each manage.py command); its
    # lock-outs and failed logins come from other loggers and stay.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}
