"""A study's judges read from its store: panels as grade columns, every judge and panel
against gold.

`with_panels` adds each panel of the design to the cells (`itemeval.results`) as a grade
condition of kind `panel` (its verdicts computed from its members' grades, `_panels`), so the
leaderboard, agreement and by-facet tables show it like any grader; `study_cells` is a plan's
cells with its panels, what the report, the statistics, `status` and the viewer count.
`judge_analysis` gathers gold (the study's `gold.scorer` verdicts, then a `gold.labels` file,
which wins where both give one) and runs `analyse`; `study_judges` does it for a plan (what
`export` writes as `judges.json`, the report shows and `Study.judges()` returns).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.judging._analysis import Grader, JudgeAnalysis, analyse
from itemeval.judging._gold import Labels, read_label_rows, resolve_labels
from itemeval.judging._panels import PanelRule, panel_grades
from itemeval.judging._verdicts import Shape, column, merge_gold
from itemeval.planning import Design, Plan
from itemeval.results import GradeFacets, SolutionsHook, StudyCells, read_cells, study_clusters
from itemeval.storage import resolve
from itemeval.store import SOLUTIONS


def shape_of(cells: StudyCells) -> Shape:
    return Shape(len(cells.facets.generate), cells.items.num_rows, cells.facets.epochs)


def with_panels(cells: StudyCells, design: Design) -> StudyCells:
    """The cells with each panel of `design` as one more grade condition (kind `panel`), after
    the stored ones (cells read with `locations` give its rows no fragment: null `frag`, `pos`)."""
    if not design.panels:
        return cells
    grade = list(cells.facets.grade)
    codes = {g.id: i for i, g in enumerate(grade)}
    parts = [cells.grades]
    for panel in design.panels:
        if not all(member in codes for member in panel.members):
            continue
        code = len(grade)
        rubric = panel.rubric
        grade.append(
            GradeFacets(
                id=panel.id,
                slug=panel.slug,
                kind="panel",
                grader=f"{panel.name} ({panel.rule_text})",
                grader_model=None,
                rubric=rubric.name,
                pass_score=rubric.pass_score,
                max_score=rubric.max_score,
            )
        )
        rule = PanelRule(panel.combine, panel.tie, panel.pass_at)  # type: ignore[arg-type]
        members = [codes[m] for m in panel.members]
        rows = panel_grades(cells.grades, members, code, rule, shape_of(cells))
        for f in cells.grades.schema:  # located cells' `frag`, `pos`: a panel is stored nowhere
            if f.name not in rows.column_names:
                rows = rows.append_column(f.name, pa.nulls(rows.num_rows, f.type))
        parts.append(rows.select(cells.grades.schema.names).cast(cells.grades.schema))
    facets = dataclasses.replace(cells.facets, grade=tuple(grade))
    return dataclasses.replace(cells, facets=facets, grades=pa.concat_tables(parts))


def study_cells(
    plan: Plan, *, locations: bool = False, on_solutions: SolutionsHook | None = None
) -> StudyCells:
    """The plan's cells (`read_cells`) with its panels as grade conditions (kind `panel`)."""
    cells = read_cells(plan, locations=locations, on_solutions=on_solutions)
    return with_panels(cells, plan.design)


