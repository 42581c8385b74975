"""The engine: apply, repair, fold and publish an epoch over the maps and base tables.
`Engine` (api.py) is its one entry point."""

from cumulus.engine.api import Engine, run_step

__all__ = ["Engine", "run_step"]
