"""The Poisson bootstrap's replicates as polars plans (mirror of queries/sample_ids.sql and
queries/replicates.sql): the same integer hash, so the same draws, on every engine; and, where
the metrics read only running sums down each label's sorted rows, the rows ranked once for
every replicate, each replicate a running sum of its draws (:class:`Ranked`, whole counts) or
of its weighted draws (:class:`RankedWeights`, a weight column). Every engine that can hand its
canonical rows over as polars frames a batch of segments at a time (engines/base.py) runs the
same kernel: :func:`serves` says when, :func:`replicated` ranks a batch, and
:func:`ranked_statistics` makes the statistics tables the final steps read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import polars as pl

from mleval_sql.engines.polars._common import keys_as_text
from mleval_sql.progress import stage

if TYPE_CHECKING:  # numpy only where a bootstrap runs: a polars request does not import it
    import numpy as np

    from mleval_sql.engines import Keep

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
# Over weights (a weight column) a row weighs its weight times its draw, and sums of doubles
# depend on their order: RankedWeights states one (each label's rows by score, descending, tied
# scores by sample id, the sums restarting at each label), so that a rerun, another row order,
# another split in files or in batches gives the same bits, and the sums equal the plans' up to
# their rounding (which follows the order the plans meet the rows in).

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
    """A batch's whole-count rows sorted once for every replicate: each label's rows (a run)
    by score, descending, tied scores by sample id (:func:`_in_order`: average precision's
    terms of a tied block are summed in that order), and where each replicate's running sums
    are read. A running sum starts with 0 (``sums[i]``: the sum over the first i rows), so a
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
        # the batch's own samples, numbered 0, 1, ... (sid), with their ids in the whole input:
        # in the order of the ids, so that sid orders tied scores as the ids do
        own = ids.join(rows.select("sample").unique(), on="sample", how="semi",
                       maintain_order="left").with_row_index("sid")
        ranked = _in_order(rows.lazy().join(keys.lazy(), on=["segment", "label"],
                                            nulls_equal=True)
                           .join(own.lazy(), on="sample")
                           .select("run", "score", truth=pl.col("truth").cast(pl.Boolean),
                                   sid=pl.col("sid").cast(pl.UInt32)))  # truth 0/1 or bool
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

    def statistics(self, drawn: np.ndarray, *, ranking: bool = True) -> dict[str, np.ndarray]:
        """For one replicate's draws (of the samples of ``ids``, in their order): each run's
        tp, fp, fn, tn at the threshold, its average precision's sum of terms (``ap_sum``;
        over P, its value) and the share of its (positive, negative) pairs ranked the wrong
        way, ties halved (``discordant``: its ROC AUC is 1 - discordant; the negative weight
        above its positives, exact in integers, over 2 P N). ``ranking``: else ap_sum and
        discordant are 0 (not computed)."""
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
        counts = {"tp": tp, "fp": decided - tp, "fn": p - tp, "tn": total - decided - (p - tp)}
        if not ranking:
            zeros = np.zeros(len(tp))
            return {**counts, "ap_sum": zeros, "discordant": zeros}
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
        pairs = 2.0 * p.astype(np.float64) * (total - p).astype(np.float64)
        return {**counts, "ap_sum": ap_sum,
                "discordant": np.divide(above, pairs, out=np.zeros(len(p)), where=pairs > 0)}


