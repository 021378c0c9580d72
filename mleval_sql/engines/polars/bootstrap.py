"""The Poisson bootstrap's replicates as polars plans (mirror of queries/sample_ids.sql and
queries/replicates.sql): the same integer hash, so the same draws, on every engine; and, for
whole-count rows whose metrics read running sums down each label's sorted rows, the rows
ranked once for every replicate (:class:`Ranked`), each replicate a running sum of its draws."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import polars as pl

from mleval_sql.progress import stage

if TYPE_CHECKING:  # numpy only where a bootstrap runs: a polars request does not import it
    import numpy as np

__all__ = ["replicates", "sample_ids"]

_2_32 = 4294967296
#: Poisson(1)'s CDF at 0, 1, ..., 11: a draw is the number of them at or below u.
_POISSON_CDF = (0.36787944117144233, 0.7357588823428847, 0.9196986029286058, 0.9810118431238462,
                0.9963401531726563, 0.9994058151824183, 0.999916758850712, 0.9999897508033254,
                0.999998874797402, 0.9999998885745217, 0.9999999899522336, 0.9999999991683893)


def sample_ids(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Every distinct sample and its rank among them (0, 1, ...)."""
    return (predictions.select("sample").unique().sort("sample")
            .with_row_index("id").select("sample", pl.col("id").cast(pl.Int64)))


