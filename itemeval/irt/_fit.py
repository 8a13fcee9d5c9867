"""1PL and 2PL item response models fitted by joint maximum a posteriori (numpy).

The data are two matrices of the same shape, conditions x items: `correct` (right answers) and
`trials` (graded answers; several epochs of an item count as a binomial, 0 where a condition has
no answer to an item). The 2PL model, in slope-intercept form:

    P(right | condition c, item i) = sigmoid(a_i * theta_c + d_i),   difficulty b_i = -d_i / a_i

with normal priors theta ~ N(0, 1), a ~ N(1, 1) (so a discrimination can come out negative),
d ~ N(0, 3^2). The 1PL model fixes a_i = 1. The fit takes damped Newton steps on every
parameter at once, the log posterior's Hessian inverted blockwise as below (a C x C system per
step: 4-8 steps where the alternating item and ability steps it replaces took 50-300), over the
items' distinct columns of counts (`_patterns`), each weighted by its number of items.

Standard errors come from the joint information matrix (the Fisher information of every
parameter at once plus the priors' precision), inverted blockwise: the abilities' covariance is
the inverse of the Schur complement `H_tt - B H_ii^-1 B'` (C x C, where `H_ii` is block-diagonal
with a 2x2 block per item and `B` the ability-item cross terms), so an ability's interval carries
the items' estimation error too; an item's covariance adds the abilities' error the same way.
`theta_se_fixed` is the ability's SE with the items held at their estimates (too narrow:
benchmarks/irt_fit.py).

`fit_irt(correct, trials, model)` returns an `IrtFit`; `held_out_loglik` chooses between the
models by K-fold cross-validation over cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itemeval.irt._patterns import Patterns, item_patterns

MODELS = ("1pl", "2pl")
MAX_STEP = 1.0  # the largest change of one parameter in one step of the block-diagonal Hessian
#: ... and in one Newton step (the line search guards the rest; the scale a 2PL of few
#: conditions stretches to is reached in 13 steps rather than 29 with a cap of 1).
NEWTON_MAX_STEP = 5.0
THETA_SD = 1.0
A_MEAN, A_SD = 1.0, 1.0
D_SD = 3.0
#: Cross-validation folds of the model choice, and how many standard errors of its gain the 2PL
#: must predict held-out answers better by to be chosen (the one-standard-error rule).
FOLDS = 5
CHOICE_SE = 1.0
Z95 = 1.959963984540054


@dataclass(frozen=True)
class IrtFit:
    """Fitted parameters and their standard errors (arrays over conditions or items)."""

    model: str  # "1pl" | "2pl"
    theta: np.ndarray  # ability per condition
    theta_se: np.ndarray  # from the joint information: the items' error included
    a: np.ndarray  # discrimination per item (all 1 under 1PL)
    a_se: np.ndarray  # (0 under 1PL)
    d: np.ndarray  # intercept per item
    d_se: np.ndarray
    b: np.ndarray  # difficulty per item: -d / a (unbounded where a is near 0: see `a_p`)
    b_se: np.ndarray
    theta_se_fixed: np.ndarray  # the ability's SE with the items held at their estimates
    theta_cov: np.ndarray  # the abilities' covariance (conditions x conditions)
    loglik: float  # log-likelihood of the fitted data (binomial, without the constant)
    iterations: int
    converged: bool

    def probability(self, rows: np.ndarray | None = None) -> np.ndarray:
        """P(right) per condition x item (or for the conditions `rows`)."""
        theta = self.theta if rows is None else self.theta[rows]
        return _softplus_sigmoid(np.outer(theta, self.a) + self.d)[1]

    def standardized(self) -> tuple[np.ndarray, np.ndarray]:
        """Abilities as standard scores among the fitted conditions, with their SEs (see
        `standardize`)."""
        return standardize(self.theta, self.theta_cov)

    @property
    def b_defined(self) -> np.ndarray:
        """Items whose difficulty means something: 1PL, or a 2PL discrimination whose 95%
        interval lies above 0 (elsewhere -d / a divides by a number that may be 0)."""
        if self.model != "2pl":
            return np.ones(len(self.a), dtype=bool)
        return self.a - Z95 * self.a_se > 0


def standardize(theta: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(theta - mean) / sd` over the conditions (sample SD), and its SE by the delta method
    from the abilities' covariance `cov`. Any affine change of the latent scale (which a 2PL
    cannot tell apart) leaves these unchanged, so they compare with known abilities directly."""
    count = len(theta)
    sd = float(theta.std(ddof=1)) if count > 1 else 0.0
    if not sd > 0:
        return np.zeros(count), np.full(count, np.nan)
    z = (theta - theta.mean()) / sd
    jacobian = (np.eye(count) - 1.0 / count) / sd - np.outer(z, z) / ((count - 1) * sd)
    var = np.einsum("ij,jk,ik->i", jacobian, cov, jacobian)
    return z, np.sqrt(np.maximum(var, 0.0))


