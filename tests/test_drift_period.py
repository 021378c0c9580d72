"""``me.drift(source, {"period": ...})``: a fixed period of the input's own time column as the
reference. Each result equals ``me.drift`` of the current rows against the period's rows
filtered by hand, and the numpy/scipy oracle (``scipy.stats.ks_2samp`` and
``wasserstein_distance`` directly on unweighted rows), on every engine: segments, windows in
a time zone, month edges, dates, every spelling of a period; then each door (the command
line, a report job, the statement it refuses) and each bad input.

Readings taken here: without windows the current rows are those with a time outside the
period (the period's rows are the reference; rows of no time are in neither, said in a
warning); with windows every window is compared, the period's own too (the reference's own
variation), and the reference is the period whole, not cut by window.
"""

from __future__ import annotations

import math
import warnings
from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scipy import stats

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.errors import DataWarning, InputError
from tests import oracle_drift as oracle
from tests.test_drift import ALL, assert_matches, table
from tests.test_report import LAKE, SMALL, _write_job

COMPARED = ["score", "decision", "truth", "age", "colour"]
PARIS = "Europe/Paris"


def timed(seed: int, regions: dict[str, int], *, weighted: bool = True,
          zone: str | None = None) -> pl.DataFrame:
    """:func:`tests.test_drift.table` with a time ``ts`` per sample (its rows share it, so a
    sample is wholly in a period or out of it) from 2026-09-28 to 2026-11-03, a third of them
    within two hours of a midnight at a month's edge (where a time zone moves them across it)
    and some in 2026-10-05 08:00-09:00; ``zone``: the times are instants there (else
    wall-clock times without a zone)."""
    frame = table(seed, regions, weighted=weighted)
    rng = np.random.default_rng(seed + 1000)
    samples = frame["sample"].unique(maintain_order=True)
    edges = [datetime(2026, 10, 1), datetime(2026, 11, 1)]
    times = []
    for i in range(samples.len()):
        kind = i % 6
        if kind < 2:  # near a month's edge, on either side
            at = edges[kind] + timedelta(minutes=int(rng.integers(-120, 120)))
        elif kind == 2:
            at = datetime(2026, 10, 5, 8) + timedelta(minutes=int(rng.integers(0, 60)))
        else:
            at = datetime(2026, 9, 28) + timedelta(minutes=int(rng.integers(0, 36 * 24 * 60)))
        times.append(at)
    stamps = pl.DataFrame({"sample": samples, "ts": pl.Series(times, dtype=pl.Datetime("us"))})
    if zone is not None:
        stamps = stamps.with_columns(pl.col("ts").dt.replace_time_zone(zone))
    return frame.join(stamps, on="sample", how="left", maintain_order="left")


def local(zone: str) -> pl.Expr:
    """``ts`` as wall-clock time in ``zone``, filtered by hand."""
    return pl.col("ts").dt.convert_time_zone(zone).dt.replace_time_zone(None)


def within(start: datetime, end: datetime, time: pl.Expr | None = None) -> pl.Expr:
    time = pl.col("ts") if time is None else time
    return (time >= start) & (time < end)


def same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    assert want.height > 0 and want["value"].null_count() < want.height
    assert_frame_equal(got, want, rel_tol=1e-12, abs_tol=1e-15, check_exact=False)


# -- equal to the rows filtered by hand, and to scipy ---------------------------------------------

def test_a_month_against_the_rows_outside_it_by_region(engine):
    frame = timed(1, {"north": 60, "south": 45, "one": 1})
    got = me.drift(frame, {"column": "ts", "period": "2026-10"}, COMPARED, by="region",
                   statistics=ALL, engine=engine)
    inside = within(datetime(2026, 10, 1), datetime(2026, 11, 1))
    reference, current = frame.filter(inside), frame.filter(~inside)
    same(got, me.drift(current, reference, COMPARED, by="region", statistics=ALL,
                       engine=engine))
    assert_matches(got, oracle.expected(reference, current, COMPARED, by=["region"],
                                        statistics=ALL), ["region"])
    ages = got.filter(pl.col("compared") == "age", pl.col("statistic") == "ks")
    assert ages["reference_rows"].sum() < reference["sample"].n_unique()  # once per sample


