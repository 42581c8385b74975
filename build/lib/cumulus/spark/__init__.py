"""The Spark side of a home, below the store and the engine: the session factory on the
home's Iceberg catalog (session.py) and the jars it needs (jars.py)."""
