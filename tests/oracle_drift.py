"""Expected rows of ``me.drift``: distribution drift between a reference and current table,
computed here from raw arrays with numpy and scipy (no code of mleval_sql).

Per group (segment x compared x label) the reference values ``r`` with weights ``a`` and the
current values ``c`` with weights ``b`` (nulls left out):

- ``ks``: D = max_x |F_r(x) - F_c(x)| of the weighted ECDFs (scipy's ``ks_2samp`` statistic
  unweighted); p-value ``kstwo.sf(D, round(en))``, en = m n / (m + n) of the effective sizes
  (sum w)^2 / sum w^2, rounded half to even as numpy (and so ``ks_2samp(method="asymp")``)
  does; where scipy gives NaN (en rounds to 0, e.g. one row against one) the value is null.
- ``wasserstein``: ``scipy.stats.wasserstein_distance(r, c, a, b)``.
- binned statistics over shares ``p`` (reference) and ``q`` (current) per bin; numeric bins are
  the given ``edges`` or the reference's weighted quantile edges (e_i the smallest reference
  value with F_r >= i / bins, compared exactly with fractions), right-closed; categorical bins
  are the group's distinct non-null values of either side.
- ``psi``: sum (q' - p') ln(q' / p'), a zero share replaced by epsilon; ``jensen_shannon``:
  ``scipy.spatial.distance.jensenshannon(p, q, base=2)``; ``total_variation``: half the L1
  distance; ``l_infinity``: the largest difference.
- ``chi2``: ``scipy.stats.chi2_contingency`` of [reference counts, current counts] over the bins
  with weight on either side (counts: weights scaled to the side's effective size); one such bin
  (dof 0) gives scipy's statistic 0.0 and p-value 1.0.

A group with no non-null row (or no weight) on either side: value and p-value null.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import polars as pl
from scipy import stats
from scipy.spatial.distance import jensenshannon

NUMERIC_DEFAULT = ("ks", "wasserstein", "psi")
CATEGORICAL_DEFAULT = ("chi2", "psi", "jensen_shannon")
NUMERIC_ONLY = ("ks", "wasserstein")
BINNED = ("psi", "jensen_shannon", "total_variation", "l_infinity", "chi2")
STATISTICS = ("ks", "wasserstein", *BINNED)
LABELLED = ("score", "decision", "truth")

COLUMNS = ("compared", "label", "statistic", "value", "p_value", "p_value_method",
           "reference_rows", "current_rows", "reference_weight", "current_weight",
           "reference_null_share", "current_null_share", "bins", "epsilon", "note")


# -- the statistics of one group --------------------------------------------------------------

def _none(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def effective_size(w: np.ndarray) -> float:
    return float(w.sum()) ** 2 / float((w * w).sum())


#: The KS p-value: "auto", scipy's ``ks_2samp`` default (its exact p-value where both sides
#: are unweighted, all weights 1, and neither has more than 10,000 rows), else Smirnov's
#: asymptotic distribution at the rounded effective size ("asymp": always that).
KS_METHOD = "auto"


def ks(r: np.ndarray, a: np.ndarray, c: np.ndarray, b: np.ndarray) -> tuple[float, float | None]:
    """(D, p-value) of the weighted two-sample Kolmogorov-Smirnov test."""
    def ecdf(v: np.ndarray, w: np.ndarray, at: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        v, cum = v[order], np.cumsum(w[order])
        idx = np.searchsorted(v, at, side="right")
        return np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0) / cum[-1]

    at = np.unique(np.concatenate([r, c]))
    d = float(np.max(np.abs(ecdf(r, a, at) - ecdf(c, b, at))))
    if KS_METHOD == "auto" and np.all(a == 1) and np.all(b == 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return d, _none(stats.ks_2samp(r, c).pvalue)
    m, n = sorted([effective_size(a), effective_size(b)], reverse=True)
    en = m * n / (m + n)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        p = float(np.clip(stats.kstwo.sf(d, np.round(en)), 0, 1))
    return d, _none(p)


def quantile_edges(r: np.ndarray, a: np.ndarray, bins: int) -> list[float]:
    """e_i = the smallest reference value x with F_r(x) >= i / bins, i = 1 .. bins - 1,
    duplicates removed; compared exactly (the weights as fractions)."""
    values = sorted(set(r.tolist()))
    cum: dict[float, Fraction] = dict.fromkeys(values, Fraction(0))
    for v, w in zip(r.tolist(), a.tolist(), strict=True):
        cum[v] += Fraction(w)
    total, running, cdf = sum(cum.values(), Fraction(0)), Fraction(0), []
    for v in values:
        running += cum[v]
        cdf.append((v, running))
    edges: list[float] = []
    for i in range(1, bins):
        x = next(v for v, f in cdf if f * bins >= i * total)
        if not edges or x != edges[-1]:
            edges.append(x)
    return edges


def shares_numeric(r: np.ndarray, a: np.ndarray, c: np.ndarray, b: np.ndarray,
                   edges: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Weights per right-closed bin (-inf, e_1], (e_1, e_2], ..., (e_k, inf) of each side."""
    e = np.asarray(edges, dtype=float)
    k = len(e) + 1
    wr = np.bincount(np.searchsorted(e, r, side="left"), weights=a, minlength=k)
    wc = np.bincount(np.searchsorted(e, c, side="left"), weights=b, minlength=k)
    return wr, wc


