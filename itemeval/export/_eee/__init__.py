"""Every Eval Ever: the records `itemeval export` writes for the Every Eval Ever datastore.

* `records`     versions, packaged schemas, evaluations, instance (sample) records (pure)
* `aggregate`   aggregate records, one per evaluation (pure)
* `writer`      streams samples and aggregates out of the long-table scan
* `schemas/`    the published JSON schemas (MIT, see `NOTICE.txt`), shipped as package data
"""
