"""Data quality of closed epochs (pipeline step 4, after `epoch close`): GX suites over
the tables at the tag `epoch-N` and the recomputation oracle, a Data Docs report per
epoch, and the ledger move closed -> published | failed-validation.

    spec.py      the suites of expectations/*.yml (readable, versioned, no GX import)
    facts.py     what the compiled program says about each map (counts, non-NULL keys)
    frames.py    the stacked Spark frames the suites run on (maps, base, events)
    oracle.py    every view at the tag against its SQL recomputed over base.*
    gxrun.py     Great Expectations: context, suites, checkpoints, Data Docs
    summary.py   the machine-readable summary and the report printed by the CLI
    validate.py  validate_epoch: all of the above for one epoch, and the ledger
"""