def _softplus_sigmoid(logit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(1 + e^x) and 1 / (1 + e^-x) from one exponential, stable at both ends, in place
    where it can be (scipy's `expit` and numpy's `logaddexp` are 5-10x slower here)."""
    e = np.abs(logit)
    np.negative(e, out=e)
    np.exp(e, out=e)
    softplus = np.log1p(e)
    softplus += np.maximum(logit, 0.0)
    sigmoid = e + 1.0
    np.reciprocal(sigmoid, out=sigmoid)  # 1 / (1 + e)
    negative = logit < 0
    np.multiply(e, sigmoid, out=sigmoid, where=negative)  # e / (1 + e) where x < 0
    return softplus, sigmoid


def _weighted_state(
    theta: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    two: bool,
) -> tuple[float, np.ndarray, np.ndarray]:
    """At the parameters: the negative log posterior over the items (each pattern column `m`
    times), and per cell the binomial information n p (1 - p) and the residual n p - k."""
    logit = np.outer(theta, a)
    logit += d
    softplus, p = _softplus_sigmoid(logit)
    cell = n * softplus
    cell -= k * logit
    prior = d * d / (2 * D_SD**2)
    if two:
        prior += (a - A_MEAN) ** 2 / (2 * A_SD**2)
    value = float(m @ (cell.sum(0) + prior)) + float(theta @ theta) / (2 * THETA_SD**2)
    residual = n * p
    residual -= k
    p *= 1.0 - p
    p *= n
    return value, p, residual


def _newton_step(
    theta: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    m: np.ndarray,
    w: np.ndarray,
    residual: np.ndarray,
    two: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]:
    """The Newton step on every parameter at once (the observed Hessian, inverted blockwise as
    in `_standard_errors`), and the directional derivative along it. Where the Hessian is not
    positive definite (far from the optimum) the block-diagonal one's step instead: each
    ability and each item on its own, a descent direction still."""
    g_t = (residual @ (a * m)) + theta / THETA_SD**2
    g_d = residual.sum(0) + d / D_SD**2
    h_t = w @ (a * a * m) + 1.0 / THETA_SD**2
    h_dd = w.sum(0) + 1.0 / D_SD**2
    v = w * a  # d2/dtheta_c dd_i
    if two:
        g_a = theta @ residual + (a - A_MEAN) / A_SD**2
        h_aa = (theta * theta) @ w + 1.0 / A_SD**2
        h_ad = theta @ w
        det = h_aa * h_dd - h_ad * h_ad
        inv_aa, inv_dd, inv_ad = h_dd / det, h_aa / det, -h_ad / det
        u = v * theta[:, None]
        u += residual  # d2/dtheta_c da_i: the observed Hessian's residual term
        m_a = u * (inv_aa * m)
        m_a += v * (inv_ad * m)
        m_d = u * (inv_ad * m)
        m_d += v * (inv_dd * m)
        through = m_a @ u.T + m_d @ v.T
        rhs = g_t - m_a @ g_a - m_d @ g_d
    else:
        m_d = v * (m / h_dd)
        through = m_d @ v.T
        rhs = g_t - m_d @ g_d
    schur = np.diag(h_t) - (through + through.T) / 2
    try:
        lower = np.linalg.cholesky(schur)
    except np.linalg.LinAlgError:
        step_t = g_t / h_t
        if two:
            step_a, step_d = inv_aa * g_a + inv_ad * g_d, inv_ad * g_a + inv_dd * g_d
        else:
            step_a, step_d = np.zeros_like(a), g_d / h_dd
        newton = False
    else:
        newton = True
        step_t = np.linalg.solve(lower.T, np.linalg.solve(lower, rhs))
        left_d = g_d - v.T @ step_t
        if two:
            left_a = g_a - u.T @ step_t
            step_a = inv_aa * left_a + inv_ad * left_d
            step_d = inv_ad * left_a + inv_dd * left_d
        else:
            step_a, step_d = np.zeros_like(a), left_d / h_dd
    slope = float(g_t @ step_t) + float(m @ (g_d * step_d))
    if two:
        slope += float(m @ (g_a * step_a))
    return step_t, step_a, step_d, slope, newton


def _map(
    k: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    two: bool,
    start: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    max_iterations: int,
    tolerance: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """The joint MAP by damped Newton steps: each step scaled so that no parameter moves by
    more than `NEWTON_MAX_STEP` (`MAX_STEP` where the Hessian is not positive definite), then
    halved until the posterior rises enough (Armijo). Converged when a step would move no
    parameter by more than `tolerance` (near the optimum Newton converges quadratically, so the
    estimates are then far more precise than that)."""
    conditions, columns = k.shape
    if start is not None:
        theta, a, d = (np.array(x, dtype=np.float64) for x in start)
    else:
        # From the observed rates: ability from each condition's accuracy, the intercept from
        # each item's.
        with np.errstate(invalid="ignore", divide="ignore"):
            row_rate = np.clip((k @ m) / np.maximum(n @ m, 1), 0.02, 0.98)
            col_rate = np.clip(k.sum(0) / np.maximum(n.sum(0), 1), 0.02, 0.98)
        theta = np.log(row_rate / (1 - row_rate))
        spread = theta.std()
        theta = (theta - theta.mean()) / (spread or 1.0) if conditions > 1 else theta * 0
        d = np.log(col_rate / (1 - col_rate))
        a = np.ones(columns)
    value, w, residual = _weighted_state(theta, a, d, k, n, m, two)
    iterations, converged = 0, False
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (read after the loop)
        step_t, step_a, step_d, slope, newton = _newton_step(theta, a, d, m, w, residual, two)
        largest = max(
            float(np.abs(step_t).max(initial=0.0)),
            float(np.abs(step_a).max(initial=0.0)),
            float(np.abs(step_d).max(initial=0.0)),
        )
        if largest < tolerance:  # at the optimum: this last step is far below `tolerance`
            theta, a, d = theta - step_t, a - step_a, d - step_d
            converged = True
            break
        size = min(1.0, (NEWTON_MAX_STEP if newton else MAX_STEP) / largest)
        while True:
            trial = (theta - size * step_t, a - size * step_a, d - size * step_d)
            new_value, new_w, new_residual = _weighted_state(*trial, k, n, m, two)
            if new_value <= value - 1e-4 * size * slope or size * largest < tolerance:
                break
            size /= 2
        theta, a, d = trial
        value, w, residual = new_value, new_w, new_residual
        if size * largest < tolerance:  # one step moved nothing by more than `tolerance`
            converged = True
            break
    return theta, a, d, iterations, converged


def fit_irt(
    correct: np.ndarray,
    trials: np.ndarray,
    model: str = "2pl",
    *,
    max_iterations: int = 100,
    tolerance: float = 1e-4,
    start: IrtFit | None = None,
    compress: bool = True,
    patterns: Patterns | None = None,
) -> IrtFit:
    """Fit `model` ("1pl" or "2pl") to the counts (conditions x items) by joint MAP, from the
    observed rates or from `start` (a 2PL fit starts well from the 1PL one).

    With `compress` (the default) the fit runs over the items' distinct columns of counts
    (`item_patterns`), each weighted by how many items share it: items of one column have the
    same likelihood and prior, so they share their MAP parameters, and the fit is the same as
    the plain one at the cost of the distinct columns (a start that differs within a column
    starts from one of its items). `patterns`: the `item_patterns` of these counts, when the
    caller has them already."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    k = np.asarray(correct, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if k.shape != n.shape or k.ndim != 2:
        raise ValueError("correct and trials must be matrices of the same shape")
    two = model == "2pl"
    if compress or patterns is not None:
        patterns = patterns if patterns is not None else item_patterns(k, n)
        k, n, m = patterns.correct, patterns.trials, patterns.count
        of_item: np.ndarray | None = patterns.of_item
        pick: np.ndarray | slice = patterns.first
    else:
        m, of_item, pick = np.ones(k.shape[1]), None, slice(None)
    begin = None if start is None else (start.theta, start.a[pick], start.d[pick])
    theta, a, d, iterations, converged = _map(k, n, m, two, begin, max_iterations, tolerance)
    if not two:
        a = np.ones(len(d))
    logit = np.outer(theta, a) + d
    softplus, _ = _softplus_sigmoid(logit)
    loglik = float(m @ (k * logit - n * softplus).sum(0))
    errors = _standard_errors(theta, a, d, n, m, two)
    per_item = {"a": a, "d": d, **{key: errors.pop(key) for key in ("a_se", "d_se", "b", "b_se")}}
    if of_item is not None:
        per_item = {key: value[of_item] for key, value in per_item.items()}
    return IrtFit(
        model=model,
        theta=theta,
        loglik=loglik,
        iterations=iterations,
        converged=converged,
        **per_item,
        **errors,
    )


def _standard_errors(
    theta: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    trials: np.ndarray,
    m: np.ndarray,
    two: bool,
) -> dict[str, np.ndarray]:
    """SEs from the joint information matrix (expected Fisher information plus the priors'
    precision), inverted blockwise (see the module doc); column `j` stands for `m[j]` items, so
    the abilities' information and the items' error in them sum over the real items."""
    _, p = _softplus_sigmoid(np.outer(theta, a) + d)
    w = trials * p * (1 - p)  # binomial information per cell
    h_t = w @ (a * a * m) + 1.0 / THETA_SD**2
    i_dd = w.sum(0) + 1.0 / D_SD**2
    v = w * a  # cross information of (theta_c, d_i): w a_i
    if two:
        i_aa = (theta * theta) @ w + 1.0 / A_SD**2
        i_ad = theta @ w
        det = i_aa * i_dd - i_ad * i_ad
        inv_aa, inv_dd, inv_ad = i_dd / det, i_aa / det, -i_ad / det
        u = v * theta[:, None]  # cross information of (theta_c, a_i): w a_i theta_c
        m_a = u * inv_aa + v * inv_ad  # B_i H_ii^-1, column a
        m_d = u * inv_ad + v * inv_dd  # column d
        through = (m_a * m) @ u.T + (m_d * m) @ v.T
    else:
        inv_dd = 1.0 / i_dd
        m_d = v * inv_dd
        through = (m_d * m) @ v.T
    schur = np.diag(h_t) - (through + through.T) / 2
    cov = np.linalg.inv(schur)
    cov = (cov + cov.T) / 2
    theta_se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    # Items: H_ii^-1 + (B_i H_ii^-1)' cov (B_i H_ii^-1)
    var_d = inv_dd + np.einsum("ci,ci->i", cov @ m_d, m_d)
    if two:
        var_a = inv_aa + np.einsum("ci,ci->i", cov @ m_a, m_a)
        cov_ad = inv_ad + np.einsum("ci,ci->i", cov @ m_a, m_d)
        with np.errstate(divide="ignore", invalid="ignore"):
            b = -d / a
            var_b = var_d / a**2 + d**2 * var_a / a**4 - 2 * d * cov_ad / a**3
        a_se = np.sqrt(np.maximum(var_a, 0.0))
    else:
        b, var_b, a_se = -d, var_d, np.zeros(len(a))
    return {
        "theta_se": theta_se,
        "theta_se_fixed": 1.0 / np.sqrt(h_t),
        "theta_cov": cov,
        "a_se": a_se,
        "d_se": np.sqrt(np.maximum(var_d, 0.0)),
        "b": b,
        "b_se": np.sqrt(np.maximum(var_b, 0.0)),
    }


@dataclass(frozen=True)
class HeldOut:
    """The model choice: mean log-likelihood per held-out answer (higher is better), and the
    model chosen with the reason."""

    cells: int  # condition x item cells, each left out once
    answers: int  # graded answers in them
    per_answer: dict[str, float]  # model -> mean log-likelihood per answer ("base": accuracy)
    folds: int
    gain: float  # 2PL minus 1PL, per answer
    gain_se: float  # its standard error, items as the units
    chosen: str  # "1pl" | "2pl"
    reason: str


def held_out_loglik(
    correct: np.ndarray,
    trials: np.ndarray,
    *,
    folds: int = FOLDS,
    seed: int = 0,
) -> HeldOut:
    """K-fold cross-validation over the answered cells: each fold of cells (drawn at random
    with `seed`) is left out once, the 1PL and 2PL fitted to the rest, and its answers scored.
    "base" is the condition's accuracy alone (no item effect). The 2PL is chosen when it
    predicts the held-out answers better by more than `CHOICE_SE` standard errors of the gain
    (items as the units); otherwise the simpler 1PL is."""
    k = np.asarray(correct, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    answered = np.flatnonzero(n > 0)
    fold_of = np.full(n.size, -1)
    rng = np.random.default_rng(seed)
    fold_of[answered[rng.permutation(len(answered))]] = np.arange(len(answered)) % folds
    fold_of = fold_of.reshape(n.shape)
    per_item = {m: np.zeros(n.shape[1]) for m in ("base", *MODELS)}
    for fold in range(folds):
        held = fold_of == fold
        k_fit, n_fit = np.where(held, 0.0, k), np.where(held, 0.0, n)
        k_out, n_out = np.where(held, k, 0.0), np.where(held, n, 0.0)
        rate = np.clip(k_fit.sum(1) / np.maximum(n_fit.sum(1), 1), 1e-3, 1 - 1e-3)
        logits = {"base": np.repeat(np.log(rate / (1 - rate))[:, None], n.shape[1], axis=1)}
        fit: IrtFit | None = None
        for model in MODELS:
            fit = fit_irt(k_fit, n_fit, model, start=fit)
            logits[model] = np.outer(fit.theta, fit.a) + fit.d
        for model, logit in logits.items():
            softplus, _ = _softplus_sigmoid(logit)
            per_item[model] += (k_out * logit - n_out * softplus).sum(0)
    answers = float(n.sum())
    per_answer = {m: float(v.sum()) / max(answers, 1.0) for m, v in per_item.items()}
    diff = per_item["2pl"] - per_item["1pl"]
    items = len(diff)
    gain = float(diff.sum()) / max(answers, 1.0)
    gain_se = float(np.sqrt(items * diff.var(ddof=1)) / max(answers, 1.0)) if items > 1 else 0.0
    chosen = "2pl" if gain > CHOICE_SE * gain_se else "1pl"
    one, two = per_answer["1pl"], per_answer["2pl"]
    figures = f"{two:.4f} against {one:.4f} per answer"
    if chosen == "2pl":
        reason = (
            f"the 2PL predicts held-out answers better ({figures}; gain {gain:.4f}, SE "
            f"{gain_se:.4f})"
        )
    elif gain <= 0:
        reason = f"the 2PL predicts held-out answers no better ({figures})"
    else:
        reason = (
            f"the 2PL's gain on held-out answers is within {CHOICE_SE:g} standard error "
            f"({figures}; gain {gain:.4f}, SE {gain_se:.4f}): the simpler model is kept"
        )
    return HeldOut(
        cells=len(answered),
        answers=int(answers),
        per_answer=per_answer,
        folds=folds,
        gain=gain,
        gain_se=gain_se,
        chosen=chosen,
        reason=reason,
    )
