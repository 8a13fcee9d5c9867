"""The batch tier: calls sent through the providers' batch APIs, at their batch price.

An endpoint with `batch: {enabled: true}` (OpenAI and Anthropic wires) has its conditions'
pending cells answered through batches instead of one call at a time, beside the live dispatch
of the other conditions; what the batches do not answer by the deadline is called live. It is
part of running a study: the driver runs it beside the live dispatch, and it runs its cells with
the runtime's plain pieces (shards, `ShardRunner`, a stage's result).

The public names are the ones below; the modules are private:

* `_records`  what the store knows of each batch (`batches/<id>/`), written before anything is
  paid; owners, leases and take-over of a dead driver's batches
* `_runner`   one stage's batches: render, cache, reserve, record, create, poll, collect,
  cancel at the deadline (`BatchStage`, plain asyncio)
* `_collect`  a batch's results to store rows, response-cache rows and leftovers
* `_tier`     the driver's hook: which cells go where, the thread the batches run in, and the
  leftovers handed to the live dispatch (`BatchTier`)

The wire formats are in `itemeval/providers/` (`_batch_client.py`, `_openai_batch.py`,
`_anthropic_batch.py`). This package uses the call path's plain pieces (`calls/_requests.py`,
`calls/_rows.py`, the journal, the ledger's `SpendSource`), `runtime/_worker.ShardRunner`'s
readers, and never imports Ray.
"""

from itemeval.runtime.batch._records import BatchLog, BatchRecord, open_batches
from itemeval.runtime.batch._tier import BatchTier, batch_conditions, open_batches_of

__all__ = [
    "BatchLog",
    "BatchRecord",
    "BatchTier",
    "batch_conditions",
    "open_batches",
    "open_batches_of",
]