def test_unweighted_equals_scipy_directly(engine):
    frame = timed(2, {"all": 90}, weighted=False)
    got = me.drift(frame, {"period": ["2026-10-01", "2026-10-20T12:00"], "column": "ts"},
                   ["score"], statistics=["ks", "wasserstein"], engine=engine)
    inside = within(datetime(2026, 10, 1), datetime(2026, 10, 20, 12))
    for label in ("cat", "dog", "eel"):
        mine = pl.col("label") == label
        r = frame.filter(inside & mine)["score"].to_numpy()
        c = frame.filter(~inside & mine)["score"].to_numpy()
        rows = got.filter(pl.col("label") == label)
        ks = rows.filter(pl.col("statistic") == "ks").row(0, named=True)
        want = stats.ks_2samp(r, c)  # scipy's choice: exact at this size
        assert (ks["reference_rows"], ks["current_rows"]) == (r.size, c.size)
        assert math.isclose(ks["value"], want.statistic, rel_tol=1e-12)
        assert math.isclose(ks["p_value"], want.pvalue, rel_tol=1e-9)
        wasserstein = rows.filter(pl.col("statistic") == "wasserstein")["value"].item()
        assert math.isclose(wasserstein, stats.wasserstein_distance(r, c), rel_tol=1e-12)


@pytest.mark.parametrize("granularity", ["1w", "1mo"])
def test_each_window_in_a_time_zone_against_the_period(engine, granularity):
    """Instants read in Europe/Paris: October there starts at 2026-09-30 22:00 UTC and ends at
    2026-10-31 23:00 UTC (summer time ends on the 25th), so rows near midnight at the month's
    edges are in another month than in UTC. Every window, October's too, against October's
    rows of its region; the values equal scipy's on the same rows."""
    # a colour in every row: a window of a sample or two has one (a side with none is an error)
    frame = timed(3, {"north": 70, "south": 50}, weighted=False, zone="UTC").with_columns(
        pl.col("colour").fill_null("grey"))
    got = me.drift(frame, {"period": "2026-10"}, ["score", "colour"], by="region",
                   window=f"ts:{granularity}@{PARIS}", statistics=["ks", "wasserstein", "psi"],
                   engine=engine)
    october = within(datetime(2026, 10, 1), datetime(2026, 11, 1), local(PARIS))
    in_utc = within(datetime(2026, 10, 1), datetime(2026, 11, 1), local("UTC"))
    assert frame.filter(october).height != frame.filter(in_utc).height  # the zone matters
    reference = frame.filter(october)
    windowed = frame.with_columns(start=local(PARIS).dt.truncate(granularity))
    starts = windowed["start"].unique().sort().to_list()
    got_starts = got["window_start"].dt.convert_time_zone(PARIS).dt.replace_time_zone(None)
    assert got_starts.unique().sort().to_list() == starts
    for start in starts:
        current = windowed.filter(pl.col("start") == start).drop("start")
        want = me.drift(current, reference, ["score", "colour"], by="region",
                        statistics=["ks", "wasserstein", "psi"], engine=engine)
        # a window holds the segments it has rows of (the reference whole under each)
        want = want.filter(pl.col("region").is_in(current["region"].unique().implode()))
        mine = got.filter(got_starts == start)
        same(mine.drop("granularity", "window_start", "window_end"), want)
        for region, label in (("north", "cat"), ("south", "eel")):
            pick = (pl.col("region") == region) & (pl.col("label") == label)
            r, c = reference.filter(pick)["score"], current.filter(pick)["score"]
            row = mine.filter(pl.col("region") == region, pl.col("label") == label,
                              pl.col("statistic") == "wasserstein")
            if c.len():
                assert math.isclose(row["value"].item(), stats.wasserstein_distance(r, c),
                                    rel_tol=1e-12)
    # the period's own window (a month) is October against itself
    if granularity == "1mo":
        own = got.filter(got_starts == datetime(2026, 10, 1), pl.col("compared") == "score")
        assert set(own["value"]) == {0.0}


