"""docker-compose.yml and the Dockerfile, checked statically: there is no Docker engine in
the development sandbox, so nothing here starts a container. The checks are the ones a
`docker compose config` and a first `up` would fail on, plus Cumulus' own consistency:
the settings every container reads resolve to the deployment's catalog, master and
warehouse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cumulus.config import ENV_VARS, load_settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
ONE_SHOT = {"airflow-init", "minio-init"}
INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value: str) -> str:
    """Compose's ${VAR:-default} with the defaults (no .env file)."""
    return INTERPOLATION.sub(lambda m: m.group(2) or "", value)


def env_of(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def test_the_deployment_has_every_component() -> None:
    wanted = {"postgres", "minio", "spark-master", "spark-worker", "airflow-api-server",
              "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "airflow-init", "sql-server",
              "cumulus-engine"}
    assert wanted <= set(SERVICES)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_is_well_formed(name) -> None:
    svc = SERVICES[name]
    assert svc.get("image") or svc.get("build"), f"{name}: no image or build"
    if "build" in svc:
        assert (REPO / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
    if name not in ONE_SHOT:
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name}: no healthcheck"
        assert svc.get("restart") == "unless-stopped", name
    for dep, cond in (svc.get("depends_on") or {}).items():
        assert dep in SERVICES, f"{name} depends on unknown {dep}"
        expected = "service_completed_successfully" if dep in ONE_SHOT else "service_healthy"
        assert cond["condition"] == expected, f"{name} -> {dep}"
    for volume in svc.get("volumes", []):
        source = volume.split(":", 1)[0]
        if source.startswith((".", "/")):
            assert (REPO / source).exists(), f"{name}: bind mount {source} does not exist"
        else:
            assert source in COMPOSE["volumes"], f"{name}: undeclared volume {source}"


def test_published_ports_are_unique() -> None:
    host_ports = [str(p).rsplit(":", 1)[0] for s in SERVICES.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports


def test_every_secret_is_required_and_no_page_without_a_login_is_published() -> None:
    """No password, key, secret or token has a default: compose refuses to start until
    .env has each (.env.example lists them all); what asks nobody who they are (the Spark
    master UI, the MinIO console) is published on loopback only."""
    raw = (REPO / "docker-compose.yml").read_text()
    secret = re.compile(r"PASSWORD|SECRET|TOKEN|FERNET")
    used = set(re.findall(r"\$\{(\w+)", raw)) - {"HOSTNAME"}  # ($${HOSTNAME}: the container's own)
    defaults = {m.group(1) for m in re.finditer(r"\$\{(\w+):?-", raw) if secret.search(m.group(1))}
    assert not defaults, f"secrets with a default: {sorted(defaults)}"
    example = {line.split("=", 1)[0] for line in (REPO / ".env.example").read_text().splitlines()
               if line and not line.startswith("#")}
    assert {v for v in used if secret.search(v)} <= example and used <= example, used - example
    open_pages = {"minio": "9001", "spark-master": "8080"}
    for name, port in open_pages.items():
        published = [str(p) for p in SERVICES[name].get("ports", []) if str(p).endswith(f":{port}")]
        assert published and all(p.startswith("127.0.0.1:") for p in published), (name, published)
    engine = env_of("cumulus-engine")["CUMULUS_ENGINE_TOKEN"]
    assert engine.startswith("${CUMULUS_ENGINE_TOKEN:?") and env_of("airflow-scheduler")["CUMULUS_ENGINE_TOKEN"] == engine
    assert "Authorization: Bearer $${CUMULUS_ENGINE_TOKEN}" in " ".join(SERVICES["cumulus-engine"]["healthcheck"]["test"])


def test_hostnames_in_settings_are_services() -> None:
    """Every host a container is told to reach is a service of this file."""
    hosts = set()
    for name in SERVICES:
        for value in env_of(name).values():
            hosts |= set(re.findall(r"(?:jdbc:postgresql|postgresql\+psycopg2|spark|http)://(?:[^@/]*@)?([\w-]+)", value))
    hosts.discard("localhost")
    assert hosts and hosts <= set(SERVICES), hosts - set(SERVICES)


def test_cumulus_processes_share_one_configuration(tmp_path, monkeypatch) -> None:
    """The settings each Cumulus container resolves (CUMULUS_* variables + docker/cumulus.toml)
    name the PostgreSQL catalog, the standalone master and the S3 warehouse."""
    from cumulus.spark.session import spark_conf

    cumulus_services = [n for n in SERVICES if "CUMULUS_HOME" in env_of(n)]
    assert {"airflow-scheduler", "spark-worker", "sql-server", "airflow-init"} <= set(cumulus_services)
    envs = {n: {k: v for k, v in env_of(n).items() if k.startswith("CUMULUS_")} for n in cumulus_services}
    assert all(e == envs["airflow-scheduler"] for e in envs.values())
    env = envs["airflow-scheduler"]
    # (CUMULUS_ENGINE_TOKEN: read where the warm engine and its callers meet, not a setting)
    assert set(env) - {"CUMULUS_HOME", "CUMULUS_ENGINE_TOKEN"} <= set(ENV_VARS.values()), "unknown CUMULUS_ variable"

    home = tmp_path / "home"
    home.mkdir()
    (home / "cumulus.toml").write_text((REPO / "docker" / "cumulus.toml").read_text())
    for key, value in env.items():
        if key not in ("CUMULUS_HOME", "CUMULUS_ENGINE_TOKEN"):
            monkeypatch.setenv(key, value)
    settings = load_settings(home)
    conf = spark_conf(settings)
    cat = f"spark.sql.catalog.{settings.catalog}"
    assert conf["spark.master"] == "spark://spark-master:7077"
    assert conf[f"{cat}.uri"] == "jdbc:postgresql://postgres:5432/cumulus"
    assert conf[f"{cat}.jdbc.user"] == "cumulus"
    assert conf[f"{cat}.warehouse"] == "s3://cumulus-warehouse/"
    assert conf[f"{cat}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert any(j.endswith("postgresql.jar") for j in conf["spark.jars"].split(","))
    # the warehouse bucket is the one minio-init creates, the endpoint is the minio service
    assert "cumulus-warehouse" in " ".join(SERVICES["minio-init"]["command"])
    assert conf[f"{cat}.s3.endpoint"] == "http://minio:9000"


def test_airflow_services_share_metadata_db_and_secrets() -> None:
    airflow = [n for n in SERVICES if n.startswith("airflow-")]
    keys = ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__API_AUTH__JWT_SECRET",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "AIRFLOW__CORE__DAGS_FOLDER")
    for key in keys:
        values = {env_of(n).get(key) for n in airflow}
        assert len(values) == 1 and None not in values, key
    env = env_of("airflow-scheduler")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/cumulus/dags"
    assert (REPO / "dags").is_dir() and (REPO / "plugins").is_dir()
    commands = {" ".join(SERVICES[n]["command"]) for n in airflow if "command" in SERVICES[n]}
    for role in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert any(c.startswith(f"airflow {role}") for c in commands), role
    postgres = env_of("postgres")
    assert postgres["POSTGRES_DB"] == "airflow"


def test_the_catalog_role_gets_the_password_cumulus_connects_with() -> None:
    """PostgreSQL creates the catalog's role with CUMULUS_CATALOG_PASSWORD, the variable
    every Cumulus process connects with: no password is written in the init script."""
    mounts = [v for v in SERVICES["postgres"]["volumes"] if "/docker-entrypoint-initdb.d/" in v]
    assert mounts, "postgres: no init script for the catalog database"
    for mount in mounts:
        source, target = mount.split(":")[:2]
        script = (REPO / source).read_text()
        assert target.endswith(".sh") and "CREATE DATABASE cumulus" in script
        assert ":'password'" in script and 'password="$CUMULUS_CATALOG_PASSWORD"' in script
        assert "PASSWORD '" not in script, f"{source}: a literal password"
    cumulus = env_of("airflow-scheduler")
    assert env_of("postgres")["CUMULUS_CATALOG_PASSWORD"] == cumulus["CUMULUS_CATALOG_PASSWORD"]
    assert cumulus["CUMULUS_CATALOG_USER"] == "cumulus"  # the role the script creates


def test_init_creates_the_pool_the_dags_use() -> None:
    """Airflow never schedules a task in a pool that does not exist: init creates the
    pipeline's pool, read from the same configuration the DAGs read."""
    from cumulus.config import PipelineConfig

    init = (REPO / "docker" / "init.sh").read_text()
    assert "load_pipeline_config().pool" in init
    assert re.search(r'^airflow pools set "\$pool" 1 ', init, re.M), "init.sh does not create the pool"
    dags = " ".join(p.read_text() for p in (REPO / "dags").glob("*.py"))
    assert "pool=CFG.pool" in dags and PipelineConfig().pool == "cumulus_catalog"


def test_the_home_settings_are_writable() -> None:
    """`cumulus source add` writes the home's cumulus.toml: no container mounts it (or
    anything in the home) read-only; init copies docker/cumulus.toml into the home volume
    when it has none."""
    for name, svc in SERVICES.items():
        for volume in svc.get("volumes", []):
            parts = volume.split(":")
            assert not (len(parts) > 2 and parts[1].startswith("/var/lib/cumulus") and "ro" in parts[2]), (name, volume)
    init = (REPO / "docker" / "init.sh").read_text()
    copy = init.index('cp docker/cumulus.toml "$CUMULUS_HOME/cumulus.toml"')
    assert '[ ! -f "$CUMULUS_HOME/cumulus.toml" ]' in init and copy < init.index("cumulus init")


def test_dockerfile_builds_on_the_official_airflow_image_with_the_lock() -> None:
    """FROM apache/airflow at the lock's Airflow version and the package's Python; the
    package with its runtime extras (not dev: no test tools) constrained by the lock; the
    machine's jars built the way `make setup` builds them; every COPY source exists."""
    text = (REPO / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    lock = dict(re.findall(r"^([\w.-]+)==(\S+)$", (REPO / "requirements.txt").read_text(), re.M))
    assert "FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}" in lines
    assert args["AIRFLOW_VERSION"] == lock["apache-airflow"] and args["PYTHON_VERSION"] == "3.11"
    import snowpark_connect_deps_iceberg as deps
    runtime = [j.name for j in deps.list_jars() if j.name.startswith("iceberg-spark-runtime-3.5_2.12-")][-1]
    assert runtime == f"iceberg-spark-runtime-3.5_2.12-{args['ICEBERG_VERSION']}.jar"  # the AWS bundle's version
    install = next(line for line in lines if "pip install" in line)
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in install and "-c requirements.txt" in install
    extras = re.search(r'"\./\[([\w,]+)\]"', install).group(1).split(",")
    assert set(extras) == {"airflow", "dbt", "quality"}
    for tool in ("pytest", "hypothesis", "ruff", "chromium", "npm", "postgresql ", "setup.sh"):
        assert tool not in text, f"the image installs {tool.strip()}"
    assert "python -m cumulus.spark.jars" in text and "authenticator_jar()" in text
    assert "openjdk-17-jdk-headless" in text and "USER airflow" in text
    for line in lines:
        if line.startswith("COPY "):
            for src in [part for part in line.split()[1:-1] if not part.startswith("--")]:
                assert (REPO / src).exists(), src
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".cache" in ignored and "web/node_modules" in ignored
    init = (REPO / "docker" / "init.sh").read_text()
    assert "airflow db migrate" in init and "cumulus init" in init
    for name in ("docker/init.sh", "demo/tpch_schema.sql", "dbt_project.yml", "tests/dbt"):
        assert (REPO / name).exists(), name


def test_every_image_is_pinned_to_a_release() -> None:
    """No `latest` and no bare major: a tag with a full version or a release stamp; MinIO
    from quay.io (Docker Hub's minio/minio is no longer published)."""
    for name, svc in SERVICES.items():
        image = svc.get("image", "")
        if "build" in svc:
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", f"{name}: {image}"
        assert re.match(r"^(\d+\.\d+[\w.-]*|RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z)$", tag), f"{name}: {image}"
    assert SERVICES["minio"]["image"].startswith("quay.io/minio/minio:")
    assert SERVICES["minio-init"]["image"].startswith("quay.io/minio/mc:")


def test_every_endpoint_asks_who_you_are() -> None:
    """Airflow's UI and API (and so the Cumulus plugin) behind an auth manager with no
    default password; the SQL endpoint on every interface only with a user that init
    writes, whose password compose requires (${SQL_PASSWORD:?...})."""
    env = env_of("airflow-api-server")
    assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("SimpleAuthManager")
    assert "ALL_ADMINS" not in " ".join(env)  # no user-less access
    sql = SERVICES["sql-server"]["command"]
    assert sql[sql.index("--host") + 1] == "0.0.0.0"
    raw = SERVICES["airflow-init"]["environment"]["SQL_PASSWORD"]
    assert raw.startswith("${SQL_PASSWORD:?"), raw
    init = (REPO / "docker" / "init.sh").read_text()
    assert 'cumulus sql-server --set-password "${SQL_USER:-cumulus}"' in init
    assert "SQL_PASSWORD" not in " ".join(env_of("sql-server"))  # the secret stays in init


def test_the_plugin_refuses_requests_without_a_token() -> None:
    """Every route of the plugin's app, the mounted reports too, answers 401 to a request
    with no token (tests/airflow/test_airflow_standalone.py: with a bad and a good one)."""
    import importlib.util

    from fastapi.testclient import TestClient

    spec = importlib.util.spec_from_file_location("cumulus_plugin_under_test", REPO / "plugins" / "cumulus_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    client = TestClient(module.create_app())
    for path in ("/", "/api/status", "/reports/data_docs/index.html"):
        answer = client.get(path)
        assert answer.status_code == 401 and "sign in" in answer.json()["detail"], (path, answer.text)


def test_the_warm_engine_is_reachable_from_the_airflow_containers() -> None:
    """The engine listens on every interface and writes, into the home the Airflow
    containers share, a URL whose host is its service (its hostname: the executors reach
    its driver there too); its port matches and its health check asks that API."""
    from cumulus.cli import build_parser

    svc = SERVICES["cumulus-engine"]
    argv = svc["command"]
    assert argv[:3] == ["cumulus", "engine", "serve"]
    args = build_parser().parse_args(argv[1:])
    assert args.host == "0.0.0.0" and args.cadence > 0
    url = re.fullmatch(r"http://([\w-]+):(\d+)", args.url)
    assert url and url.group(1) == svc["hostname"] == "cumulus-engine" and int(url.group(2)) == args.port
    assert f"localhost:{args.port}/status" in " ".join(svc["healthcheck"]["test"])
    homes = {v for name in ("cumulus-engine", "airflow-scheduler", "airflow-triggerer")
             for v in SERVICES[name]["volumes"] if v.startswith("cumulus-home:")}
    assert homes == {"cumulus-home:/var/lib/cumulus"}, homes
    assert env_of("cumulus-engine")["CUMULUS_HOME"] == "/var/lib/cumulus"


def test_the_long_lived_spark_applications_fit_the_workers_together() -> None:
    """The warm engine and the SQL endpoint hold their executors for good: capped by
    spark.cores.max (the standalone master gives an uncapped application every core), the
    two fit in the workers' cores and memory at once."""
    import tomllib

    from cumulus.config import _flatten_spark

    spark = dict(_flatten_spark(tomllib.loads((REPO / "docker" / "cumulus.toml").read_text())["spark"]))
    worker = SERVICES["spark-worker"]["command"]
    cores, memory = int(worker[worker.index("--cores") + 1]), worker[worker.index("--memory") + 1]
    long_lived = [name for name in ("cumulus-engine", "sql-server") if name in SERVICES]
    assert len(long_lived) == 2
    assert int(spark["spark.cores.max"]) * len(long_lived) <= cores, (spark.get("spark.cores.max"), cores)
    gib = {"g": 1.0, "m": 1 / 1024}
    executor = float(spark["spark.executor.memory"][:-1]) * gib[spark["spark.executor.memory"][-1]]
    assert executor * len(long_lived) <= float(memory[:-1]) * gib[memory[-1]], (spark["spark.executor.memory"], memory)
