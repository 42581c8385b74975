"""The engine: apply, repair, fold and publish an epoch over the maps and base tables.
The application layer above it (cumulus/app.py: `Engine`) is what every face calls."""