def test_a_range_over_a_month_edge_on_a_date_column_with_daily_windows(engine):
    frame = timed(4, {"north": 50, "south": 40}).with_columns(day=pl.col("ts").dt.date())
    period = {"period": ["2026-10-30", "2026-11-02"]}
    got = me.drift(frame, period, ["score", "age"], by="region", window="day:1d",
                   statistics=ALL, engine=engine)
    reference = frame.filter(within(date(2026, 10, 30), date(2026, 11, 2), pl.col("day")))
    days = set(reference["day"])  # across the month's edge, the end's day left out
    assert {date(2026, 10, 31), date(2026, 11, 1)} <= days <= {
        date(2026, 10, 30), date(2026, 10, 31), date(2026, 11, 1)}
    day = date(2026, 10, 31)
    want = me.drift(frame.filter(pl.col("day") == day), reference, ["score", "age"],
                    by="region", statistics=ALL, engine=engine)
    same(got.filter(pl.col("window_start") == day).drop("granularity", "window_start",
                                                         "window_end"), want)
    assert got["window_start"].n_unique() == frame["day"].n_unique()
    # and without windows: the days outside the range against it
    flat = me.drift(frame, {**period, "column": "day"}, ["score"], by="region",
                    statistics=ALL, engine=engine)
    inside = within(date(2026, 10, 30), date(2026, 11, 2), pl.col("day"))
    same(flat, me.drift(frame.filter(~inside), frame.filter(inside), ["score"], by="region",
                        statistics=ALL, engine=engine))


