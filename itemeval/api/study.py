# One piece: `Study` is one facade class, a short method per command delegating to its package.
"""`Study`: a study in Python, doing everything the command line does (docs/python-api.md).

    study = Study.from_yaml("study.yaml")         # or Study.from_dict({...})
    study.plan()                                  # the grid and the cells (`itemeval plan`)
    study.estimate().remaining_usd                # tokens and USD (`itemeval estimate`)
    study.run(limit=20)                           # generate, then grade (`itemeval run`)
    study.status()                                # per condition (`itemeval status`)
    study.results().to_pandas()                   # the long table
    study.export(), study.report()                # files (`itemeval export`, `report`)
    study.comparisons().comparisons               # paired comparisons (what `export` writes)
    study.plan(detect=0.03)                       # items and epochs for 3 points (`plan --detect`)
    study.irt()                                   # item response theory (`itemeval analyze irt`)

Every method takes the selection options of its command (`store`, `condition`, `limit`, ...) as
keyword arguments with the same meaning, raises the same errors (`ConfigError` and the other
`ItemevalError`s, whose `exit_code` is the CLI's) and returns the object the CLI prints. The CLI
is a thin layer over this class.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from itemeval.api.summaries import (
    EstimateSummary,
    PlanSummary,
    RunSummary,
    StatusSummary,
    status_results,
)
from itemeval.config import StudyConfig, load_study, study_from_mapping
from itemeval.errors import ConfigError, InputError, Problem
from itemeval.export import (
    FORMATS,
    ExportOptions,
    ExportResult,
    GoldSample,
    export_study,
    parse_formats,
    write_gold_sample,
)
from itemeval.judging import JudgeAnalysis, PairwiseAnalysis, study_judges, study_pairwise
from itemeval.planning import Design, Plan, build_design, make_plan
from itemeval.report import (
    Bootstrap,
    ReportResult,
    keep_numbers,
    kept_numbers,
    leaderboard_text,
    numbers_key,
    study_numbers,
    write_report,
)
from itemeval.results import LONG_TABLE_SCHEMA, LongTableScan, read_cells
from itemeval.runtime.batch import open_batches

if TYPE_CHECKING:
    from itemeval.irt import IrtResult
    from itemeval.statistics import ComparisonTables
from itemeval.store import runs_spend, status_counts

Conditions = str | Sequence[str] | None
STAGES = ("generate", "grade")


class Study:
    """A validated study and what can be done with it. Build one with `from_yaml` or
    `from_dict`; `config` is the validated study file (`itemeval.config.StudyConfig`)."""

    def __init__(self, config: StudyConfig):
        self.config = config
        self._store_only: str | None = None  # a store read without a study file

    @classmethod
    def from_store(cls, url: str) -> Study:
        """The results in the store at `url`, without a study file: `status`, `results`,
        `leaderboard`, `export` and `report` read them (imported conditions and the
        conditions native runs recorded in their manifests; docs/importing.md). Running needs
        a study file."""
        from itemeval.importing import store_plan

        study = cls(store_plan(url).study)
        study._store_only = url
        return study

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> Study:
        """Read a study file, with the CLI's validation and errors (`ConfigError` naming the
        file, the line and the field)."""
        return cls(load_study(path))

    @classmethod
    def from_dict(
        cls, mapping: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None
    ) -> Study:
        """A study from a mapping with the content of a study file. Errors name the field path
        (there is no file); relative dataset, prompt and pricing paths resolve against
        `base_dir` (default: the working directory)."""
        return cls(study_from_mapping(mapping, base_dir=base_dir))

    def __repr__(self) -> str:
        where = self.config.path or self.config.base_dir
        return f"Study({self.config.study!r}, {str(where)!r})"

    # -- what it is ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.study

    @property
    def path(self) -> Path | None:
        """The study file (None for a study from a mapping)."""
        return self.config.path

    @property
    def store_url(self) -> str:
        """Where results go unless a method is given another `store`."""
        return self.config.store_url

    def design(self, *, condition: Conditions = None) -> Design:
        """The conditions and their ids (no data is read)."""
        return build_design(self.config).select(_selectors(condition))

    # -- look before you spend -------------------------------------------------------------
    def plan(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        force: bool = False,
        accept_dataset_change: Sequence[str] = (),
        detect: float | None = None,
        power: float | None = None,
        alpha: float | None = None,
        pair: Sequence[str] | None = None,
    ) -> PlanSummary:
        """The grid, the cells and what is still to do. Reads the datasets and the store,
        writes nothing. With `detect` (a difference in accuracy, e.g. 0.03), also the items and
        epochs a paired comparison of two conditions needs to detect it with probability
        `power` (0.8) at level `alpha` (`analysis.alpha`), and what that design would cost
        (`PlanSummary.power`; docs/statistics.md): for the `pair` of conditions named (one
        selector: the hardest pair of the conditions it matches), or the hardest realistic
        pair. `power`, `alpha` and `pair` without `detect` are an error."""
        _check_power(detect, power, alpha, pair)
        plan = self._plan(store, limit, condition, force=force, accept=accept_dataset_change)
        if detect is None:
            return PlanSummary.of(plan)
        from itemeval.statistics import power_plan_of

        power = 0.8 if power is None else power
        alpha = self.config.analysis.alpha if alpha is None else alpha
        return PlanSummary.of(plan, power_plan_of(plan, detect, power, alpha, pair))

    def estimate(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        force: bool = False,
        accept_dataset_change: Sequence[str] = (),
    ) -> EstimateSummary:
        """Tokens and USD per condition, stage and model, total and remaining, and what the
        gate would say. Writes nothing."""
        return EstimateSummary.of(
            self._plan(store, limit, condition, force=force, accept=accept_dataset_change)
        )

    # -- do the work -----------------------------------------------------------------------
    def run(
        self,
        stages: str | Sequence[str] = STAGES,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: str | None = None,
        force: bool = False,
        yes: bool = False,
        address: str | None = None,
        in_process: bool = False,
        accept_dataset_change: Sequence[str] = (),
        quiet: bool = False,
        interactive: bool | None = None,
        argv: Sequence[str] | None = None,
        pilot: float | None = None,
        adaptive: bool = True,
    ) -> RunSummary:
        """Run `stages` ("generate", "grade", or both, the default) over the pending cells.

        `address` names a Ray cluster (default `$RAY_ADDRESS`, else a local Ray for this run);
        `in_process=True` runs the shards in this process without Ray (`--no-ray`). `yes`
        confirms a cost above `budget.confirm_above_usd`; `interactive` says whether to ask
        instead (default: when stdin is a terminal). `argv` is recorded in the run's manifest
        (default `sys.argv`). `pilot`: run the first N items of each dataset first (or that
        share of them, 0 < N < 1), estimate the rest from what they cost, and ask the gate again
        (`yes` answers it). `adaptive=False` runs the models with `adaptive:` on every item
        (docs/irt.md). Raises for bad input, a declined gate (exit 3) or a cap the
        estimate already exceeds (exit 4); how the run itself ended is in the result.
        """
        from itemeval.runtime import RunOptions, run_study

        chosen = _stages(stages)
        options = RunOptions(
            stages=chosen,  # type: ignore[arg-type]
            command="run" if len(chosen) == 2 else chosen[0],
            store_url=store,
            condition=condition,
            limit=limit,
            force=force,
            yes=yes,
            address=address,
            no_ray=in_process,
            accept_changed=tuple(accept_dataset_change),
            quiet=quiet,
            interactive=interactive,
            argv=list(sys.argv if argv is None else argv),
            pilot=pilot,
            adaptive=adaptive,
        )
        return RunSummary.of(run_study(self.config, options))

    def reuse_imported(self, *, store: str | None = None, condition: Conditions = None) -> list:
        """Copy imported answers into the native conditions with the same model, parameters
        and prompt, for the cells they do not hold yet (what `run --reuse-imported` does first;
        a run never does it by itself). Returns one `Reused(imported, native, rows)` a pair."""
        from itemeval.importing import reuse_imported
        from itemeval.store import StudyStore

        url = store or self.config.store_url
        target = StudyStore.open(url, self.config.options_by_url(url).for_url(url))
        return reuse_imported(self.design(condition=condition), target)

    # -- see where it stands -----------------------------------------------------------------
    def status(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        differences: bool = True,
    ) -> StatusSummary:
        """Per condition: expected, done, pending, errors by code, parse failures, cached,
        tokens and USD; and what the runs paid. Reads the store only. With `differences`
        (the default), also the report's numbers per generate condition (headline accuracy
        with its interval, tier and rank interval; paid, saved by the response cache, alone,
        per correct answer: `StatusSummary.results`) and whether the headline grader's paired
        comparisons tell the conditions apart yet (`StatusSummary.differences`); these read
        every grade."""
        plan = self._plan(store, limit, condition, with_pending=False)
        design = plan.design
        expected = plan.item_count * design.epochs
        per_condition: int | None = expected
        per_grade: int | None = expected * len(design.generate)
        if self._store_only is not None:  # without a design, nothing is expected
            per_condition = per_grade = None
        generate = status_counts(
            plan.store, "solutions", [c.id for c in design.generate], per_condition, plan.pricing
        )
        grade = status_counts(
            plan.store, "grades", [c.id for c in design.grade], per_grade, plan.pricing
        )
        rows = [
            s.as_dict() | {"slug": design.condition(s.condition_id).slug}
            for s in (*generate, *grade)
        ]
        shown: dict[str, Any] = {"differences": None, "results": []}
        if differences:
            shown = _status_numbers(plan)
        return StatusSummary(
            differences=shown["differences"],
            results=shown["results"],
            study=plan.study.study,
            store=plan.store.root.url,
            items=plan.item_count,
            epochs=design.epochs,
            conditions=rows,
            runs=runs_spend(plan.store).model_copy(
                update={"study_max_usd": plan.study.budget.study_max_usd}
            ),
            open_batches=open_batches(plan.store.root),
        )

    def results(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        include_ungraded: bool = False,
    ) -> pa.Table:
        """The long table (one row per grading event: item fields, every facet, solution,
        grade, tokens, USD, latency, error codes; docs/results.md) as one arrow table, read
        from the store. `.to_pandas()` gives a DataFrame when pandas is installed. It is held
        in memory: for very large studies, `export` streams it to parquet instead."""
        scan = LongTableScan(
            self._plan(store, limit, condition, with_pending=False),
            include_ungraded=include_ungraded,
        )
        batches = [batch for _, batch in scan]
        return pa.Table.from_batches(batches, schema=LONG_TABLE_SCHEMA)

    def leaderboard(
        self, *, store: str | None = None, limit: int | None = None, condition: Conditions = None
    ) -> str:
        """The headline leaderboard as text, with 95% bootstrap intervals (what `itemeval demo`
        prints after its run)."""
        return leaderboard_text(self._plan(store, limit, condition, with_pending=False))

    def comparisons(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        resamples: int = Bootstrap().resamples,
        seed: int = Bootstrap().seed,
    ) -> ComparisonTables:
        """Paired comparisons of every pair of conditions (and of models, and per dataset)
        under every grader, with adjusted p-values, rank intervals, tiers and variance
        components (docs/statistics.md): `.comparisons`, `.rankings` and
        `.variance_components` are the arrow tables `export` writes."""
        from itemeval.statistics import ComparisonTables, analysis_options, plan_statistics

        if resamples < 1:
            raise InputError(Problem("must be at least 1", field="resamples"))
        plan = self._plan(store, limit, condition, with_pending=False)
        return ComparisonTables(plan_statistics(plan, analysis_options(plan, resamples, seed)))

    def export(
        self,
        out: str | None = None,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        formats: str | Sequence[str] = FORMATS,
        eee_version: str = "0.2.0",
        include_ungraded: bool = False,
        organization: str = "unknown",
        relationship: str = "third_party",
    ) -> ExportResult:
        """Write the long table (parquet, CSV) and Every Eval Ever records under `out` (any
        fsspec URL; default `<store>/exports`). `formats`: a list, or comma-separated
        (`"parquet,csv"`, as `--format`)."""
        options = ExportOptions(
            out=out,
            formats=parse_formats(formats),
            eee_version=eee_version,
            include_ungraded=include_ungraded,
            organization=organization,
            relationship=relationship,
        )
        options.check()  # before reading anything: a typo in a format costs nothing
        return export_study(self._plan(store, limit, condition, with_pending=False), options)

    def report(
        self,
        out: str | None = None,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        resamples: int = Bootstrap().resamples,
        seed: int = Bootstrap().seed,
    ) -> ReportResult:
        """Write report.html (with plots) and report.md under `out` (default
        `<store>/exports`): leaderboard with bootstrap intervals, sensitivity, agreement,
        cost, errors, item difficulty."""
        if resamples < 1:
            raise InputError(Problem("must be at least 1", field="resamples"))
        bootstrap = Bootstrap(resamples=resamples, seed=seed)
        return write_report(self._plan(store, limit, condition, with_pending=False), out, bootstrap)

    def judges(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        resamples: int = Bootstrap().resamples,
        seed: int = Bootstrap().seed,
    ) -> JudgeAnalysis | None:
        """Every judge and panel against the study's gold (`gold:`): sensitivity and
        specificity, accuracy corrected for the judge's errors with its interval, how far the
        raw figure is off; each panel's agreement and effective number of independent judges
        (None for a study without judges). See docs/judges.md."""
        if resamples < 1:
            raise InputError(Problem("must be at least 1", field="resamples"))
        plan = self._plan(store, limit, condition, with_pending=False)
        return study_judges(plan, resamples=resamples, seed=seed)

    def pairwise(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
    ) -> PairwiseAnalysis | None:
        """The first pairwise judge's verdicts against its baseline (`kind: pairwise`): win
        rate with a paired interval, position bias, length bias and the length-controlled win
        rate, Bradley-Terry strengths (None without a pairwise judge). See docs/judges.md;
        `pairwise_all()` gives one per pairwise grader and rubric."""
        found = self.pairwise_all(store=store, limit=limit, condition=condition)
        return found[0] if found else None

    def pairwise_all(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
    ) -> list[PairwiseAnalysis]:
        """One pairwise analysis per pairwise grader and rubric."""
        plan = self._plan(store, limit, condition, with_pending=False)
        return study_pairwise(plan)

    def gold_sample(
        self,
        n: int | None = None,
        out: str | None = None,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
    ) -> GoldSample:
        """Draw `n` answers (default `gold.sample`) stratified by condition and dataset and
        write a labelling file (CSV, default `<study>-gold-sample.csv`) with an empty
        `verdict` column for a person to fill; name it in `gold.labels` once filled."""
        n = n or self.config.gold.sample
        if n is None:
            raise InputError(
                Problem(
                    "how many answers to sample?",
                    field="gold.sample",
                    hint="pass --gold-sample N or set gold.sample in the study",
                )
            )
        return write_gold_sample(self._plan(store, limit, condition, with_pending=False), n, out)

    def irt(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        with_stores: Sequence[str] = (),
        write: bool = True,
    ) -> IrtResult:
        """Fit 1PL and 2PL item response models to the headline grader's results (and those
        other stores' `analyze irt` stored, `with_stores`): each condition's ability, each
        item's difficulty and discrimination, suspicious items flagged; written under
        `<store>/analysis/irt/` unless `write=False` (`itemeval analyze irt`, docs/irt.md)."""
        from itemeval.irt import analyze_irt

        plan = self._plan(store, limit, condition, with_pending=False)
        return analyze_irt(plan, with_stores=with_stores, write=write)

    def view(
        self,
        *,
        store: str | None = None,
        limit: int | None = None,
        condition: Conditions = None,
        host: str = "127.0.0.1",
        port: int = 8700,
        token: str | None = None,
        open_browser: bool = True,
        block: bool = True,
    ) -> Any:
        """Serve the read-only web viewer over the store (`itemeval view`) until interrupted;
        `block=False` returns the running `itemeval.view.ViewServer` (its `url`; `stop()`)."""
        from itemeval.view import ViewOptions, ViewServer

        plan = self._plan(store, limit, condition, with_pending=False)
        _require_stored(plan)
        options = ViewOptions(host=host, port=port, token=token, open_browser=open_browser)
        server = ViewServer(plan, options)
        if block:
            server.serve()
        else:
            server.start()
        return server

    # -- inside ------------------------------------------------------------------------------
    def _plan(
        self,
        store: str | None,
        limit: int | None,
        condition: Conditions,
        *,
        force: bool = False,
        accept: Sequence[str] = (),
        with_pending: bool = True,
    ) -> Plan:
        if self._store_only is not None:
            from itemeval.importing import store_plan

            return store_plan(store or self._store_only, condition=_selectors(condition))
        return make_plan(
            self.config,
            store_url=store,
            limit=limit,
            condition=_selectors(condition),  # type: ignore[arg-type]
            force=force,
            accept_changed=accept,
            with_pending=with_pending,
            estimate=with_pending,  # a reading command needs no token counts
        )


#: Where `write_starter_study` puts the sample dataset, beside the study file.
STARTER_DATASET = "datasets/arithmetic"


def write_starter_study(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write the commented starter study file (`itemeval init`) and, beside it, the sample
    dataset it names (`datasets/arithmetic/`; files already there are left alone); refuses to
    overwrite the study file unless `force`."""
    target = Path(path)
    if target.exists() and not force:
        raise ConfigError(
            Problem("file exists", file=str(target), hint="choose another path or pass --force")
        )
    package = resources.files("itemeval")
    text = package.joinpath("starter_study.yaml").read_text("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    sample = package.joinpath("starter_datasets", "arithmetic")
    folder = target.parent / STARTER_DATASET
    for part in sample.iterdir():
        if part.is_file() and not (folder / part.name).exists():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / part.name).write_bytes(part.read_bytes())
    target.write_text(text, encoding="utf-8")
    return target