@dataclass(frozen=True)
class RankedWeights:
    """A batch's weighted rows sorted once for every replicate, as :class:`Ranked` but each
    row weighing its weight times its draw: each label's rows (a run) by score, descending,
    tied scores by sample id (:func:`_in_order`: the order the sums are taken in, the same
    whatever the rows' order, files or batches), rows of weight 0 left out (they weigh 0 in
    every replicate). The positive and the negative rows apart, each class's weight summed
    alone (as the plans sum it: fn is not P - tp), each run's running sums from its own 0 (in
    a table of running sums, run k's start at its first item's place plus k).

    The negatives are read only at a few places (where a run starts, where its rows scored
    at least the threshold end, where each positive's block of tied scores starts and ends):
    a replicate sums the negatives between two such places in one pass (numpy's pairwise
    reduceat, ten times faster than a running sum) and runs its sums over those stretches.

    ``keys``, ``ids``: as :class:`Ranked`'s; ``positives``: each positive row's sample
    (``sid``, its place in ``ids``), ``weight``, ``run``, where its block ends in the
    positives' running sums (``pos_end``) and in the negatives' (``neg_end``) and, with
    ``ties``, where it starts in the negatives' (``neg_first``); ``negatives``: each
    negative row's ``sid`` and ``weight``; ``gaps``: where each stretch of negatives starts
    (``starts``), each run's stretches (``lengths``) and its stretches scored at least the
    threshold and below it, in turn (``decided``); ``runs``: each run's positives
    (``n_pos``) and its positives scored at least the threshold and below it, in turn
    (``decided``)."""

    keys: pl.DataFrame
    ids: np.ndarray
    positives: dict[str, np.ndarray]
    negatives: dict[str, np.ndarray]
    gaps: dict[str, np.ndarray]
    runs: dict[str, np.ndarray]
    ties: bool

    @classmethod
    def of(cls, rows: pl.DataFrame, ids: pl.DataFrame, *, threshold: float) -> RankedWeights:
        """``rows`` (the canonical columns, a weight column's weights) ranked; ``ids``:
        :func:`sample_ids`' table."""
        import numpy as np

        keys = rows.select("segment", "label").unique(maintain_order=True).with_row_index("run")
        weighed = rows.filter(pl.col("weight") > 0)
        # the batch's samples (those of some weight) in the order of their ids, as Ranked's
        own = ids.join(weighed.select("sample").unique(), on="sample", how="semi",
                       maintain_order="left").with_row_index("sid")
        ranked = _in_order(weighed.lazy().join(keys.lazy(), on=["segment", "label"],
                                               nulls_equal=True)
                           .join(own.lazy(), on="sample")
                           .select("run", "score", "weight",
                                   truth=pl.col("truth").cast(pl.Boolean),
                                   sid=pl.col("sid").cast(pl.UInt32)))
        run, score, truth = pl.col("run"), pl.col("score"), pl.col("truth")
        # the positives and negatives up to a row, in the whole batch
        pos_upto = truth.cast(pl.Int64).cum_sum()
        neg_upto = (~truth).cast(pl.Int64).cum_sum()
        last = ((score != score.shift(-1)) | (run != run.shift(-1))).fill_null(True)
        first = ((score != score.shift(1)) | (run != run.shift(1))).fill_null(True)
        rows_of = ranked.collect().lazy()
        positives = rows_of.select(
            "sid", "weight", "run", truth,
            pos_end=pl.when(last).then(pos_upto).backward_fill(),
            neg_end=pl.when(last).then(neg_upto).backward_fill(),
            neg_first=pl.when(first).then(neg_upto - (~truth).cast(pl.Int64)).forward_fill(),
        ).filter(truth).drop("truth")
        negatives = rows_of.filter(~truth).select("sid", "weight")
        decided = score >= threshold
        counted = rows_of.group_by("run").agg(
            n_pos=truth.sum(), n_neg=(~truth).sum(), pos_decided=(truth & decided).sum(),
            neg_decided=(~truth & decided).sum())
        # every run, those whose rows all weigh 0 too (empty here)
        runs = keys.lazy().select("run").join(counted, on="run", how="left").sort("run").select(
            pl.exclude("run").fill_null(0).cast(pl.Int64))
        tied = rows_of.select(last.not_().any())
        positives, negatives, runs, tied = pl.collect_all([positives, negatives, runs, tied])
        del rows_of  # the sorted rows: what is kept is below
        ties = bool(tied.item())

        def column(frame: pl.DataFrame, name: str) -> np.ndarray:
            # indices as numpy's own (intp): a gather by 32-bit indices converts them first,
            # at twice the time
            return frame[name].to_numpy().astype(np.intp, copy=False)

        n_pos, n_neg = column(runs, "n_pos"), column(runs, "n_neg")
        neg_starts = np.cumsum(n_neg) - n_neg
        neg_cut = neg_starts + column(runs, "neg_decided")
        shift = column(positives, "run")  # each run's own slot for its 0
        reads = [column(positives, "neg_end"), *([column(positives, "neg_first")] * ties)]
        # the places the negatives are read at, and the stretches between them: each part
        # ascending already, so a stable sort (timsort: merges runs) and not np.unique's hash
        places = np.sort(np.concatenate([neg_starts, neg_cut, *reads, [int(n_neg.sum())]]),
                         kind="stable")
        bounds = places[np.concatenate([[True], places[1:] != places[:-1]])]
        g_start, g_cut, g_end = (np.searchsorted(bounds, q)
                                 for q in (neg_starts, neg_cut, neg_starts + n_neg))
        at = {name: np.searchsorted(bounds, q) + shift
              for name, q in zip(("neg_end", "neg_first"), reads, strict=False)}
        pos_decided = column(runs, "pos_decided")
        return cls(
            keys, own["id"].to_numpy(),
            {"sid": column(positives, "sid"), "weight": positives["weight"].to_numpy(),
             "run": shift, "pos_end": column(positives, "pos_end") + shift, **at},
            {"sid": column(negatives, "sid"), "weight": negatives["weight"].to_numpy()},
            {"starts": bounds[:-1], "lengths": g_end - g_start,
             "decided": np.column_stack([g_cut - g_start, g_end - g_cut]).ravel()},
            {"n_pos": n_pos,
             "decided": np.column_stack([pos_decided, n_pos - pos_decided]).ravel()},
            ties=ties)

    def statistics(self, drawn: np.ndarray, *, ranking: bool = True) -> dict[str, np.ndarray]:
        """For one replicate's draws (of the samples of ``ids``, in their order): each run's
        tp, fp, fn, tn, ``ap_sum`` and ``discordant`` as :meth:`Ranked.statistics` gives them,
        sums of weights times draws (each count a sum of its own rows), the pairs' share
        scaled by powers of two near 1 / P and 1 / N (no P N overflows)."""
        import numpy as np

        positives, gaps, runs = self.positives, self.gaps, self.runs
        pos = positives["weight"] * drawn[positives["sid"]]
        neg = self.negatives["weight"] * drawn[self.negatives["sid"]]
        # the negative weight of each stretch between two places it is read at
        between = (np.add.reduceat(neg, gaps["starts"]) if len(gaps["starts"])
                   else np.zeros(0))
        del neg  # arrays let go (or reused) as soon as read: a thread's peak is a few of them
        tp_fn, fp_tn = _per_run(pos, runs["decided"]), _per_run(between, gaps["decided"])
        tp, fn, fp, tn = tp_fn[0::2], tp_fn[1::2], fp_tn[0::2], fp_tn[1::2]
        counts = {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
        if not ranking:
            zeros = np.zeros(len(tp))
            return {**counts, "ap_sum": zeros, "discordant": zeros}
        n_pos = runs["n_pos"]
        # average precision: each positive row's weight times the precision where its block
        # of tied scores ends (tp / (tp + fp) there, as the plans' terms), summed per run
        found = _running_by_run(pos, n_pos)[positives["pos_end"]]
        neg_sums = _running_by_run(between, gaps["lengths"])
        fp_end = neg_sums[positives["neg_end"]]
        reached = found + fp_end
        # a row of weight 0 in this replicate adds 0: found is 0 where reached is (no 0 / 0)
        precision = np.divide(found, reached, out=found, where=reached > 0)
        del reached
        ap_sum = _per_run(np.multiply(pos, precision, out=precision), n_pos)
        del precision
        # ROC AUC: each positive row's weight times the negative weight above its block and
        # half that tied with it (twice over: fp where the block ends plus fp where it starts)
        fp_twice = fp_end + (neg_sums[positives["neg_first"]] if self.ties else fp_end)
        del fp_end, neg_sums
        p, n = tp + fn, fp + tn
        p_scale, n_scale = _scale(p), _scale(n)
        run = positives["run"]
        fp_twice *= n_scale[run]
        pos *= p_scale[run]  # pos is not read after
        above = _per_run(np.multiply(pos, fp_twice, out=fp_twice), n_pos)
        pairs = 2.0 * (p * p_scale) * (n * n_scale)
        return {**counts, "ap_sum": ap_sum,
                "discordant": np.divide(above, pairs, out=np.zeros(len(p)), where=pairs > 0)}


def _in_order(rows: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` (``run``, ``score``, ``sid``, ...) by run, each run's by score, descending,
    tied scores by ``sid`` (the sample's id: a stated order, whatever the rows' order, in
    which the terms of a tied block are summed): three stable sorts on one key each, as the
    ranking plans sort (cached between, else polars fuses them into one sort by the three
    keys, four times slower)."""
    return (rows.sort("sid").cache().sort("score", descending=True, maintain_order=True)
            .cache().sort("run", maintain_order=True))


#: The memory a batch's row takes while the kernel ranks it, the row as read included: it sets
#: the batches the engines hand over under a budget. Measured (5M rows, 4 segments x 10 labels,
#: 200 replicates, two threads): 139 bytes a row beyond the rows weighted, 99 whole counts; a
#: row as DuckDB hands it over (text keys) about 56.
RANKED_ROW_BYTES = 200
#: The steps of a bootstrap that the rows ranked once give every replicate ...
RANKED_STEPS = ("sample_ids", "threshold_counts", "decision_metrics", "declared_metrics",
                "ranking_metrics")
#: ... and the ranking metrics they give (:meth:`Ranked.statistics`)
RANKED_METRICS = ("roc_auc", "average_precision")


def serves(steps: Sequence[str], params: dict[str, object], keep: Keep) -> bool:
    """Whether the bootstrap's ``steps`` read only what a ranking of the rows once gives every
    replicate (:class:`Ranked`; :class:`RankedWeights` with a weight column): decision counts
    at the threshold, ROC AUC and average precision per label (and their averages over
    labels). What the engine's rows allow (in memory, a batch at a time) is the engine's to
    say (``BaseEngine._ranks_in_memory``)."""
    rest = set(steps) - {"replicates"}
    if "replicates" not in steps or not rest <= set(RANKED_STEPS):
        return False
    if "ranking_metrics" in rest:
        asked = keep.get("ranking_metrics")
        if params["micro"] or params["bins"] is not None or params["max_fpr"] is not None:
            return False
        if asked is None or set(asked[0]) - set(RANKED_METRICS):
            return False
    return True


def ranked_statistics(tables: Sequence[pl.DataFrame], keep: Keep) -> dict[str, pl.LazyFrame]:
    """The statistics the final steps read, from the tables :func:`replicated` gives (every
    batch's): ``threshold_counts`` (tp, fp, fn, tn) and the per-label rows of
    ``ranking_metrics`` asked in ``keep``, keyed by ``{segment, replicate}`` as the plans over
    the replicated rows key them."""
    counts = pl.concat(tables).select(
        pl.struct("segment", "replicate").alias("segment"), "label",
        "tp", "fp", "fn", "tn", "ap_sum", "discordant")
    p, n = pl.col("tp") + pl.col("fn"), pl.col("fp") + pl.col("tn")
    values = {"average_precision": pl.when(p > 0).then(pl.col("ap_sum") / p),
              "roc_auc": pl.when((p > 0) & (n > 0)).then(1 - pl.col("discordant"))}
    asked = keep.get("ranking_metrics", (list(values), []))[0]
    return {"threshold_counts": counts.lazy().drop("ap_sum", "discordant"),
            "ranking_metrics": pl.concat([counts.lazy().select(
                "segment", metric=pl.lit(metric), average=pl.lit(None, pl.String),
                label="label", value=values[metric], support=p)
                for metric in RANKED_METRICS if metric in asked]).pipe(keys_as_text)}


def replicated(rows: pl.DataFrame, ids: pl.DataFrame, starts: np.ndarray,
               replicates: Sequence[int], *, threshold: float, weighted: bool = False,
               ranking: bool = True) -> pl.DataFrame:
    """Each replicate's statistics of each label of ``rows``, the rows ranked once
    (:class:`Ranked` over whole counts, :class:`RankedWeights` with ``weighted``, a weight
    column): ``segment, label, replicate, tp, fp, fn, tn`` at ``threshold``, ``ap_sum``
    (average precision times P) and ``discordant`` (ROC AUC is 1 - discordant), those two
    only with ``ranking`` (else 0). ``ids``: :func:`sample_ids` of the whole input;
    ``starts``: their :func:`hash_starts`."""
    import numpy as np

    with stage("bootstrap: ranking"):
        kind = RankedWeights if weighted else Ranked
        ranked = kind.of(rows, ids, threshold=threshold)
    own = starts[ranked.ids]

    def statistics(replicate: int) -> dict[str, np.ndarray]:
        return ranked.statistics(draws(own, replicate), ranking=ranking)

    with stage("bootstrap: replicates"), ThreadPoolExecutor(pl.thread_pool_size()) as pool:
        # numpy lets go of the GIL in its gathers and running sums: a thread a core
        stats = list(pool.map(statistics, replicates))
    runs = len(ranked.keys)
    table = pl.DataFrame({
        "run": np.tile(np.arange(runs, dtype=np.uint32), len(replicates)),
        "replicate": np.repeat(np.array(replicates, dtype=np.int64), runs),
        **{c: np.concatenate([s[c] for s in stats]).astype(np.float64)
           for c in ("tp", "fp", "fn", "tn", "ap_sum", "discordant")}})
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


def _running_by_run(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The running sums of ``values`` within each of its consecutive stretches of
    ``lengths``, each from its own 0: stretch k's in items start_k + k .. end_k + k, a sum
    of doubles in the values' order alone (a stretch's sums do not depend on those before it:
    one running sum over all would carry their rounding, and lose a small label's weight
    after a large one's)."""
    import numpy as np

    sums = np.empty(len(values) + len(lengths), dtype=np.float64)
    start = 0
    for k, length in enumerate(lengths.tolist()):
        sums[start + k] = 0.0
        if length:
            np.cumsum(values[start:start + length],
                      out=sums[start + k + 1:start + k + 1 + length])
        start += length
    return sums


def _scale(total: np.ndarray) -> np.ndarray:
    """A power of two near 1 / ``total`` (1 where it is 0): scaling by it is exact, and a
    product of two scaled totals neither overflows nor underflows."""
    import numpy as np

    return np.ldexp(1.0, -np.frexp(total)[1])


def _running(weights: np.ndarray) -> np.ndarray:
    """The running sums of ``weights`` (draws: at most 12 a row) with a 0 first: item i is the
    sum of the first i (in 32 bits where they fit)."""
    import numpy as np

    wide = np.uint32 if len(weights) < (1 << 32) // 16 else np.int64
    sums = np.zeros(len(weights) + 1, dtype=wide)
    np.cumsum(weights, dtype=wide, out=sums[1:])
    return sums
