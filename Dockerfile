# The Cumulus image of docker-compose.yml: the official Apache Airflow image (Airflow 3,
# Python 3.11), plus Java 17 for Spark, the catalog's JDBC drivers and the cumulus
# package with its airflow, dbt and quality extras (no test tools). Every version is the
# lock's (requirements.txt, tested together here); the lock pins apache-airflow to this
# image's version, so installing never moves Airflow (see docs/deploy.md).
ARG AIRFLOW_VERSION=3.3.2
ARG PYTHON_VERSION=3.11
FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}

ARG AIRFLOW_VERSION
# Iceberg's S3FileIO needs the AWS SDK bundle of the runtime jar's Iceberg version.
ARG ICEBERG_VERSION=1.10.2

USER root
# Java for Spark (the JDK: javac builds the SQL endpoint's password checker once, below),
# the JDBC drivers of the catalog, jarjar for the relocated Jackson jar (docs/STACK.md),
# curl and procps for health checks.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends \
        openjdk-17-jdk-headless libxerial-sqlite-jdbc-java libpostgresql-jdbc-java libjarjar-java curl procps \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/cumulus /var/lib/cumulus /opt/cumulus-cache \
    && chown -R airflow:0 /opt/cumulus /var/lib/cumulus /opt/cumulus-cache
USER airflow

ENV CUMULUS_HOME=/var/lib/cumulus \
    CUMULUS_CACHE_DIR=/opt/cumulus-cache \
    CUMULUS_DBT_PROJECT_DIR=/opt/cumulus \
    PYTHONUNBUFFERED=1
WORKDIR /opt/cumulus

# The package and its dependencies first (this layer changes only with them), with the
# lock as constraints: the versions tested here, Airflow the image's own.
COPY --chown=airflow:0 requirements.txt pyproject.toml README.md ./
COPY --chown=airflow:0 cumulus ./cumulus
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "./[airflow,dbt,quality]" -c requirements.txt \
    && python -m cumulus.spark.jars \
    && python -c "from cumulus.sqlserver import authenticator_jar; print(authenticator_jar())" \
    && jars="$(python -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')" \
    && curl -fsSL -o "$jars/iceberg-aws-bundle-${ICEBERG_VERSION}.jar" \
        "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-aws-bundle/${ICEBERG_VERSION}/iceberg-aws-bundle-${ICEBERG_VERSION}.jar"

# The DAGs, the plugin, the dbt project and the demo's schema and views (docker/init.sh).
COPY --chown=airflow:0 dags ./dags
COPY --chown=airflow:0 plugins ./plugins
COPY --chown=airflow:0 models ./models
COPY --chown=airflow:0 macros ./macros
COPY --chown=airflow:0 dbt_project.yml ./
COPY --chown=airflow:0 tests/dbt ./tests/dbt
COPY --chown=airflow:0 demo ./demo
COPY --chown=airflow:0 docker ./docker

EXPOSE 8080 10000
CMD ["cumulus", "--help"]