def _status_numbers(plan: Plan) -> dict[str, Any]:
    """What `status` shows of the report's numbers (`differences`, `results`): kept from the
    last call while the store and the study are as they were (`report.kept_numbers`), else
    computed (every grader's grades: the costs count them; no panels, status shows the
    headline) and kept."""
    key = numbers_key(plan)
    kept = kept_numbers(plan, key)
    if kept is not None:
        return kept
    numbers = study_numbers(plan, read_cells(plan))
    shown = {"differences": numbers.differences(), "results": status_results(numbers)}
    keep_numbers(plan, key, shown)
    return shown


def _require_stored(plan: Plan) -> None:
    """A viewer over a store that holds nothing (a mistyped `--store`) is refused."""
    from itemeval.store import list_manifests

    root = plan.store.root
    if (
        list_manifests(plan.store)
        or root.join("dataset_locks.json").exists()
        or root.join("imports").exists()
    ):
        return
    raise InputError(
        Problem(
            "nothing stored here: no run has written to this store and nothing was imported",
            file=root.url,
            hint="check --store (or the study's `store:`); run the study first, or "
            "`itemeval import` into the store",
        )
    )


def _check_power(
    detect: float | None,
    power: float | None,
    alpha: float | None,
    pair: Sequence[str] | None,
) -> None:
    problems = []
    if detect is None:
        for name, value in (("power", power), ("alpha", alpha), ("pair", pair)):
            if value is not None:
                problems.append(
                    Problem(
                        f"--{name} plans for a difference, and no --detect says which",
                        field=name,
                        hint="add --detect DIFF (e.g. --detect 0.03 for 3 points), or drop "
                        f"--{name}",
                    )
                )
        if problems:
            raise InputError(problems)
        return
    if not 0 < detect < 1:
        problems.append(
            Problem(
                f"{detect} is not a difference in accuracy",
                field="detect",
                hint="a share between 0 and 1, e.g. 0.03 for 3 points",
            )
        )
    if power is not None and not 0 < power < 1:
        problems.append(Problem(f"{power} is not a probability", field="power", hint="e.g. 0.8"))
    if alpha is not None and not 0 < alpha < 1:
        problems.append(Problem(f"{alpha} is not a level", field="alpha", hint="e.g. 0.05"))
    if problems:
        raise InputError(problems)


def _selectors(condition: Conditions) -> list[str] | None:
    if condition is None:
        return None
    return [condition] if isinstance(condition, str) else list(condition)


def _stages(stages: str | Sequence[str]) -> tuple[str, ...]:
    wanted = [stages] if isinstance(stages, str) else list(stages)
    if "run" in wanted:
        wanted = [s for s in wanted if s != "run"] + list(STAGES)
    unknown = [s for s in wanted if s not in STAGES]
    if unknown or not wanted:
        raise InputError(
            Problem(
                f"unknown stage(s) {', '.join(map(repr, unknown)) or '(none given)'}",
                field="stages",
                hint="generate, grade, or both (the default)",
            )
        )
    return tuple(s for s in STAGES if s in wanted)
