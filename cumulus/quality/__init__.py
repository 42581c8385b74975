"""Data quality of closed epochs (pipeline step 4, after `epoch close`): GX suites over
the tables at the tag `epoch-N` and the recomputation oracle, run as `epoch-N` in the
home's file-backed GX context whose checkpoints add each epoch's results to the one Data
Docs site (every epoch as history), and the ledger move closed -> published |
failed-validation.

    spec.py      the suites of expectations/*.yml (readable, versioned, no GX import)
    facts.py     what the compiled program says about each map (counts, non-NULL keys)
    frames.py    the stacked Spark frames the suites run on (maps, base, events)
    oracle.py    every view at the tag against its SQL recomputed over base.*
    gxrun.py     Great Expectations: the file-backed context, suites, checkpoints and
                 their UpdateDataDocsAction
    assets.py    the Data Docs pages made to render with no network
    summary.py   the machine-readable summary, the report printed by the CLI, where
                 the reports live
    validate.py  audit_epoch: all of the above for one epoch; record_verdict: its ledger row
"""