def shares_categorical(r: Sequence[str], a: np.ndarray, c: Sequence[str],
                       b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cats = sorted(set(r) | set(c))
    index = {v: i for i, v in enumerate(cats)}
    wr = np.bincount([index[v] for v in r], weights=a, minlength=len(cats)).astype(float)
    wc = np.bincount([index[v] for v in c], weights=b, minlength=len(cats)).astype(float)
    return wr, wc


def psi(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    p = np.where(p > 0, p, epsilon)
    q = np.where(q > 0, q, epsilon)
    return float(np.sum((q - p) * np.log(q / p)))


def chi2(wr: np.ndarray, wc: np.ndarray, nr: float, nc: float) -> tuple[float, float | None]:
    """scipy's chi-squared test of homogeneity of [reference counts, current counts] over the
    bins with weight on either side, each side's weights scaled to its effective size ``n*``
    (the counts themselves unweighted); dof 0 gives scipy's (0.0, 1.0)."""
    keep = (wr > 0) | (wc > 0)
    table = np.array([wr[keep] * nr / wr.sum(), wc[keep] * nc / wc.sum()])
    res = stats.chi2_contingency(table)
    return float(res.statistic), _none(res.pvalue)


def group_statistics(kind: str, ref: Sequence, ref_w: Sequence[float], cur: Sequence,
                     cur_w: Sequence[float], statistics: Sequence[str], *, bins: int = 10,
                     edges: Sequence[float] | None = None,
                     epsilon: float = 1e-4) -> list[dict]:
    """Rows (statistic, value, p_value, bins, epsilon) of one group; ``kind`` "numeric" or
    "categorical"; ``ref`` and ``cur`` the non-null values, ``*_w`` their weights."""
    a = np.asarray(ref_w, dtype=float)
    b = np.asarray(cur_w, dtype=float)
    asked = [s for s in statistics if kind == "numeric" or s not in NUMERIC_ONLY]
    empty = len(ref) == 0 or len(cur) == 0 or a.sum() <= 0 or b.sum() <= 0
    rows = []
    if kind == "numeric":
        r = np.asarray(ref, dtype=float)
        c = np.asarray(cur, dtype=float)
    if not empty:
        if kind == "numeric":
            cut = list(edges) if edges is not None else quantile_edges(r[a > 0], a[a > 0], bins)
            wr, wc = shares_numeric(r, a, c, b, cut)
        else:
            # a category with weight on neither side (only zero-weight rows) is no bin
            keep_r, keep_c = a > 0, b > 0
            wr, wc = shares_categorical([v for v, k in zip(ref, keep_r, strict=True) if k],
                                        a[keep_r], [v for v, k in zip(cur, keep_c, strict=True)
                                                    if k], b[keep_c])
        p, q = wr / wr.sum(), wc / wc.sum()
    for name in asked:
        value: float | None = None
        p_value: float | None = None
        n_bins = None
        if not empty:
            if name == "ks":
                keep_a, keep_b = a > 0, b > 0
                value, p_value = ks(r[keep_a], a[keep_a], c[keep_b], b[keep_b])
            elif name == "wasserstein":
                value = float(stats.wasserstein_distance(r, c, a, b))
            else:
                n_bins = len(wr)
                if name == "psi":
                    value = psi(p, q, epsilon)
                elif name == "jensen_shannon":
                    value = float(jensenshannon(p, q, base=2))
                elif name == "total_variation":
                    value = float(0.5 * np.abs(p - q).sum())
                elif name == "l_infinity":
                    value = float(np.abs(p - q).max())
                elif name == "chi2":
                    value, p_value = chi2(wr, wc, effective_size(a), effective_size(b))
                else:
                    raise ValueError(name)
        rows.append({"statistic": name, "value": value, "p_value": p_value, "bins": n_bins,
                     "epsilon": epsilon if name == "psi" else None})
    return rows


# -- tables to groups -------------------------------------------------------------------------

def text(value: object) -> str | None:
    """A categorical value as text (booleans as ``true`` / ``false``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _side(frame: pl.DataFrame, name: str, keys: Sequence[str], threshold: float,
          single_label: str) -> dict[tuple, dict[str | None, list[tuple[object, float]]]]:
    """segment key -> label -> [(value or None, weight)] of one table for compared ``name``."""
    out: dict[tuple, dict[str | None, list[tuple[object, float]]]] = {}
    weighted = "weight" in frame.columns
    has_label = "label" in frame.columns
    seen: set[tuple] = set()
    for row in frame.iter_rows(named=True):
        key = tuple(row[k] for k in keys)
        w = float(row["weight"]) if weighted else 1.0
        if name in LABELLED:
            label = str(row["label"]) if has_label else single_label
            score = row["score"]
            if name == "score":
                value = score
            elif name == "decision":
                value = None if score is None else text(bool(score >= threshold))
            else:
                value = text(row["truth"])
        else:  # a feature: one value per sample
            if (key, row["sample"]) in seen:
                continue
            seen.add((key, row["sample"]))
            label, value = None, row[name]
            if value is not None and not isinstance(value, (int, float)):
                value = text(value)
        out.setdefault(key, {}).setdefault(label, []).append((value, w))
    return out


def _kind(name: str, frame: pl.DataFrame) -> str:
    if name == "score":
        return "numeric"
    if name in ("decision", "truth"):
        return "categorical"
    return "numeric" if frame.schema[name].is_numeric() else "categorical"


def expected(reference: pl.DataFrame, current: pl.DataFrame,
             compared: Sequence[str] = ("score",), *, by: Sequence[str] = (),
             extra: str | None = None, statistics: Sequence[str] | None = None,
             bins: int = 10, edges: Sequence[float] | None = None, epsilon: float = 1e-4,
             threshold: float = 0.5, single_label: str = "score") -> pl.DataFrame:
    """The expected result frame, rows in the spec's order (segments ascending, compared and
    statistics as asked, labels ascending). ``extra``: a column of ``current`` only (the
    ``reference={column: value}`` form), segmenting the current rows, each such segment
    compared with the reference rows of the same ``by`` segment. Segments and labels are the
    union of both sides' (a side without rows gives a group of null values)."""
    by = list(by)
    out = []
    for name in compared:
        kind = _kind(name, reference)
        asked = statistics if statistics is not None else (
            NUMERIC_DEFAULT if kind == "numeric" else CATEGORICAL_DEFAULT)
        cur_keys = [*by, extra] if extra else by
        ref_side = _side(reference, name, by, threshold, single_label)
        cur_side = _side(current, name, cur_keys, threshold, single_label)
        segments = set(cur_side) | (set() if extra else set(ref_side))
        for seg in sorted(segments, key=lambda s: tuple((v is None, v) for v in s)):
            ref_labels = ref_side.get(seg[:len(by)], {})
            cur_labels = cur_side.get(seg, {})
            for label in sorted(set(ref_labels) | set(cur_labels),
                                key=lambda x: (x is None, x)):
                r = ref_labels.get(label, [])
                c = cur_labels.get(label, [])
                rv = [(v, w) for v, w in r if v is not None]
                cv = [(v, w) for v, w in c if v is not None]
                common = {
                    **dict(zip(cur_keys, seg, strict=True)), "compared": name, "label": label,
                    "reference_rows": len(rv), "current_rows": len(cv),
                    "reference_weight": float(sum(w for _, w in rv)),
                    "current_weight": float(sum(w for _, w in cv)),
                    "reference_null_share": _null_share(r), "current_null_share": _null_share(c),
                }
                for i, row in enumerate(group_statistics(
                        kind, [v for v, _ in rv], [w for _, w in rv], [v for v, _ in cv],
                        [w for _, w in cv], asked, bins=bins, edges=edges, epsilon=epsilon)):
                    out.append({**common, **row, "_order": i})
    schema = {**{k: (reference.schema[k] if k in reference.columns else current.schema[k])
                 for k in ([*by, extra] if extra else by)},
              "compared": pl.String, "label": pl.String, "statistic": pl.String,
              "value": pl.Float64, "p_value": pl.Float64, "reference_rows": pl.Int64,
              "current_rows": pl.Int64, "reference_weight": pl.Float64,
              "current_weight": pl.Float64, "reference_null_share": pl.Float64,
              "current_null_share": pl.Float64, "bins": pl.Int64, "epsilon": pl.Float64}
    order_c = {name: i for i, name in enumerate(compared)}
    seg_keys = [*by, extra] if extra else by
    out.sort(key=lambda row: (*((row[k] is None, row[k]) for k in seg_keys),
                              order_c[row["compared"]],
                              (row["label"] is None, row["label"] or ""), row.pop("_order")))
    return pl.DataFrame(out, schema=schema, orient="row").select(list(schema))


def _null_share(pairs: list[tuple[object, float]]) -> float | None:
    total = sum(w for _, w in pairs)
    if not pairs or total <= 0:
        return None
    return float(sum(w for v, w in pairs if v is None) / total)


def split(source: pl.DataFrame, reference: Mapping[str, object]) -> tuple[pl.DataFrame,
                                                                         pl.DataFrame, str]:
    """``reference={column: value}``: (the reference rows, the other rows, the column)."""
    ((column, value),) = reference.items()
    mask = source[column] == value
    return source.filter(mask).drop(column), source.filter(~mask), column
