"""Options of the REST API, the web UI and security (Flink's RestOptions, WebOptions,
SecurityOptions)."""

from __future__ import annotations

from flink_runtime.configuration.option import BOOLEAN, DURATION, INTEGER, LIST, STRING, ConfigOption, integer


class RestOptions:
    TITLE = "REST API"

    ADDRESS = ConfigOption("rest.address", STRING, "127.0.0.1", "Address clients use to reach the REST API.")
    BIND_ADDRESS = ConfigOption("rest.bind-address", STRING, "127.0.0.1", "Address the REST server binds to.")
    ALLOWED_HOSTS = ConfigOption(
        "rest.allowed-hosts",
        LIST,
        "",
        "Host names the REST API answers to besides IP addresses, localhost, rest.address and "
        "rest.bind-address (and this machine's names when it binds every interface): a YAML list or "
        "separated by ','; 'name' (any port), 'name:port', '*.example.com', or '*' (no check: a web "
        "page could reach the API through DNS rebinding). Other Host headers are refused (403).",
    )
    PORT = ConfigOption("rest.port", INTEGER, 8081, "REST port (0 picks a free one).")
    SUBMIT_WAIT = ConfigOption(
        "rest.submit.wait-timeout",
        DURATION,
        "10 s",
        "How long POST /jobs waits for the sources to run before answering with the accepted job id.",
    )


class WebOptions:
    TITLE = "Web UI"

    CHECKPOINTS_HISTORY_SIZE = ConfigOption(
        "web.checkpoints.history",
        integer(minimum=1),
        10,
        "How many recent checkpoints GET /jobs/:jobid/checkpoints lists in its history.",
        job_overridable=True,
    )


class SecurityOptions:
    TITLE = "Security"

    CLUSTER_SECRET = ConfigOption(
        "security.cluster.secret",
        STRING,
        "",
        "Shared secret of the cluster's RPC: keys its CURVE authentication and encryption, and a "
        "TaskManager presents it to register. Required when the RPC binds or connects off loopback "
        "(else the process exits with code 2). "
        "Empty: a MiniCluster makes its own; processes on loopback share their user's "
        "($XDG_RUNTIME_DIR/flink-runtime/rpc-secret, else ~/.local/state/flink-runtime/rpc-secret).",
    )
    REST_TOKEN = ConfigOption(
        "security.rest.token",
        STRING,
        "",
        "Bearer token every REST request must carry (Authorization: Bearer <token>). Empty: none "
        "(allowed only while the REST API binds to loopback).",
    )
    REST_TOKEN_FILE = ConfigOption(
        "security.rest.token-file",
        STRING,
        "",
        "A file holding the REST token (first line), instead of security.rest.token.",
    )
    REST_ALLOW_UNAUTHENTICATED = ConfigOption(
        "security.rest.allow-unauthenticated",
        BOOLEAN,
        False,
        "true: serve the REST API on a non-loopback address without a token (anyone who reaches "
        "the port can run code on the cluster).",
    )
    ALLOWED_DIRECTORIES = ConfigOption(
        "security.allowed-directories",
        LIST,
        "",
        "Directories (a YAML list, or separated by ',') under which jobs may read, write, checkpoint "
        "and savepoint, symbolic links resolved; empty: anywhere the processes may. Paths with '..' are "
        "refused always. A TaskManager enforces the JobManager's list (sent with each task) and its own.",
    )
    SECRETS_DIR = ConfigOption(
        "security.secrets.dir",
        STRING,
        "",
        "A directory of secrets a job names as 'secret://<name>' (e.g. a JDBC password): the file "
        "<dir>/<name> holds the value (first line). Read by the process that needs it (the planner, a "
        "TaskManager), never sent in a job graph. Empty, or no such file: the environment variable "
        "FLINK_SECRET_<NAME> (upper case, '-' and '.' as '_').",
    )
    SSL_REST_ENABLED = ConfigOption("security.ssl.rest.enabled", BOOLEAN, False, "Serve the REST API over HTTPS.")
    SSL_REST_CERTIFICATE = ConfigOption(
        "security.ssl.rest.certificate", STRING, "", "PEM file with the REST server's certificate (chain)."
    )
    SSL_REST_KEY = ConfigOption("security.ssl.rest.key", STRING, "", "PEM file with the REST server's private key.")
    SSL_REST_TRUSTSTORE = ConfigOption(
        "security.ssl.rest.truststore",
        STRING,
        "",
        "PEM file of the certificate authorities a client (CLI, TaskManager) trusts for the REST API. "
        "Empty: the system's.",
    )
