"""dbt on Cumulus' stable snapshots: the profile (a dbt-spark session on the Cumulus
catalog, built from the settings), the staging models generated from the views, and the
environment `cumulus dbt ...` runs dbt in. The dbt project itself is the repository root:
dbt_project.yml, models/staging (generated) and models/marts, macros/, tests/dbt/."""
