"""spark-submit entry of the ingest step: the same as `python -m cumulus.jobs.ingest` (see
cumulus/jobs/ingest.py for its arguments and exit statuses). The pipeline submits the
module's own file (cumulus.jobs.job_file); this file is for a cluster's spark-submit
from a checkout.

    spark-submit --master 'local[2]' $JARS spark_jobs/ingest.py --home H ...
"""

import sys

from cumulus.jobs.ingest import main

if __name__ == "__main__":
    sys.exit(main())