SPELLINGS = {
    "2026-Q4": (datetime(2026, 10, 1), datetime(2027, 1, 1)),
    "2026-10": (datetime(2026, 10, 1), datetime(2026, 11, 1)),
    "2026-W41": (datetime(2026, 10, 5), datetime(2026, 10, 12)),
    "2026-10-05": (datetime(2026, 10, 5), datetime(2026, 10, 6)),
    "2026-10-05T08": (datetime(2026, 10, 5, 8), datetime(2026, 10, 5, 9)),
    "2026-10-01/2026-10-15T12:30": (datetime(2026, 10, 1), datetime(2026, 10, 15, 12, 30)),
    "ts:2026-10-01/2026-10-15@Europe/Paris": (datetime(2026, 10, 1), datetime(2026, 10, 15)),
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_is_its_span(engine, spelling):
    frame = timed(5, {"all": 120}, zone="UTC")
    start, end = SPELLINGS[spelling]
    zone = PARIS if "@" in spelling else "UTC"
    reference = {"column": "ts", "period": spelling} if not spelling.startswith("ts:") \
        else f"period={spelling}"
    got = me.drift(frame, reference, ["score"], statistics=["ks", "psi"], engine=engine)
    inside = within(start, end, local(zone))
    assert frame.filter(inside).height > 0
    same(got, me.drift(frame.filter(~inside), frame.filter(inside), ["score"],
                       statistics=["ks", "psi"], engine=engine))


def test_dates_and_times_as_python_values():
    frame = timed(6, {"all": 80})
    by_text = me.drift(frame, {"column": "ts", "period": ["2026-10-01", "2026-10-05T08:30"]},
                       engine="polars")
    by_value = me.drift(frame, {"column": "ts", "period": [date(2026, 10, 1),
                                                          datetime(2026, 10, 5, 8, 30)]},
                        engine="polars")
    assert_frame_equal(by_text, by_value)
    day = me.drift(frame, {"column": "ts", "period": date(2026, 10, 5)}, engine="polars")
    assert_frame_equal(day, me.drift(frame, {"column": "ts", "period": "2026-10-05"},
                                     engine="polars"))


def test_a_segment_the_period_lacks_has_null_statistics_and_says_so(engine):
    frame = timed(7, {"north": 40, "south": 30})
    east = timed(8, {"east": 6}).with_columns(ts=pl.lit(datetime(2026, 11, 2, 12)),
                                              sample="e" + pl.col("sample"))
    got = me.drift(pl.concat([frame, east]), {"column": "ts", "period": "2026-10"},
                   ["score", "colour"], by="region", engine=engine)
    new = got.filter(pl.col("region") == "east")
    assert new.height > 0 and new["value"].null_count() == new.height
    assert (new["reference_rows"] == 0).all()
    assert new["note"].str.starts_with("no reference value").all()
    assert got.filter(pl.col("region") != "east")["note"].null_count() > 0


def test_rows_of_no_time_are_in_neither_side_and_said(engine):
    frame = timed(9, {"all": 60})
    blank = frame.with_columns(ts=pl.when(pl.col("sample").is_in(["s0003", "s0010"]))
                               .then(None).otherwise(pl.col("ts")))
    with pytest.warns(DataWarning, match=r"6 rows with a null 'ts' are in no period"):
        got = me.drift(blank, {"column": "ts", "period": "2026-10"}, engine=engine)
    known = blank.filter(pl.col("ts").is_not_null())
    inside = within(datetime(2026, 10, 1), datetime(2026, 11, 1))
    same(got, me.drift(known.filter(~inside), known.filter(inside), engine=engine))


def test_the_binned_scores_of_a_window_against_the_period():
    """The report's chart of a row's scores: the row's window (an instant in the window's
    time zone) against the period's rows, every score of each once."""
    from mleval_sql.drift import score_bins
    from mleval_sql.request import Request

    frame = timed(10, {"all": 90}, zone="UTC")
    window = f"ts:1w@{PARIS}"
    rows = me.drift(frame, {"period": "2026-10"}, window=window, statistics="ks")
    row = rows.filter(pl.col("value").is_not_null()).sort("value").row(-1, named=True)
    request = Request.build("drift", reference={"period": "2026-10"}, window=window)
    bins = score_bins(request, frame, {"granularity": row["granularity"],
                                       "window_start": row["window_start"]}, row["label"])
    totals = dict(bins.group_by("current").agg(pl.col("weight").sum()).iter_rows())
    assert totals == pytest.approx({False: row["reference_weight"],
                                    True: row["current_weight"]}, rel=1e-12)


# -- the doors ------------------------------------------------------------------------------------

def test_the_command_line_gives_the_api_rows(tmp_path):
    frame = timed(11, {"north": 30, "south": 30})
    path = tmp_path / "preds.parquet"
    frame.write_parquet(path)
    out = tmp_path / "drift.parquet"
    assert main(["drift", str(path), "--reference", "period=ts:2026-10-01/2026-10-20",
                 "--by", "region", "--compared", "score,colour", "-o", str(out)]) == 0
    want = me.drift(frame, {"column": "ts", "period": ["2026-10-01", "2026-10-20"]},
                    ["score", "colour"], by="region")
    assert_frame_equal(pl.read_parquet(out), want)
    assert main(["drift", str(path), "--reference", "period=2026-10", "--window",
                 f"ts:1w@{PARIS}", "-o", str(out)]) == 0
    assert_frame_equal(pl.read_parquet(out), me.drift(frame, {"period": "2026-10"},
                                                      window=f"ts:1w@{PARIS}"))


def test_the_command_line_prints_a_period_statement(capsys):
    assert main(["sql", "--drift", "--reference", "period=ts:2026-10", "--table", "t"]) == 0
    printed = capsys.readouterr().out
    assert "against 2026-10 of 'ts' (from 2026-10-01 to 2026-11-01, UTC)" in printed
    assert "'2026-10-01 00:00:00'" in printed and "'2026-11-01 00:00:00'" in printed


def test_evaluate_refuses_a_period_as_its_calibration_reference():
    with pytest.raises(InputError, match="a source of labelled rows"):
        me.evaluate(timed(12, {"all": 5}), ["estimated_f1"],
                    reference={"period": "2026-10", "column": "ts"})


DRIFT = SMALL + """
[drift]
reference = {period = "2026-11-01"}
compared = ["score", "decision"]
statistics = ["ks", "psi"]
"""


def test_a_job_with_windows_compares_each_window_with_the_period(tmp_path):
    text = DRIFT + '\n[window]\ncolumn = "date"\nevery = "1d"\n'
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 0
    rows = pl.read_parquet(tmp_path / "out" / "drift.parquet").filter(
        pl.col("segmentation") == "overall")
    want = me.drift(LAKE, {"period": "2026-11-01"}, ["score", "decision"], by="model",
                    window="date:1d", statistics=["ks", "psi"], task="multilabel")
    keys = ["window_start", "model", "compared", "label", "statistic"]
    assert_frame_equal(rows.select(want.columns).sort(keys), want.sort(keys), rel_tol=1e-12,
                       check_exact=False)
    lake = pl.read_parquet(LAKE, hive_partitioning=True)
    day = date(2026, 11, 2)
    by_hand = me.drift(lake.filter(pl.col("date") == day),
                       lake.filter(pl.col("date") == date(2026, 11, 1)),
                       ["score", "decision"], by="model", statistics=["ks", "psi"],
                       task="multilabel")
    same(want.filter(pl.col("window_start") == day).drop("granularity", "window_start",
                                                          "window_end"), by_hand)


def test_a_job_without_windows_names_the_column(tmp_path):
    text = DRIFT.replace('{period = "2026-11-01"}', '{period = 2026-11-01, column = "date"}')
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 0
    rows = pl.read_parquet(tmp_path / "out" / "drift.parquet").filter(
        pl.col("segmentation") == "region")
    want = me.drift(LAKE, {"period": "2026-11-01", "column": "date"}, ["score", "decision"],
                    by=["model", "region"], statistics=["ks", "psi"], task="multilabel")
    keys = ["model", "region", "compared", "label", "statistic"]
    assert_frame_equal(rows.select(want.columns).sort(keys), want.sort(keys), rel_tol=1e-12,
                       check_exact=False)


@pytest.mark.parametrize(("reference", "message"), [
    ('{period = "2026-11-01"}', "drift: reference: the period 2026-11-01 is of which time "
                                "column?"),
    ('{period = "2026-11-31", column = "date"}', "drift: reference: the period '2026-11-31' "
                                                 "is no date"),
    ('{period = ["2026-11-02", "2026-11-01"], column = "date"}',
     "drift: reference: the period's end 2026-11-01 is not after its start 2026-11-02"),
])
def test_a_job_with_a_bad_period_gets_one_line(tmp_path, capsys, reference, message):
    text = DRIFT.replace('{period = "2026-11-01"}', reference)
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


# -- bad input ------------------------------------------------------------------------------------

def _bad() -> dict[str, tuple]:
    frame = timed(13, {"all": 30}, zone="UTC")
    dated = frame.with_columns(day=pl.col("ts").dt.date())
    october = frame.filter(within(datetime(2026, 10, 1), datetime(2026, 11, 1), local("UTC")))
    return {
        "unparseable": (frame, {"column": "ts", "period": "October"}, {},
                        "cannot read the period 'October': give a year"),
        "no such day": (frame, {"column": "ts", "period": "2026-02-30"}, {},
                        r"the period '2026-02-30' is no date"),
        "a month as a range's bound": (frame, {"column": "ts", "period": ["2026-10", "2026-12"]},
                                       {}, r"a range's bounds are days or times"),
        "end not after start": (frame, {"column": "ts", "period": ["2026-10-15", "2026-10-15"]},
                                {}, "the period's end 2026-10-15 is not after its start"),
        "an offset": (frame, {"column": "ts", "period": "2026-10-01T00:00Z/2026-10-02"}, {},
                      "give wall-clock time, without an offset"),
        "an unknown key": (frame, {"column": "ts", "period": "2026-10", "model": "a"}, {},
                           "a period has period, column, time_zone; got 'model'"),
        "an unknown time zone": (frame, {"column": "ts", "period": "2026-10",
                                         "time_zone": "Mars/Olympus"}, {},
                                 "unknown time_zone 'Mars/Olympus'"),
        "no column": (frame, {"period": "2026-10"}, {}, "is of which time column"),
        "column missing": (frame, {"column": "when", "period": "2026-10"}, {},
                           "the period's time column 'when' is not in the input"),
        "column not temporal": (frame, {"column": "age", "period": "2026-10"}, {},
                                "the period's time column 'age' is Float64, not a date"),
        "text column": (frame.with_columns(pl.col("ts").cast(pl.String)),
                        {"column": "ts", "period": "2026-10"}, {},
                        r"is String, not a date or a timestamp \(text: parse it"),
        "a time zone on dates": (dated, {"column": "day", "period": "2026-10",
                                         "time_zone": PARIS}, {},
                                 "'day' holds dates, which have no time zone"),
        "hours on dates": (dated, {"column": "day", "period": "2026-10-05T08"}, {},
                           "'day' holds dates, which have no hours"),
        "another time zone than the window's": (
            frame, {"period": "2026-10", "time_zone": "UTC"}, {"window": f"ts:1d@{PARIS}"},
            r"read in the window's time zone \(Europe/Paris\), not time_zone='UTC'"),
        "a period of no rows": (frame, {"column": "ts", "period": "2025-10"}, {},
                                r"the period 2025-10 of 'ts' \(from 2025-10-01 to 2025-11-01, "
                                r"UTC\) holds no row of the input \(its 'ts' runs from "
                                r"2026-09-\d\d \d\d:\d\d:00 to 2026-11-\d\d \d\d:\d\d:00 in UTC\): "
                                r"every statistic would be null"),
        "a period of no rows, with windows": (frame, {"period": "2025-10"},
                                              {"window": "ts:1d"}, "holds no row of the input"),
        "every row in the period": (october, {"column": "ts", "period": "2026"}, {},
                                    "every row of the input is in the period 2026"),
    }


BAD = _bad()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(engine, case):
    source, reference, options, match = BAD[case]
    with pytest.raises(InputError, match=match), warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        me.drift(source, reference, engine=engine, **options)
