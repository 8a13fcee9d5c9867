"""1PL and 2PL item response models fitted by joint maximum a posteriori (numpy).

The data are two matrices of the same shape, conditions x items: `correct` (right answers) and
`trials` (graded answers; several epochs of an item count as a binomial, 0 where a condition has
no answer to an item). The 2PL model, in slope-intercept form:

    P(right | condition c, item i) = sigmoid(a_i * theta_c + d_i),   difficulty b_i = -d_i / a_i

with normal priors theta ~ N(0, 1), a ~ N(1, 1) (so a discrimination can come out negative),
d ~ N(0, 3^2). The 1PL model fixes a_i = 1. Every parameter is fitted at once by L-BFGS on the
log posterior, whose gradient is three matrix products over the residuals n*p - k.

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

MODELS = ("1pl", "2pl")
MAX_STEP = 1.0  # the largest change of one parameter in one Newton step
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


def _loglik(logit: np.ndarray, correct: np.ndarray, trials: np.ndarray) -> float:
    softplus, _ = _softplus_sigmoid(logit)
    return float(np.sum(correct * logit, dtype=np.float64)) - float(
        np.sum(trials * softplus, dtype=np.float64)
    )


def _weights_residuals(
    theta: np.ndarray, a: np.ndarray, d: np.ndarray, k: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: the binomial information n p (1 - p) and the residual n p - k."""
    logit = np.outer(theta.astype(np.float32), a.astype(np.float32))
    logit += d.astype(np.float32)
    _, p = _softplus_sigmoid(logit)
    residual = n * p
    residual -= k
    p *= 1.0 - p
    p *= n
    return p, residual


def fit_irt(
    correct: np.ndarray,
    trials: np.ndarray,
    model: str = "2pl",
    *,
    max_iterations: int = 300,
    tolerance: float = 1e-4,
    start: IrtFit | None = None,
) -> IrtFit:
    """Fit `model` ("1pl" or "2pl") to the counts (conditions x items) by joint MAP, from the
    observed rates or from `start` (a 2PL fit starts well from the 1PL one)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    # The matrices in single precision: half the memory traffic, and the sums that matter
    # (log-likelihood, gradients) are accumulated in double.
    k = np.asarray(correct, dtype=np.float32)
    n = np.asarray(trials, dtype=np.float32)
    if k.shape != n.shape or k.ndim != 2:
        raise ValueError("correct and trials must be matrices of the same shape")
    conditions, items = k.shape
    two = model == "2pl"
    # Start from the observed rates: ability from each condition's accuracy, the intercept
    # from each item's.
    with np.errstate(invalid="ignore", divide="ignore"):
        row_rate = np.clip(k.sum(1) / np.maximum(n.sum(1), 1), 0.02, 0.98)
        col_rate = np.clip(k.sum(0) / np.maximum(n.sum(0), 1), 0.02, 0.98)
    theta0 = np.log(row_rate / (1 - row_rate))
    theta0 = (theta0 - theta0.mean()) / (theta0.std() or 1.0) if conditions > 1 else theta0 * 0
    d0 = np.log(col_rate / (1 - col_rate))
    a0 = np.ones(items)
    if start is not None:
        theta0, a0, d0 = start.theta, start.a, start.d

    theta, a, d = theta0.astype(np.float64), np.array(a0, dtype=np.float64), d0.astype(np.float64)
    iterations, converged = 0, False
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (read after the loop)
        # Items: one Newton step on (a, d) per item, abilities held (a logistic regression
        # per item, all items at once).
        w, residual = _weights_residuals(theta, a, d, k, n)
        g_d = residual.sum(0, dtype=np.float64) + d / D_SD**2
        h_dd = w.sum(0, dtype=np.float64) + 1.0 / D_SD**2
        if two:
            t32 = theta.astype(np.float32)
            g_a = (t32 @ residual).astype(np.float64) + (a - A_MEAN) / A_SD**2
            h_aa = ((t32 * t32) @ w).astype(np.float64) + 1.0 / A_SD**2
            h_ad = (t32 @ w).astype(np.float64)
            det = h_aa * h_dd - h_ad * h_ad
            step_a = np.clip((h_dd * g_a - h_ad * g_d) / det, -MAX_STEP, MAX_STEP)
            step_d = np.clip((h_aa * g_d - h_ad * g_a) / det, -MAX_STEP, MAX_STEP)
            a = a - step_a
        else:
            step_a = np.zeros(1)
            step_d = np.clip(g_d / h_dd, -MAX_STEP, MAX_STEP)
        d = d - step_d
        # Conditions: one Newton step on each ability, items held.
        w, residual = _weights_residuals(theta, a, d, k, n)
        a32 = a.astype(np.float32)
        g_t = (residual @ a32).astype(np.float64) + theta / THETA_SD**2
        h_t = (w @ (a32 * a32)).astype(np.float64) + 1.0 / THETA_SD**2
        step_t = np.clip(g_t / h_t, -MAX_STEP, MAX_STEP)
        theta = theta - step_t
        change = max(
            float(np.abs(step_t).max(initial=0.0)),
            float(np.abs(step_a).max(initial=0.0)),
            float(np.abs(step_d).max(initial=0.0)),
        )
        if change < tolerance:  # one full sweep moved nothing by more than `tolerance`
            converged = True
            break
    a = np.array(a, dtype=np.float64)
    logit = np.outer(theta, a) + d
    loglik = _loglik(logit, k, n)
    errors = _standard_errors(theta, a, d, n, two)
    return IrtFit(
        model=model,
        theta=np.array(theta),
        a=a,
        d=np.array(d),
        loglik=loglik,
        iterations=iterations,
        converged=converged,
        **errors,
    )


def _standard_errors(
    theta: np.ndarray, a: np.ndarray, d: np.ndarray, trials: np.ndarray, two: bool
) -> dict[str, np.ndarray]:
    """SEs from the joint information matrix (expected Fisher information plus the priors'
    precision), inverted blockwise (see the module doc)."""
    _, p = _softplus_sigmoid(np.outer(theta, a) + d)
    w = trials.astype(np.float64) * p * (1 - p)  # binomial information per cell
    h_t = w @ (a * a) + 1.0 / THETA_SD**2
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
        through_items = m_a @ u.T + m_d @ v.T
    else:
        inv_dd = 1.0 / i_dd
        m_d = v * inv_dd
        through_items = m_d @ v.T
    schur = np.diag(h_t) - (through_items + through_items.T) / 2
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