def judge_analysis(
    cells: StudyCells,
    plan: Plan,
    *,
    resamples: int = 2000,
    seed: int = 20240917,
    clusters: np.ndarray | None = None,
) -> JudgeAnalysis | None:
    """Every judge and panel of the cells against the study's gold (None without judges);
    `clusters`: `analysis.cluster_by`'s code per item of the cells, resampled together."""
    facets = cells.facets
    codes = {g.id: i for i, g in enumerate(facets.grade)}
    members = {p.id: tuple(codes.get(m, -1) for m in p.members) for p in plan.design.panels}
    graders = [
        Grader(code, g.id, g.label, g.kind, members.get(g.id, ()))
        for code, g in enumerate(facets.grade)
        if g.kind in ("judge", "panel") and g.id not in {c.id for c in plan.design.pairwise}
    ]
    if not graders:
        return None
    shape = shape_of(cells)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    sources = []
    gold_config = plan.study.gold
    notes = []
    if gold_config.scorer is not None:
        scorer = next(
            (
                i
                for i, g in enumerate(facets.grade)
                if g.kind == "scorer" and g.grader == gold_config.scorer
            ),
            None,
        )
        if scorer is not None:
            rows = cells.valid_grades(scorer)
            keys = shape.keys(
                column(rows, "gen", np.int64), column(rows, "item", np.int64), 0
            ) + column(rows, "epoch", np.int64)
            parts.append((keys, column(rows, "correct")))
            sources.append(f"scorer {gold_config.scorer} ({keys.size:,} answers)")
    if gold_config.labels is not None:
        labels = read_labels(cells, plan, gold_config.labels)
        parts.append((labels.keys, labels.verdicts))
        sources.append(f"labels {gold_config.labels} ({labels.keys.size:,} answers)")
        if labels.stale or labels.unmatched:
            notes.append(
                f"{labels.stale:,} labels of answers generated again since and "
                f"{labels.unmatched:,} of answers outside this selection were left out"
            )
    gold_keys, gold_values = merge_gold(parts)
    result = analyse(
        cells.grades,
        shape,
        graders,
        groups=[g.slug for g in facets.generate],
        gold_keys=gold_keys,
        gold=gold_values,
        gold_source="; ".join(sources),
        resamples=resamples,
        seed=seed,
        clusters=clusters,
    )
    return dataclasses.replace(result, notes=notes)


def read_labels(cells: StudyCells, plan: Plan, path: str) -> Labels:
    """The study's labels file resolved against the current answers of the cells."""
    url = plan.study.input_path(path)
    location = resolve(url, plan.study.options_by_url().for_url(url))
    text = location.read_text()
    facets = cells.facets
    conditions: dict[str, int] = {}
    for code, g in enumerate(facets.generate):
        conditions[g.id] = conditions[g.slug] = code
    items = {item: i for i, item in enumerate(cells.items.column("item_id").to_pylist())}
    gens, item_codes, epochs, hashes = [], [], [], []
    stored = plan.store.read_by_condition(
        SOLUTIONS, [g.id for g in facets.generate], ["item_id", "epoch", "status", "text_hash"]
    )
    for code, g in enumerate(facets.generate):
        table = stored[g.id]
        table = table.filter(pc.equal(table.column("status"), "ok"))
        at = pc.index_in(table.column("item_id"), value_set=cells.items.column("item_id"))
        keep = pc.is_valid(at)
        table, at = table.filter(keep), at.filter(keep)
        gens.append(np.full(table.num_rows, code, dtype=np.int64))
        item_codes.append(np.asarray(at.to_numpy(zero_copy_only=False), dtype=np.int64))
        epochs.append(column(table, "epoch", np.int64))
        hashes.append(np.asarray(table.column("text_hash").to_pylist(), dtype=object))
    shape = shape_of(cells)
    return resolve_labels(
        read_label_rows(text, path),
        path,
        conditions=conditions,
        items=items,
        epochs=facets.epochs,
        answers=(
            np.concatenate(gens) if gens else np.empty(0, np.int64),
            np.concatenate(item_codes) if item_codes else np.empty(0, np.int64),
            np.concatenate(epochs) if epochs else np.empty(0, np.int64),
            np.concatenate(hashes) if hashes else np.empty(0, object),
        ),
        keys_of=lambda g, i, e: shape.keys(g, i, e),
    )


def study_judges(
    plan: Plan, *, resamples: int = 2000, seed: int = 20240917
) -> JudgeAnalysis | None:
    """Every judge and panel of `plan`'s store against gold (what `export` writes as
    `judges.json` and `Study.judges()` returns); None for a study without judges."""
    if not [c for c in plan.design.judges if c.pairwise is None]:
        return None
    cells = study_cells(plan)
    clusters = study_clusters(plan, cells)  # every interval over clusters, as the report's
    codes = clusters.codes if clusters is not None else None
    return judge_analysis(cells, plan, resamples=resamples, seed=seed, clusters=codes)
