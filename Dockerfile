# The Cumulus image of docker-compose.yml: Python 3.11, Java 17, Spark 3.5 (pyspark),
# the Iceberg runtime, Airflow 3, dbt and the cumulus package, installed from
# requirements.txt the way scripts/setup.sh sets up a Debian 12 machine.
FROM python:3.11-slim-bookworm

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/cumulus/.venv/bin:$PATH \
    AIRFLOW_HOME=/opt/airflow \
    CUMULUS_HOME=/var/lib/cumulus

# Java for Spark, the JDBC drivers of the catalog, jarjar for the relocated Jackson jar
# (docs/STACK.md), curl for health checks.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends \
        openjdk-17-jre-headless libxerial-sqlite-jdbc-java libpostgresql-jdbc-java \
        libjarjar-java curl procps \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv

WORKDIR /opt/cumulus

# Python dependencies first, so this layer is rebuilt only when requirements.txt changes.
# psycopg2: Airflow's metadata database and PyIceberg's catalog are on PostgreSQL here.
COPY requirements.txt ./
RUN uv venv --python python3.11 .venv \
    && uv pip install --no-cache --python .venv/bin/python -r requirements.txt psycopg2-binary

# Iceberg's S3FileIO needs the AWS SDK bundle (same Iceberg version as the runtime jar);
# on pyspark's own classpath every Spark JVM (driver, master, worker, executors) has it.
ARG ICEBERG_VERSION=1.10.0
RUN jars="$(.venv/bin/python -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')" \
    && curl -fsSL -o "$jars/iceberg-aws-bundle-${ICEBERG_VERSION}.jar" \
        "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-aws-bundle/${ICEBERG_VERSION}/iceberg-aws-bundle-${ICEBERG_VERSION}.jar"

# The code, then setup.sh for the rest: the editable install and .cache/jars (the
# relocated Jackson jar and the links to the jars a Spark session needs).
COPY . .
RUN bash scripts/setup.sh \
    && mkdir -p "$CUMULUS_HOME" "$AIRFLOW_HOME"

EXPOSE 8080 10000
CMD ["cumulus", "--help"]