def _mix(x: pl.Expr, rounds: int = 3) -> pl.Expr:
    """Mueller's 32-bit hash: x xor (x >> 16), times 73244475, modulo 2^32; the last round
    without the product."""
    for i in range(rounds):
        x = x ^ (x // 65536)
        if i < rounds - 1:
            x = x * 73244475 % _2_32
    return x


def replicates(predictions: pl.LazyFrame, sample_ids: pl.LazyFrame, *,
               replicates: Sequence[int], seed: int) -> pl.LazyFrame:
    """The predictions once per replicate, each weighed by its sample's Poisson(1) draw; the
    segment becomes ``{segment, replicate}``."""
    keys = pl.LazyFrame({"replicate": list(replicates)}, schema={"replicate": pl.Int64})
    crossed = predictions.join(sample_ids, on="sample").join(keys, how="cross")
    x = (pl.col("id") % _2_32 * 668265261 + pl.col("replicate") * 374761393
         + seed % _2_32 * 2654435) % _2_32
    u = (_mix(x) + 0.5) / float(_2_32)
    draw = pl.sum_horizontal(*(u >= c for c in _POISSON_CDF)).cast(pl.Float64)
    return crossed.select(
        "sample", "label", "score", "truth", pl.col("weight") * draw,
        segment=pl.struct(pl.col("segment"), pl.col("replicate")))


# -- one sort for every replicate ---------------------------------------------------------------
#
# Decision counts at a threshold, ROC AUC and average precision read running sums down each
# label's rows sorted by score, and a replicate changes the weights, not the order: the rows are
# sorted once, and each replicate is a running sum of its draws over them (numpy's, a quarter of
# the time of polars' cum_sum). Over whole counts (every weight 1 before the draw) the sums are
# integers, exact in any order, so the counts equal those of the plans over the replicated rows.

#: The smallest hash with draw > k for k = 0, 1, ...: u = (h + 1/2) / 2^32 reaches Poisson(1)'s
#: CDF at k exactly when h >= ceil(CDF(k) * 2^32 - 1/2) (a float times 2^32 is exact).
_DRAW_STEPS = tuple(math.ceil(Fraction(c) * _2_32 - Fraction(1, 2)) for c in _POISSON_CDF)


def hash_starts(ids: int, seed: int) -> np.ndarray:
    """What the hash of each sample id (0 .. ids - 1) starts from, before the replicate's
    share is added (modulo 2^32): :func:`draws` reads it for every replicate."""
    import numpy as np

    start = (np.arange(ids, dtype=np.uint64) % np.uint64(_2_32) * np.uint64(668265261)
             + np.uint64(seed % _2_32 * 2654435))
    return (start % np.uint64(_2_32)).astype(np.uint32)


def draws(starts: np.ndarray, replicate: int) -> np.ndarray:
    """Each sample id's Poisson(1) draw in ``replicate`` (``starts``: :func:`hash_starts`),
    the draws of :func:`replicates` as uint8: uint32 sums and products wrap, modulo 2^32 as
    the SQL's.

    >>> draws(hash_starts(4, seed=0), 0).tolist(), draws(hash_starts(4, seed=0), 1).tolist()
    ([0, 0, 0, 1], [3, 2, 2, 1])
    """
    import numpy as np

    x = starts + np.uint32(replicate * 374761393 % _2_32)
    for i in range(3):  # Mueller's hash
        x ^= x >> np.uint32(16)
        if i < 2:
            x *= np.uint32(73244475)
    steps = np.array(_DRAW_STEPS, dtype=np.uint32)
    drawn = (x >= steps[0]).view(np.uint8).copy()
    for step in steps[1:]:  # a count of comparisons: 6x faster than a searchsorted
        drawn += (x >= step).view(np.uint8)
    return drawn


@dataclass(frozen=True)
class Ranked:
    """A batch's rows sorted once for every replicate: each label's rows (a run) by score,
    descending, as the ranking plans sort them, and where each replicate's running sums are
    read. A running sum starts with 0 (``sums[i]``: the sum over the first i rows), so a
    stretch's sum is the difference of two reads. ``keys``: each run's segment and label;
    ``ids``: the batch's samples' ids in the whole input (:func:`sample_ids`), whose draws
    weigh them; ``sid``: each row's sample, as its place in ``ids``; ``positives``: the
    positive rows' positions and where their block of tied scores starts and ends, in rows and
    in positives; ``runs``: where each starts and ends, how far its rows scored at least the
    threshold reach (in rows and in positives), and its positives; ``ties``: some block holds
    more than one row (else each row is its own block)."""

    keys: pl.DataFrame
    ids: np.ndarray
    sid: np.ndarray
    positives: dict[str, np.ndarray]
    runs: dict[str, np.ndarray]
    ties: bool

    @classmethod
    def of(cls, rows: pl.DataFrame, ids: pl.DataFrame, *, threshold: float) -> Ranked:
        """``rows`` (the canonical columns) ranked; ``ids``: :func:`sample_ids`' table."""
        keys = rows.select("segment", "label").unique(maintain_order=True).with_row_index("run")
        # the batch's own samples, numbered 0, 1, ... (sid), with their ids in the whole input
        own = ids.join(rows.select("sample").unique(), on="sample", how="semi").with_row_index(
            "sid")
        ranked = (rows.lazy().join(keys.lazy(), on=["segment", "label"], nulls_equal=True)
                  .join(own.lazy(), on="sample")
                  .select("run", "score", "truth", sid=pl.col("sid").cast(pl.UInt32))
                  # two sorts on one key each, as the ranking plans (cheaper than one by both)
                  .sort("score", descending=True).cache().sort("run", maintain_order=True))
        run, score, truth = pl.col("run"), pl.col("score"), pl.col("truth")
        # indices in 32 bits (a batch holds fewer rows): the arrays kept take half the memory
        index = pl.UInt32 if rows.height < 2**32 - 1 else pl.Int64
        row = pl.int_range(pl.len(), dtype=index)
        counted = truth.cast(index).cum_sum()  # positives up to and including the row
        # a block of tied scores ends where the next row has another score or run
        last = ((score != score.shift(-1)) | (run != run.shift(-1))).fill_null(True)
        first = ((score != score.shift(1)) | (run != run.shift(1))).fill_null(True)
        sorted_rows = ranked.collect()  # 17 bytes a row; each table below reads it once
        rows_of = sorted_rows.lazy()
        # the positive rows: where their block of tied scores ends and starts
        positives = rows_of.select(
            truth, row=row, row_end=pl.when(last).then(row + 1).backward_fill(),
            pos_end=pl.when(last).then(counted).backward_fill(),
            row_first=pl.when(first).then(row).forward_fill(),
            pos_first=pl.when(first).then(counted - truth).forward_fill(),
        ).filter(truth).drop("truth")
        decided = score >= threshold
        runs = rows_of.select(run, truth, decided=decided, row=row,
                              before=counted - truth).group_by("run", maintain_order=True).agg(
            row_start=pl.col("row").first(), row_end=pl.col("row").last() + 1,
            row_decided=pl.col("row").first() + pl.col("decided").sum(),
            pos_start=pl.col("before").first(), pos_end=pl.col("before").first() + truth.sum(),
            pos_decided=pl.col("before").first() + (pl.col("decided") & truth).sum(),
            positives=truth.sum())
        tied = rows_of.select(last.not_().any())
        positives, runs, tied = pl.collect_all([positives, runs, tied])
        return cls(keys, own["id"].to_numpy(), sorted_rows["sid"].to_numpy(),
                   {c: positives[c].to_numpy() for c in positives.columns},
                   {c: runs[c].to_numpy() for c in runs.columns}, ties=tied.item())

    def statistics(self, drawn: np.ndarray) -> dict[str, np.ndarray]:
        """For one replicate's draws (of the samples of ``ids``, in their order): each run's
        tp, fp, fn, tn at the threshold, its average precision's sum of terms (``ap_sum``;
        over P, its value) and the negative weight ranked above its positives (``above``,
        ties halved, twice over: its ROC AUC is 1 - above / (2 P N), exact in integers)."""
        import numpy as np

        weights = drawn[self.sid]
        sums = _running(weights)
        pos_weights = weights[self.positives["row"]]
        pos_sums = _running(pos_weights)
        runs, positives = self.runs, self.positives
        row_base, pos_base = sums[runs["row_start"]], pos_sums[runs["pos_start"]]
        total = sums[runs["row_end"]] - row_base
        decided = sums[runs["row_decided"]] - row_base
        p = pos_sums[runs["pos_end"]] - pos_base
        tp = pos_sums[runs["pos_decided"]] - pos_base
        # average precision: each positive row weighs its draw times the precision where its
        # block of tied scores ends (tp / (tp + fp) there), summed per run
        found = (pos_sums[positives["pos_end"]] if self.ties else pos_sums[1:]) - np.repeat(
            pos_base, runs["positives"])
        reached = sums[positives["row_end"]] - np.repeat(row_base, runs["positives"])
        # a row drawn 0 adds 0 (its block may weigh 0 too: no 0 / 0)
        terms = pos_weights * found.astype(np.float64) / np.maximum(reached, 1)
        ap_sum = _per_run(terms, runs["positives"])
        # ROC AUC: each positive row's draw times the negative weight above its block, and half
        # the negative weight tied with it: twice that is fp where the block ends plus fp where
        # it starts (the same without ties: a positive row's block holds no negative)
        fp_end = reached.astype(np.int64) - found
        if self.ties:
            fp_start = (sums[positives["row_first"]].astype(np.int64)
                        - pos_sums[positives["pos_first"]]
                        - np.repeat(row_base.astype(np.int64) - pos_base, runs["positives"]))
            fp_end = fp_end + fp_start
        else:
            fp_end = 2 * fp_end
        above = _per_run(pos_weights * fp_end, runs["positives"])
        return {"tp": tp, "fp": decided - tp, "fn": p - tp, "tn": total - decided - (p - tp),
                "ap_sum": ap_sum, "above": above}


def replicated(rows: pl.DataFrame, ids: pl.DataFrame, starts: np.ndarray,
               replicates: Sequence[int], *, threshold: float) -> pl.DataFrame:
    """Each replicate's statistics of each label of ``rows`` (whole counts), the rows ranked
    once: ``segment, label, replicate, tp, fp, fn, tn`` at ``threshold``, ``ap_sum`` (average
    precision times P) and ``above`` (:meth:`Ranked.statistics`). ``ids``: :func:`sample_ids`
    of the whole input; ``starts``: their :func:`hash_starts`."""
    import numpy as np

    with stage("bootstrap: ranking"):
        ranked = Ranked.of(rows, ids, threshold=threshold)
    own = starts[ranked.ids]

    def statistics(replicate: int) -> dict[str, np.ndarray]:
        return ranked.statistics(draws(own, replicate))

    with stage("bootstrap: replicates"), ThreadPoolExecutor(pl.thread_pool_size()) as pool:
        # numpy lets go of the GIL in its gathers and running sums: a thread a core
        stats = list(pool.map(statistics, replicates))
    runs = len(ranked.keys)
    table = pl.DataFrame({
        "run": np.tile(np.arange(runs, dtype=np.uint32), len(replicates)),
        "replicate": np.repeat(np.array(replicates, dtype=np.int64), runs),
        **{c: np.concatenate([s[c] for s in stats]).astype(np.float64)
           for c in ("tp", "fp", "fn", "tn", "ap_sum", "above")}})
    return ranked.keys.join(table, on="run").drop("run")


def _per_run(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The sums of ``values`` over consecutive stretches of ``lengths`` (0 for an empty one)."""
    import numpy as np

    sums = np.zeros(len(lengths), dtype=np.float64)
    filled = lengths > 0
    if filled.any():
        starts = np.cumsum(lengths, dtype=np.int64) - lengths
        sums[filled] = np.add.reduceat(values, starts[filled])
    return sums


def _running(weights: np.ndarray) -> np.ndarray:
    """The running sums of ``weights`` (draws: at most 12 a row) with a 0 first: item i is the
    sum of the first i (in 32 bits where they fit)."""
    import numpy as np

    wide = np.uint32 if len(weights) < (1 << 32) // 16 else np.int64
    sums = np.zeros(len(weights) + 1, dtype=wide)
    np.cumsum(weights, dtype=wide, out=sums[1:])
    return sums
