"""The batch tier: calls sent through the providers' batch APIs, at their batch price.

An endpoint with `batch: {enabled: true}` (OpenAI and Anthropic wires) has its conditions'
pending cells answered through batches instead of one call at a time, beside the live dispatch
of the other conditions; what the batches do not answer by the deadline is called live.

* `records`  what the store knows of each batch (`batches/<id>/`), written before anything is
  paid; owners, leases and take-over of a dead driver's batches
* `runner`   one stage's batches: render, cache, reserve, record, create, poll, collect,
  cancel at the deadline (`BatchStage`, plain asyncio)
* `collect`  a batch's results to store rows, response-cache rows and leftovers
* `tier`     the driver's hook: which cells go where, the thread the batches run in, and the
  leftovers handed to the live dispatch (`BatchTier`)

The wire formats are in `itemeval/providers/` (`batch_client.py`, `openai_batch.py`,
`anthropic_batch.py`). This package uses the call path's plain pieces (`calls/requests.py`,
`calls/rows.py`, the journal, the ledger's `SpendSource`), `runtime/worker.ShardRunner`'s
readers, and never imports Ray.
"""

from itemeval.batch.records import BatchLog, BatchRecord
from itemeval.batch.tier import BatchTier, batch_conditions, open_batches_of

__all__ = ["BatchLog", "BatchRecord", "BatchTier", "batch_conditions", "open_batches_of"]
