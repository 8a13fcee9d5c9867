"""Deprecated module paths: modules that moved keep their old import path for one release.

`MOVED` maps an old dotted path to its new one. A finder on `sys.meta_path` answers an import
of an old path (or of anything below it) with the module at the new path, registered under both
names, and warns with a `DeprecationWarning` naming the new path. Old paths are removed in the
next release (CHANGELOG.md).

One edge: importing an old module path binds the module on its package, as every import does;
where the package also exports a function of that name (`itemeval.store.compact`), the module
then shadows the function in that process. The new paths never do this.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from importlib.abc import Loader, MetaPathFinder
from types import ModuleType

MOVED: dict[str, str] = {
    # packages regrouped by concept
    "itemeval.heap": "itemeval._util.heap",
    "itemeval.arrow_start": "itemeval._util.arrow_start",
    "itemeval.yaml_lines": "itemeval._util.yaml_lines",
    "itemeval.providers.pricing": "itemeval.providers.money._pricing",
    "itemeval.providers.bounds": "itemeval.providers.money._bounds",
    "itemeval.providers.attempts": "itemeval.providers.money._attempts",
    "itemeval.providers.ratebucket": "itemeval.providers.limits._ratebucket",
    "itemeval.providers.ratelimiter": "itemeval.providers.limits._ratelimiter",
    "itemeval.providers.concurrency": "itemeval.providers.limits._concurrency",
    "itemeval.providers.endpoint_limiter": "itemeval.providers.limits._endpoint",
    "itemeval.providers.machine_limiter": "itemeval.providers.limits._machine",
    "itemeval.runtime.calls": "itemeval.calls._shard_calls",
    "itemeval.runtime.hedging": "itemeval.calls._hedging",
    "itemeval.runtime.journal": "itemeval.calls._journal",
    "itemeval.runtime.spend": "itemeval.calls._spend",
    "itemeval.runtime.allowance": "itemeval.calls._allowance",
    "itemeval.runtime.rows": "itemeval.calls._rows",
    "itemeval.runtime.requests": "itemeval.calls._requests",
    "itemeval.spec": "itemeval.datasets.format",
    "itemeval.adapters": "itemeval.datasets.adapters",
    "itemeval.locks": "itemeval.datasets._locks",
    "itemeval.workitem": "itemeval.datasets._workitem",
    "itemeval.design": "itemeval.planning._design",
    "itemeval.estimate": "itemeval.planning._estimate",
    "itemeval.calibration": "itemeval.planning._calibration",
    "itemeval.usage_rows": "itemeval.planning._usage_rows",
    "itemeval.item_index": "itemeval.planning._item_index",
    "itemeval.providers.sim": "itemeval.simulator",
    "itemeval.providers.sim.provider": "itemeval.providers._simulated",
    # modules made private
    "itemeval.store.cache": "itemeval.store._cache",
    "itemeval.store.compact": "itemeval.store._compact",
    "itemeval.store.content_keys": "itemeval.store._content_keys",
    "itemeval.store.current_solutions": "itemeval.store._current_solutions",
    "itemeval.store.dedup": "itemeval.store._dedup",
    "itemeval.store.identical": "itemeval.store._identical",
    "itemeval.store.items": "itemeval.store._items",
    "itemeval.store.layout": "itemeval.store._layout",
    "itemeval.store.manifest": "itemeval.store._manifest",
    "itemeval.store.pending": "itemeval.store._pending",
    "itemeval.store.positions": "itemeval.store._positions",
    "itemeval.store.schemas": "itemeval.store._schemas",
    "itemeval.store.selection": "itemeval.store._selection",
    "itemeval.store.status": "itemeval.store._status",
    "itemeval.export.eee": "itemeval.export._eee",
    "itemeval.export.report": "itemeval.export._report",
    "itemeval.export.table": "itemeval.export._table",
    "itemeval.export.gold_sample": "itemeval.export._gold_sample",
    "itemeval.export.outputs": "itemeval.export._outputs",
    "itemeval.export.stats": "itemeval.export._stats",
    "itemeval.export.study": "itemeval.export._study",
    "itemeval.view.answers": "itemeval.view._answers",
    "itemeval.view.index": "itemeval.view._index",
    "itemeval.view.pages": "itemeval.view._pages",
    "itemeval.view.partitions": "itemeval.view._partitions",
    "itemeval.view.queries": "itemeval.view._queries",
    "itemeval.view.rows": "itemeval.view._rows",
    "itemeval.view.server": "itemeval.view._server",
    "itemeval.importing.catalog": "itemeval.importing._catalog",
    "itemeval.importing.conditions": "itemeval.importing._conditions",
    "itemeval.importing.eee": "itemeval.importing._eee",
    "itemeval.importing.eee_columns": "itemeval.importing._eee_columns",
    "itemeval.importing.helm": "itemeval.importing._helm",
    "itemeval.importing.inspect_log": "itemeval.importing._inspect_log",
    "itemeval.importing.items": "itemeval.importing._items",
    "itemeval.importing.keys": "itemeval.importing._keys",
    "itemeval.importing.lm_eval": "itemeval.importing._lm_eval",
    "itemeval.importing.model": "itemeval.importing._model",
    "itemeval.importing.run": "itemeval.importing._run",
    "itemeval.importing.sources": "itemeval.importing._sources",
    "itemeval.importing.store_plan": "itemeval.importing._store_plan",
    "itemeval.importing.writer": "itemeval.importing._writer",
    "itemeval.statistics.components": "itemeval.statistics._components",
    "itemeval.statistics.families": "itemeval.statistics._families",
    "itemeval.statistics.intervals": "itemeval.statistics._intervals",
    "itemeval.statistics.multiplicity": "itemeval.statistics._multiplicity",
    "itemeval.statistics.paired": "itemeval.statistics._paired",
    "itemeval.statistics.planning": "itemeval.statistics._planning",
    "itemeval.statistics.power": "itemeval.statistics._power",
    "itemeval.statistics.study": "itemeval.statistics._study",
    "itemeval.statistics.tables": "itemeval.statistics._tables",
    "itemeval.statistics.tallies": "itemeval.statistics._tallies",
    "itemeval.statistics.words": "itemeval.statistics._words",
    "itemeval.judging.agreement": "itemeval.judging._agreement",
    "itemeval.judging.analysis": "itemeval.judging._analysis",
    "itemeval.judging.calibration": "itemeval.judging._calibration",
    "itemeval.judging.gold": "itemeval.judging._gold",
    "itemeval.judging.pairwise": "itemeval.judging._pairwise",
    "itemeval.judging.panels": "itemeval.judging._panels",
    "itemeval.judging.verdicts": "itemeval.judging._verdicts",
    "itemeval.templates.answer_formats": "itemeval.templates._answer_formats",
    "itemeval.templates.messages": "itemeval.templates._messages",
    "itemeval.batch.collect": "itemeval.batch._collect",
    "itemeval.batch.prepare": "itemeval.batch._prepare",
    "itemeval.batch.records": "itemeval.batch._records",
    "itemeval.batch.runner": "itemeval.batch._runner",
    "itemeval.batch.tier": "itemeval.batch._tier",
    "itemeval.config.checks": "itemeval.config._checks",
    "itemeval.config.loading": "itemeval.config._loading",
    "itemeval.config.models": "itemeval.config._models",
    "itemeval.config.problems": "itemeval.config._problems",
    "itemeval.scoring.custom": "itemeval.scoring._custom",
    "itemeval.scoring.extract": "itemeval.scoring._extract",
    "itemeval.scoring.judge": "itemeval.scoring._judge",
    "itemeval.scoring.verifiable": "itemeval.scoring._verifiable",
    # modules made private (calls, planning, datasets, providers, simulator, runtime)
    "itemeval.calls.allowance": "itemeval.calls._allowance",
    "itemeval.calls.hedging": "itemeval.calls._hedging",
    "itemeval.calls.journal": "itemeval.calls._journal",
    "itemeval.calls.requests": "itemeval.calls._requests",
    "itemeval.calls.rows": "itemeval.calls._rows",
    "itemeval.calls.shard_calls": "itemeval.calls._shard_calls",
    "itemeval.calls.spend": "itemeval.calls._spend",
    "itemeval.planning.calibration": "itemeval.planning._calibration",
    "itemeval.planning.design": "itemeval.planning._design",
    "itemeval.planning.estimate": "itemeval.planning._estimate",
    "itemeval.planning.item_index": "itemeval.planning._item_index",
    "itemeval.planning.plan": "itemeval.planning._plan",
    "itemeval.planning.tokens": "itemeval.planning._tokens",
    "itemeval.planning.usage_rows": "itemeval.planning._usage_rows",
    "itemeval.datasets.adapters.convert": "itemeval.datasets.adapters._convert",
    "itemeval.datasets.adapters.files": "itemeval.datasets.adapters._files",
    "itemeval.datasets.adapters.handle": "itemeval.datasets.adapters._handle",
    "itemeval.datasets.adapters.hf": "itemeval.datasets.adapters._hf",
    "itemeval.datasets.adapters.items": "itemeval.datasets.adapters._items",
    "itemeval.datasets.adapters.mapping": "itemeval.datasets.adapters._mapping",
    "itemeval.datasets.adapters.rows": "itemeval.datasets.adapters._rows",
    "itemeval.datasets.adapters.source": "itemeval.datasets.adapters._source",
    "itemeval.datasets.adapters.tables": "itemeval.datasets.adapters._tables",
    "itemeval.datasets.adapters.unique": "itemeval.datasets.adapters._unique",
    "itemeval.datasets.format.attribute_files": "itemeval.datasets.format._attribute_files",
    "itemeval.datasets.format.attributes": "itemeval.datasets.format._attributes",
    "itemeval.datasets.format.dataset": "itemeval.datasets.format._dataset",
    "itemeval.datasets.format.dialect": "itemeval.datasets.format._dialect",
    "itemeval.datasets.format.directory": "itemeval.datasets.format._directory",
    "itemeval.datasets.format.findings": "itemeval.datasets.format._findings",
    "itemeval.datasets.format.item": "itemeval.datasets.format._item",
    "itemeval.datasets.format.modality": "itemeval.datasets.format._modality",
    "itemeval.datasets.format.records": "itemeval.datasets.format._records",
    "itemeval.datasets.format.writer": "itemeval.datasets.format._writer",
    "itemeval.datasets.locks": "itemeval.datasets._locks",
    "itemeval.datasets.workitem": "itemeval.datasets._workitem",
    "itemeval.providers.anthropic_batch": "itemeval.providers._anthropic_batch",
    "itemeval.providers.anthropic_messages": "itemeval.providers._anthropic_messages",
    "itemeval.providers.batch_client": "itemeval.providers._batch_client",
    "itemeval.providers.cache_breakpoints": "itemeval.providers._cache_breakpoints",
    "itemeval.providers.deadline": "itemeval.providers._deadline",
    "itemeval.providers.factory": "itemeval.providers._factory",
    "itemeval.providers.failures": "itemeval.providers._failures",
    "itemeval.providers.gemini": "itemeval.providers._gemini",
    "itemeval.providers.hedge_settings": "itemeval.providers._hedge_settings",
    "itemeval.providers.limits.concurrency": "itemeval.providers.limits._concurrency",
    "itemeval.providers.limits.endpoint": "itemeval.providers.limits._endpoint",
    "itemeval.providers.limits.machine": "itemeval.providers.limits._machine",
    "itemeval.providers.limits.ratebucket": "itemeval.providers.limits._ratebucket",
    "itemeval.providers.limits.ratelimiter": "itemeval.providers.limits._ratelimiter",
    "itemeval.providers.money.attempts": "itemeval.providers.money._attempts",
    "itemeval.providers.money.bounds": "itemeval.providers.money._bounds",
    "itemeval.providers.money.pricing": "itemeval.providers.money._pricing",
    "itemeval.providers.openai_batch": "itemeval.providers._openai_batch",
    "itemeval.providers.openai_chat": "itemeval.providers._openai_chat",
    "itemeval.providers.reachability": "itemeval.providers._reachability",
    "itemeval.providers.retry": "itemeval.providers._retry",
    "itemeval.providers.settings": "itemeval.providers._settings",
    "itemeval.providers.simulated": "itemeval.providers._simulated",
    "itemeval.providers.transport": "itemeval.providers._transport",
    "itemeval.simulator.answers": "itemeval.simulator._answers",
    "itemeval.simulator.anthropic_batches": "itemeval.simulator._anthropic_batches",
    "itemeval.simulator.batches": "itemeval.simulator._batches",
    "itemeval.simulator.engine": "itemeval.simulator._engine",
    "itemeval.simulator.limits": "itemeval.simulator._limits",
    "itemeval.simulator.model": "itemeval.simulator._model",
    "itemeval.simulator.openai_batches": "itemeval.simulator._openai_batches",
    "itemeval.simulator.prompt_cache": "itemeval.simulator._prompt_cache",
    "itemeval.simulator.server": "itemeval.simulator._server",
    "itemeval.simulator.stats": "itemeval.simulator._stats",
    "itemeval.simulator.wire": "itemeval.simulator._wire",
    "itemeval.runtime.actors": "itemeval.runtime._actors",
    "itemeval.runtime.baseline": "itemeval.runtime._baseline",
    "itemeval.runtime.cluster": "itemeval.runtime._cluster",
    "itemeval.runtime.context": "itemeval.runtime._context",
    "itemeval.runtime.dispatch": "itemeval.runtime._dispatch",
    "itemeval.runtime.driver": "itemeval.runtime._driver",
    "itemeval.runtime.event_loop": "itemeval.runtime._event_loop",
    "itemeval.runtime.executors": "itemeval.runtime._executors",
    "itemeval.runtime.failures": "itemeval.runtime._failures",
    "itemeval.runtime.inline_executor": "itemeval.runtime._inline_executor",
    "itemeval.runtime.limiters": "itemeval.runtime._limiters",
    "itemeval.runtime.local_executor": "itemeval.runtime._local_executor",
    "itemeval.runtime.pilot": "itemeval.runtime._pilot",
    "itemeval.runtime.progress": "itemeval.runtime._progress",
    "itemeval.runtime.ray_executor": "itemeval.runtime._ray_executor",
    "itemeval.runtime.shard_reads": "itemeval.runtime._shard_reads",
    "itemeval.runtime.shards": "itemeval.runtime._shards",
    "itemeval.runtime.timeline": "itemeval.runtime._timeline",
    "itemeval.runtime.worker": "itemeval.runtime._worker",
    # modules made private (irt)
    "itemeval.irt.adaptive": "itemeval.irt._adaptive",
    "itemeval.irt.analysis": "itemeval.irt._analysis",
    "itemeval.irt.fit": "itemeval.irt._fit",
    "itemeval.irt.report": "itemeval.irt._report",
    "itemeval.irt.study_run": "itemeval.irt._study_run",
}


def _target(fullname: str) -> str | None:
    """The new path for `fullname`, when it or a package above it moved."""
    parts = fullname.split(".")
    for cut in range(len(parts), 1, -1):
        new = MOVED.get(".".join(parts[:cut]))
        if new is not None:
            return ".".join([new, *parts[cut:]])
    return None


class _AliasLoader(Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module at its new path is already executed; the import machinery has just set
        its `__spec__` to the old path's, so the real one goes back."""
        module.__spec__ = self.spec


class _MovedFinder(MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = _target(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder first on `sys.meta_path` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
