#!/usr/bin/env bash
# Idempotent setup for a Debian 12 machine: installs only what is missing.
#   1. system pieces (apt, one `apt-get update` only when something must be installed):
#      Java 17 (the JDK: javac builds the SQL endpoint's password checker), the SQLite / PostgreSQL JDBC drivers, the PostgreSQL server (tests), jarjar
#      and chromium from Debian
#   2. uv, the project venv (.venv, Python 3.11) and its packages (skipped when a stamp
#      of requirements.txt + pyproject.toml matches), compiled to bytecode once
#   3. .cache/jars/: the relocated Jackson jar Iceberg needs (built once, see
#      docs/STACK.md) and links to every jar a Spark session needs
#   4. web/node_modules: the scripts, styles and fonts of the reports (web/package.json,
#      from the npm registry), so Data Docs render with no network
# A second run takes a few seconds. Safe without a terminal (CI=true, no stdin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
PY="$VENV/bin/python"
JARS="$ROOT/.cache/jars"
STAMP="$VENV/.cumulus-deps.sha256"
BYTECODE_STAMP="$VENV/.cumulus-bytecode.sha256"
export DEBIAN_FRONTEND=noninteractive
exec </dev/null

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else die "need root to run: $* (run this script as root or install it by hand)"
    fi
}

# --- 1. system packages ------------------------------------------------------------
missing=()
java -version >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# The JDK's javac: the SQL endpoint's password checker (cumulus/java) is compiled once.
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || missing+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/jarjar.jar ] || missing+=(libjarjar-java)
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
# The PostgreSQL server: the catalog of the concurrent-sources tests (tests/pgkit.py).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
# Headless Chromium: the Airflow UI test takes screenshots of the UI and the plugin page.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# npm: the reports' web assets (step 4).
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v python3.11 >/dev/null 2>&1 || missing+=(python3)
if ! command -v uv >/dev/null 2>&1 && ! python3.11 -m uv --version >/dev/null 2>&1 \
    && ! python3.11 -m pip --version >/dev/null 2>&1; then
    missing+=(python3-pip)
fi

if [ "${#missing[@]}" -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    # Slim Debian images lack this folder and Java's postinst fails without it.
    as_root mkdir -p /usr/share/man/man1
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "system packages: ok (java, sqlite-jdbc, jarjar, postgresql jdbc and server, chromium)"
fi
java -version >/dev/null 2>&1 || die "java still not runnable after installing openjdk-17-jre-headless"

# --- 2. uv, venv, Python packages --------------------------------------------------
find_uv() {
    if command -v uv >/dev/null 2>&1; then UV=(uv)
    elif python3.11 -m uv --version >/dev/null 2>&1; then UV=(python3.11 -m uv)
    else return 1
    fi
}
if ! find_uv; then
    say "installing uv (pip)"
    python3.11 -m pip install -q uv 2>/dev/null \
        || python3.11 -m pip install -q --break-system-packages uv \
        || die "could not install uv with pip"
    find_uv || die "uv installed but not found on PATH"
fi

if ! "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11)' >/dev/null 2>&1; then
    say "creating .venv (Python 3.11)"
    "${UV[@]}" venv -q --clear --python python3.11 "$VENV"
fi

deps_hash="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$deps_hash" ]; then
    say "python packages: ok (requirements.txt and pyproject.toml unchanged)"
else
    say "installing python packages into .venv (uv pip install -r requirements.txt: the lock; then -e . --no-deps)"
    "${UV[@]}" pip install -q --python "$PY" -r requirements.txt
    "${UV[@]}" pip install -q --python "$PY" --no-deps -e .  # the lock has every dependency
    echo "$deps_hash" >"$STAMP"
fi
site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Bytecode, compiled once: uv installs sources only, and where Python may not write its
# caches (PYTHONDONTWRITEBYTECODE, a read-only venv) every process would compile each
# module it imports again: 3 s of every CLI call and more of every Airflow process.
# In the background (about 45 s on 2 cores), beside the steps below; waited for at the end.
if [ "$(cat "$BYTECODE_STAMP" 2>/dev/null)" != "$deps_hash" ]; then
    say "compiling the packages' bytecode (python -m compileall, once per requirements; in the background)"
    ( "$PY" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true; echo "$deps_hash" >"$BYTECODE_STAMP" ) &
    bytecode_job=$!
fi
"$PY" -m compileall -q -j 0 cumulus dags plugins spark_jobs scripts bench tests >/dev/null 2>&1 || true  # the repo's own: only what changed

# --- 3. jars -----------------------------------------------------------------------
mkdir -p "$JARS"

# The Iceberg Spark runtime shipped by snowpark-connect-deps-iceberg (Scala 2.12 build).
runtime="$("$PY" - <<'EOF'
import snowpark_connect_deps_iceberg as d
jars = [p for p in d.list_jars() if p.name.startswith("iceberg-spark-runtime-3.5_2.12-")]
print(jars[-1] if jars else "")
EOF
)"
[ -n "$runtime" ] || die "no iceberg-spark-runtime-3.5_2.12 jar in snowpark-connect-deps-iceberg"
ln -sfn "$runtime" "$JARS/iceberg-spark-runtime.jar"
ln -sfn /usr/share/java/sqlite-jdbc.jar "$JARS/sqlite-jdbc.jar"
ln -sfn /usr/share/java/postgresql.jar "$JARS/postgresql.jar"

# Relocated Jackson: the runtime jar refers to org.apache.iceberg.shaded.com.fasterxml.jackson
# but lacks those classes; pyspark's Jackson jars merged and relocated with jarjar, once
# per pyspark (cumulus/spark/jars.py: build_jackson_jar; the image builds it the same way).
say "relocated jackson jar: $(CUMULUS_JARS_DIR="$JARS" "$PY" -m cumulus.spark.jars)"

# --- 4. web assets of the reports ----------------------------------------------------
WEB="$ROOT/web"
web_hash="$(sha256sum "$WEB/package-lock.json" | cut -d' ' -f1)"
if [ -f "$WEB/node_modules/.cumulus-web.sha256" ] && [ "$(cat "$WEB/node_modules/.cumulus-web.sha256")" = "$web_hash" ]; then
    say "web assets: ok (web/package-lock.json unchanged)"
else
    say "installing the reports' web assets (npm ci in web/; in the background)"
    ( npm ci --prefix "$WEB" --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null \
        && echo "$web_hash" >"$WEB/node_modules/.cumulus-web.sha256" ) &
    npm_job=$!
fi

# --- 5. the driver JVM's class-data archive (docs/STACK.md, "A cold JVM") -------------
archive="$("$PY" "$ROOT/scripts/class_archive.py" --where)"
if [ "$archive" != "None" ] && [ -s "$archive" ]; then
    say "class-data archive: ok"
else
    say "building the driver JVM's class-data archive (the pipeline once on a throwaway home, about 65 s)"
    "$PY" "$ROOT/scripts/class_archive.py" || say "class-data archive not built: JVMs start without it (slower)"
    # older archives (another pyspark, Java or class path) no JVM here maps any more
    find "$(dirname "$archive")" -maxdepth 1 -name 'spark-*.jsa' ! -path "$archive" -delete 2>/dev/null || true
fi

if [ -n "${npm_job:-}" ]; then
    wait "$npm_job" || die "npm ci in web/ failed (the reports need web/node_modules; see web/package.json)"
fi
if [ -n "${bytecode_job:-}" ]; then
    wait "$bytecode_job"
fi

say "done: jars in ${JARS#"$ROOT"/}, venv in .venv, web assets in web/node_modules, class archive in ${archive#"$ROOT"/}"
