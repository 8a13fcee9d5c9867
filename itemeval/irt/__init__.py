"""Item response theory on the store (docs/irt.md).

* `fit`       1PL and 2PL models by joint MAP (numpy): abilities, difficulties,
              discriminations, standard errors, held-out log-likelihood
* `analysis`  `analyze_irt(plan)`: the store's results as a conditions x items binomial matrix
              (other stores' responses matched by dataset, id and content hash), the fits, the
              flagged items, the files under `<store>/analysis/irt/`
* `report`    the report's IRT section (suspicious items next to their text) and its adaptive
              predictions
* `adaptive`  the adaptive estimator on a calibrated bank (shards, ability, predicted accuracy)
* `study_run` adaptive conditions in a study run (rounds of ordinary runs; `run_study` calls it)
"""

from itemeval.irt.analysis import (
    ANALYSIS_DIR,
    ConditionAbility,
    IrtResult,
    ItemParameters,
    analyze_irt,
    item_flag,
)
from itemeval.irt.fit import HeldOut, IrtFit, fit_irt, held_out_loglik

__all__ = [
    "ANALYSIS_DIR",
    "ConditionAbility",
    "HeldOut",
    "IrtFit",
    "IrtResult",
    "ItemParameters",
    "analyze_irt",
    "fit_irt",
    "held_out_loglik",
    "item_flag",
]
