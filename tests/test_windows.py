"""Windows (``window=``): a time column cut into calendar windows, one segmentation more.

Each window's rows equal ``me.evaluate`` of the rows whose local time falls in it, where the
test finds each row's local time and window itself (:mod:`zoneinfo`, one row at a time, not the
module's expressions); time zones and edges (a half-hour offset, naive timestamps, dates, ISO
weeks, months, quarters, years, the days and hours where clocks change); several granularities
at once; the other doors (curve, compare, the command line, the null-time warning); the pasted
statement on DuckDB, PostgreSQL and Spark; and each bad input's one error.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.engines import local_engines
from mleval_sql.errors import DataWarning, InputError
from mleval_sql.windows import Window
from tests.data import make_predictions
from tests.helpers import assert_frames_close, assert_same_rows
from tests.servers import Postgres
from tests.test_portable import load
from tests.test_statement import duckdb_rows, psql_rows, spark_rows

pytestmark = pytest.mark.filterwarnings("ignore::mleval_sql.errors.SklearnDefaultWarning")

UTC = timezone.utc
NY, KOLKATA = "America/New_York", "Asia/Kolkata"
WINDOW = ["granularity", "window_start", "window_end"]
Moment = datetime | date


# -- the test's own reading of a time: zoneinfo, a row at a time ------------------------------

def wall(value: Moment, zone: str) -> Moment:
    """``value`` as wall-clock time in ``zone``: an instant converted there, a naive timestamp
    or a date as it is."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    return value


def naive(value: Moment) -> Moment:
    """A result's window bound as wall-clock time (a date as it is)."""
    return value.replace(tzinfo=None) if isinstance(value, datetime) else value


def start_of(local: Moment, grain: str) -> Moment:
    """The start of the calendar window of ``grain`` holding wall-clock time ``local``."""
    if grain == "1h":
        assert isinstance(local, datetime)
        return local.replace(minute=0, second=0, microsecond=0)
    day = local.date() if isinstance(local, datetime) else local
    first = {"1d": day, "1w": day - timedelta(days=day.weekday()), "1mo": day.replace(day=1),
             "1q": day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1),
             "1y": day.replace(month=1, day=1)}[grain]
    return datetime.combine(first, time()) if isinstance(local, datetime) else first


def end_of(start: Moment, grain: str) -> Moment:
    """The wall-clock end of the window of ``grain`` starting at ``start``."""
    steps = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "1w": timedelta(weeks=1)}
    if grain in steps:
        return start + steps[grain]
    month = start.month - 1 + {"1mo": 1, "1q": 3, "1y": 12}[grain]
    return start.replace(year=start.year + month // 12, month=month % 12 + 1)


def expected_members(times: list[Moment | None], every: list[str],
                     zone: str) -> dict[tuple[str, Moment], set[int]]:
    """(granularity, wall-clock start) -> the indices of ``times`` in that window."""
    found: dict[tuple[str, Moment], set[int]] = {}
    for i, value in enumerate(times):
        if value is not None:
            for grain in every:
                found.setdefault((grain, start_of(wall(value, zone), grain)), set()).add(i)
    return found


# -- data --------------------------------------------------------------------------------------

def timed(task: str, first: Moment, span: timedelta, *, seed: int = 11, n_samples: int = 60,
          weighted: bool = True, ordered: bool = False) -> pl.DataFrame:
    """``make_predictions``'s rows (tied scores, weights with zeros, segments ``region``), each
    sample at one random time in ``[first, first + span)``: to the minute for a timestamp
    (aware: a UTC column; naive: a column without a time zone), to the day for a date
    (``ordered``: the times in the samples' order)."""
    frame = make_predictions(task, seed,  # type: ignore[arg-type]
                             n_samples=n_samples, weighted=weighted, complete=True)
    rng = np.random.default_rng(seed)
    samples = frame["sample"].unique(maintain_order=True)
    if isinstance(first, datetime):
        steps = rng.integers(0, span // timedelta(minutes=1), samples.len())
        times: list[Moment] = [first + timedelta(minutes=int(s)) for s in steps]
    else:
        times = [first + timedelta(days=int(s)) for s in rng.integers(0, span.days, samples.len())]
    if ordered:
        times.sort()
    return frame.join(pl.DataFrame({"sample": samples, "ts": times}), on="sample",
                      maintain_order="left")


def tp_frame(times: list[Moment | None]) -> pl.DataFrame:
    """One positive sample per time, row ``i`` weighing ``2**i``: a window's ``tp`` is the set
    of its rows, bit by bit."""
    n = len(times)
    return pl.DataFrame({"sample": list(range(n)), "score": [0.9] * n, "truth": [True] * n,
                         "weight": [2.0 ** i for i in range(n)], "ts": times})


def members(times: list[Moment | None], window: Any, engine: str,
            ) -> tuple[pl.DataFrame, dict[tuple[str, Moment], set[int]]]:
    """The result of ``tp`` over :func:`tp_frame` (``times``) by ``window``, and which of
    ``times`` each window holds, keyed by (granularity, wall-clock start)."""
    got = me.evaluate(tp_frame(times), "tp", task="binary", window=window, engine=engine)
    held = {(g, naive(s)): {i for i in range(len(times)) if int(v) >> i & 1}
            for g, s, v in got.select("granularity", "window_start", "value").iter_rows()}
    assert len(held) == got.height  # one row per window
    return got, held


# -- 1. each window is evaluate of its rows ----------------------------------------------------

_EXPECTED: dict[tuple[Any, ...], pl.DataFrame] = {}


def check_windows(got: pl.DataFrame, frame: pl.DataFrame, window: Any, by: list[str],
                  expect: Callable[[pl.DataFrame], pl.DataFrame], key: tuple[Any, ...]) -> None:
    """``got``'s windows are those of ``frame``'s rows, each with its wall-clock end, in the
    granularities' order, and each window's rows equal ``expect`` of the rows whose local time
    is in [window_start, window_end) (``key``: caches ``expect``'s results)."""
    parsed = Window.parse(window)
    zone, every = parsed.time_zone, list(parsed.every)
    assert got.columns[:3 + len(by)] == [*WINDOW, *by]
    dated = frame.schema["ts"] == pl.Date
    assert got.schema["window_start"] == got.schema["window_end"] == (
        pl.Date if dated else pl.Datetime("us", zone))
    assert list(dict.fromkeys(got["granularity"])) == every
    local = [None if t is None else wall(t, zone) for t in frame["ts"]]
    rows = frame.with_columns(pl.Series("local", local))
    windows = got.select(WINDOW).unique(maintain_order=True)
    assert {(g, naive(s)) for g, s, _ in windows.iter_rows()} == \
        set(expected_members(list(frame["ts"]), every, zone))
    for (grain, start, end), part in got.group_by(WINDOW, maintain_order=True):
        lo, hi = naive(start), naive(end)  # type: ignore[arg-type]
        assert hi == end_of(lo, grain), (grain, start, end)  # type: ignore[arg-type]
        cached = (*key, lo, hi)
        if cached not in _EXPECTED:
            inside = rows.filter(pl.col("local") >= lo, pl.col("local") < hi).drop("local")
            assert inside.height > 0
            _EXPECTED[cached] = expect(inside)
        assert_same_rows(part.drop(WINDOW), _EXPECTED[cached], by)


CLASSIFY = ["roc_auc", "f1", "log_loss"]
#: (task, metrics, average, window, first time, span): a window zone and a kind of time column
#: each, crossing days, weeks, months, quarters, years and the days clocks change.
CASES = [
    pytest.param("binary", CLASSIFY, None, "ts:1d,1w@America/New_York",
                 datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=6), id="binary-aware-ny"),
    pytest.param("multiclass", CLASSIFY, "macro",
                 {"column": "ts", "every": ["1w", "1mo"], "time_zone": KOLKATA},
                 datetime(2026, 2, 20, tzinfo=UTC), timedelta(days=17), id="multiclass-kolkata"),
    pytest.param("multilabel", CLASSIFY, "macro", "ts:1mo,1q@Europe/Paris",
                 datetime(2026, 3, 10), timedelta(days=40), id="multilabel-naive"),
    pytest.param("regression", ["mse", "mae", "r2"], None, "ts:1h,1d@America/New_York",
                 datetime(2026, 11, 1, 2, tzinfo=UTC), timedelta(hours=8),
                 id="regression-hours-fall-back"),
    pytest.param("binary", CLASSIFY, None, "ts:1w,1y", date(2025, 12, 15), timedelta(days=28),
                 id="binary-dates"),
]


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "unweighted"])
@pytest.mark.parametrize(("task", "metrics", "average", "window", "first", "span"), CASES)
def test_each_window_equals_evaluate_of_its_rows(engine, task, metrics, average, window,
                                                  first, span, weighted):
    """The expected rows come from the polars engine (engines agree elsewhere), once for both
    engines."""
    frame = timed(task, first, span, weighted=weighted)
    options = {"task": task, "average": average, "by": "region"}
    got = me.evaluate(frame, metrics, window=window, engine=engine, **options)
    check_windows(got, frame, window, ["region"],
                  lambda rows: me.evaluate(rows, metrics, engine="polars", **options),
                  ("evaluate", task, str(window), first, weighted))


# -- 2. time zones and edges -------------------------------------------------------------------

def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def at(zone: str, *parts: int) -> datetime:
    """Wall-clock time ``parts`` in ``zone`` as a UTC instant (the earlier one if repeated)."""
    return datetime(*parts, tzinfo=ZoneInfo(zone)).astimezone(UTC)


def spans(got: pl.DataFrame) -> dict[tuple[str, Moment], tuple[datetime, datetime, int]]:
    """(granularity, wall-clock start) -> the window's start and end as UTC instants (compared
    in UTC: Python never finds a time of a repeated hour equal to one of another zone) and
    the set of its rows (:func:`tp_frame`)."""
    instant = pl.col("window_start", "window_end").dt.convert_time_zone("UTC")
    return {(g, naive(s)): (a, b, int(v)) for g, s, a, b, v in got.select(
        "granularity", "window_start", instant.name.suffix("_utc"), "value").iter_rows()}


def check_members(times: list[Moment | None], window: Any, engine: str) -> pl.DataFrame:
    """The windows of ``times`` are those zoneinfo finds, each holding the same rows, and each
    row's instant is in its window's [window_start, window_end) as instants too."""
    parsed = Window.parse(window)
    got, held = members(times, window, engine)
    assert held == expected_members(times, list(parsed.every), parsed.time_zone)
    if got.schema["window_start"] != pl.Date:
        for key, (start, end, _) in spans(got).items():
            assert start < end, key
            for i in held[key]:
                t = times[i]
                if isinstance(t, datetime) and t.tzinfo is not None:
                    assert start <= t < end, (key, start, end, t)
    return got


def test_utc_instants_in_new_york_and_kolkata(engine):
    times: list[Moment | None] = [
        datetime(2026, 1, 15, 4, 59, tzinfo=UTC), datetime(2026, 1, 15, 5, tzinfo=UTC),
        datetime(2026, 1, 14, 18, 29, tzinfo=UTC), datetime(2026, 1, 14, 18, 30, tzinfo=UTC)]
    got, held = members(times, "ts:1d@America/New_York", engine)
    assert held == {("1d", datetime(2026, 1, 14)): {0, 2, 3}, ("1d", datetime(2026, 1, 15)): {1}}
    assert got.schema["window_start"] == got.schema["window_end"] == pl.Datetime("us", NY)
    assert got["window_start"].to_list() == [datetime(2026, 1, 14, tzinfo=ZoneInfo(NY)),
                                             datetime(2026, 1, 15, tzinfo=ZoneInfo(NY))]
    assert got["window_end"][0] == datetime(2026, 1, 15, 5, tzinfo=UTC)  # the instant
    got, held = members(times, {"column": "ts", "every": "1d", "time_zone": KOLKATA}, engine)
    assert held == {("1d", datetime(2026, 1, 14)): {2}, ("1d", datetime(2026, 1, 15)): {0, 1, 3}}
    assert got.schema["window_start"] == pl.Datetime("us", KOLKATA)
    assert got["window_start"][1] == datetime(2026, 1, 14, 18, 30, tzinfo=UTC)  # +05:30
    assert got["window_end"][1] == datetime(2026, 1, 15, 18, 30, tzinfo=UTC)
    check_members(times, "ts:1h,1d,1w@Asia/Kolkata", engine)


def test_every_time_unit_gives_microsecond_windows(engine):
    """Milliseconds (Java's parquet), nanoseconds (pandas'): the windows of microseconds, as
    from every engine."""
    frame = tp_frame([datetime(2026, 1, 14, 23, 59, tzinfo=UTC), utc(2026, 1, 15, 5, 1)])

    def windows(ts: pl.Expr) -> pl.DataFrame:
        return me.evaluate(frame.with_columns(ts), "tp", task="binary",
                           window="ts:1h,1d@America/New_York", engine=engine)

    aware, local = windows(pl.col("ts")), windows(pl.col("ts").dt.replace_time_zone(None))
    assert aware.schema["window_start"] == local.schema["window_end"] == pl.Datetime("us", NY)
    for unit in ("ms", "ns"):
        for ts, want in ((pl.col("ts"), aware),
                         (pl.col("ts").dt.replace_time_zone(None), local)):
            got = windows(ts.dt.cast_time_unit(unit))
            assert got.schema == want.schema and got.equals(want), (unit, got.schema)


def test_naive_timestamps_are_wall_clock_time_in_the_zone(engine):
    times: list[Moment | None] = [datetime(2026, 1, 14, 23, 59), datetime(2026, 1, 15),
                                  datetime(2026, 3, 8, 2, 30)]  # 02:30: a time New York skips
    # (its hour has no instants: naive data there is no test of hours, see windows._instant)
    for zone in (NY, KOLKATA):
        got, held = members(times, f"ts:1d@{zone}", engine)
        assert held == {("1d", datetime(2026, 1, 14)): {0}, ("1d", datetime(2026, 1, 15)): {1},
                        ("1d", datetime(2026, 3, 8)): {2}}
        assert got.schema["window_start"] == pl.Datetime("us", zone)
        assert got["window_start"][1] == datetime(2026, 1, 15, tzinfo=ZoneInfo(zone))
    check_members(times, "ts:1d,1w,1mo@America/New_York", engine)
    check_members(times[:2], "ts:1h@America/New_York", engine)


def test_dates_are_calendar_days(engine):
    times: list[Moment | None] = [
        date(2026, 3, 1), date(2026, 3, 2),  # a Sunday, the Monday after
        date(2026, 3, 31), date(2026, 4, 1),  # a month's and a quarter's last day, the next
        date(2025, 12, 31), date(2026, 1, 1)]  # a year's (one ISO week)
    got, held = members(times, "ts:1d,1w,1mo,1q,1y@America/New_York", engine)
    assert got.schema["window_start"] == got.schema["window_end"] == pl.Date
    weeks = {s: i for (g, s), i in held.items() if g == "1w"}
    assert weeks == {date(2026, 2, 23): {0}, date(2026, 3, 2): {1}, date(2026, 3, 30): {2, 3},
                     date(2025, 12, 29): {4, 5}}
    assert {s: i for (g, s), i in held.items() if g == "1q"} == {
        date(2026, 1, 1): {0, 1, 2, 5}, date(2026, 4, 1): {3}, date(2025, 10, 1): {4}}
    assert {s: i for (g, s), i in held.items() if g == "1y"} == {
        date(2026, 1, 1): {0, 1, 2, 3, 5}, date(2025, 1, 1): {4}}
    ends = {(g, s): e for g, s, e in got.select(WINDOW).iter_rows()}
    assert ends["1w", date(2025, 12, 29)] == date(2026, 1, 5)
    assert ends["1mo", date(2026, 3, 1)] == date(2026, 4, 1)
    assert ends["1q", date(2025, 10, 1)] == date(2026, 1, 1)
    assert ends["1y", date(2025, 1, 1)] == date(2026, 1, 1)
    check_members(times, "ts:1d,1w,1mo,1q,1y", engine)


def test_weeks_months_quarters_and_years_of_instants(engine):
    times: list[Moment | None] = [
        at(NY, 2026, 3, 1, 23, 59), at(NY, 2026, 3, 2),  # Sunday night, Monday midnight
        at(NY, 2026, 3, 31, 23, 59), at(NY, 2026, 4, 1),
        at(NY, 2025, 12, 31, 23, 59), at(NY, 2026, 1, 1)]
    got = check_members(times, "ts:1w,1mo,1q,1y@America/New_York", engine)
    starts = got.filter(pl.col("granularity") == "1w")["window_start"].to_list()
    assert starts == [datetime(2025, 12, 29, tzinfo=ZoneInfo(NY)),
                      datetime(2026, 2, 23, tzinfo=ZoneInfo(NY)),
                      datetime(2026, 3, 2, tzinfo=ZoneInfo(NY)),
                      datetime(2026, 3, 30, tzinfo=ZoneInfo(NY))]
    # in UTC the same instants fall elsewhere: Sunday 23:59 in New York is Monday there
    _, held = members(times, "ts:1w", engine)
    assert held["1w", datetime(2026, 3, 2)] == {0, 1}


#: Instants around New York's changes of 2026 (03-08: 23 hours; 11-01: 25 hours, 01:00-02:00
#: twice) and Santiago's (09-06: midnight skipped, the day starts at 01:00).
SPRING = [at(NY, 2026, 3, 7, 23, 59), at(NY, 2026, 3, 8), datetime(2026, 3, 8, 6, 30, tzinfo=UTC),
          datetime(2026, 3, 8, 7, tzinfo=UTC), at(NY, 2026, 3, 8, 23, 59), at(NY, 2026, 3, 9)]
FALL = [at(NY, 2026, 10, 31, 23, 59), at(NY, 2026, 11, 1), *(
    datetime(2026, 11, 1, h, m, tzinfo=UTC) for h, m in ((5, 0), (5, 30), (6, 0), (6, 59), (7, 0))),
    at(NY, 2026, 11, 1, 23, 59), at(NY, 2026, 11, 2)]


def test_days_and_hours_where_clocks_change(engine):
    got = spans(check_members(SPRING, "ts:1h,1d@America/New_York", engine))
    # the 23-hour day holds exactly the rows of that local day
    assert got["1d", datetime(2026, 3, 8)] == (utc(2026, 3, 8, 5), utc(2026, 3, 9, 4), 0b011110)
    assert got["1d", datetime(2026, 3, 8)][1] - got["1d", datetime(2026, 3, 8)][0] == \
        timedelta(hours=23)
    # 01:00 EST, then 03:00 EDT: an hour each, and no window for the hour skipped
    assert got["1h", datetime(2026, 3, 8, 1)] == (utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), 0b100)
    assert got["1h", datetime(2026, 3, 8, 3)] == (utc(2026, 3, 8, 7), utc(2026, 3, 8, 8), 0b1000)
    assert ("1h", datetime(2026, 3, 8, 2)) not in got

    got = spans(check_members(FALL, "ts:1h,1d@America/New_York", engine))
    assert got["1d", datetime(2026, 11, 1)] == (utc(2026, 11, 1, 4), utc(2026, 11, 2, 5),
                                                0b011111110)
    assert got["1d", datetime(2026, 11, 1)][1] - got["1d", datetime(2026, 11, 1)][0] == \
        timedelta(hours=25)
    # the repeated hour is one window of two hours: 01:00 EDT to 02:00 EST
    assert got["1h", datetime(2026, 11, 1, 1)] == (utc(2026, 11, 1, 5), utc(2026, 11, 1, 7),
                                                   0b111100)
    assert got["1h", datetime(2026, 11, 1, 2)] == (utc(2026, 11, 1, 7), utc(2026, 11, 1, 8),
                                                   0b1000000)
    assert got["1h", datetime(2026, 11, 1, 0)][:2] == (utc(2026, 11, 1, 4), utc(2026, 11, 1, 5))

    # Santiago skips midnight: the day starts when clocks go to 01:00 (its start, shown there),
    # and lasts 23 hours
    santiago = [at("America/Santiago", 2026, 9, 5, 23, 59), utc(2026, 9, 6, 4)]
    got = spans(members(santiago, "ts:1d@America/Santiago", engine)[0])
    assert got == {("1d", datetime(2026, 9, 5)): (utc(2026, 9, 5, 4), utc(2026, 9, 6, 4), 0b1),
                   ("1d", datetime(2026, 9, 6, 1)): (utc(2026, 9, 6, 4), utc(2026, 9, 7, 3), 0b10)}


# -- 3. several granularities at once ----------------------------------------------------------

def test_several_granularities_are_each_ones_rows(engine):
    frame = timed("multilabel", datetime(2026, 2, 22, tzinfo=UTC), timedelta(days=12))
    options = {"task": "multilabel", "average": "macro", "by": "region", "engine": engine}
    every = ["1mo", "1d", "1w"]  # not sorted: the order given
    got = me.evaluate(frame, ["f1", "roc_auc"], window={"column": "ts", "every": every,
                                                        "time_zone": NY}, **options)
    assert list(dict.fromkeys(got["granularity"])) == every
    for grain in every:
        alone = me.evaluate(frame, ["f1", "roc_auc"], window=f"ts:{grain}@{NY}", **options)
        assert alone.height > 0
        assert_frames_close(got.filter(pl.col("granularity") == grain), alone,
                            check_dtypes=True)


# -- 4. the other doors ------------------------------------------------------------------------

def test_curve_by_window_is_each_windows_curve(engine):
    frame = timed("multilabel", datetime(2026, 3, 1, tzinfo=UTC), timedelta(days=14))
    window = "ts:1w@America/New_York"
    got = me.curve(frame, "roc", by="region", window=window, engine=engine)
    assert got.columns[:4] == [*WINDOW, "region"]

    local = pl.Series([wall(t, NY) for t in frame["ts"]])
    for (_, start, end), part in got.group_by(WINDOW, maintain_order=True):
        inside = frame.filter((local >= naive(start)) & (local < naive(end)))
        want = me.curve(inside, "roc", by="region", engine="polars")
        assert_frames_close(part.drop(WINDOW), want, check_dtypes=True)


def paired(seed: int = 5) -> pl.DataFrame:
    """Two models scoring the same timed samples, the times in the samples' order: the first
    window's samples are the input's first, ranked alike in the window's rows and in all (the
    bootstrap's draws hash a sample's rank among the input's)."""
    base = timed("binary", datetime(2026, 3, 2, tzinfo=UTC), timedelta(days=14), seed=seed,
                 ordered=True)
    rng = np.random.default_rng(seed)
    other = base.with_columns(
        score=pl.Series(np.clip(base["score"].to_numpy() + rng.normal(0, 0.2, base.height), 0, 1)
                        .round(1)))
    return pl.concat([base.with_columns(model=pl.lit("a")), other.with_columns(
        model=pl.lit("b"))])


def test_compare_by_window_is_compare_of_a_windows_rows(engine):
    frame = paired()
    options: dict[str, Any] = {"model": "model", "baseline": "a", "by": "region",
                               "resamples": 20, "engine": engine, "task": "binary"}
    got = me.compare(frame, ["roc_auc", "f1"], window="ts:1w@America/New_York", **options)
    assert got.columns[:4] == [*WINDOW, "region"]
    assert got.schema["window_start"] == pl.Datetime("us", NY)
    starts = got["window_start"].unique(maintain_order=True).to_list()
    assert len(starts) == 3
    start = starts[0]
    local = pl.Series([wall(t, NY) for t in frame["ts"]])
    inside = frame.filter((local >= naive(start)) & (local < naive(start) + timedelta(weeks=1)))
    want = me.compare(inside, ["roc_auc", "f1"], **options)
    part = got.filter(pl.col("window_start") == start)
    assert (part["window_end"] == start + timedelta(weeks=1)).all()
    assert part.height == want.height > 0
    assert_frames_close(part.drop(WINDOW), want, check_dtypes=True)


def test_command_line_window_gives_the_apis_rows(capsys, tmp_path):
    frame = timed("binary", datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=4))
    path, out = tmp_path / "preds.parquet", tmp_path / "out.csv"
    frame.write_parquet(path)
    code = main(["evaluate", str(path), "--metric", "f1,roc_auc", "--by", "region", "--task",
                 "binary", "--window", "ts:1d,1w@America/New_York", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    want = me.evaluate(frame, ["f1", "roc_auc"], by="region", task="binary",
                       window="ts:1d,1w@America/New_York")
    text = out.read_text()
    assert "2026-03-05T00:00:00.000000-0500" in text  # the zone's offset written
    cli = pl.read_csv(out, schema_overrides=want.schema)
    assert cli.columns == want.columns
    assert cli.select(*WINDOW, "region").equals(want.select(*WINDOW, "region"))
    assert_same_rows(cli, want, [*WINDOW, "region"])


def with_null_times(frame: pl.DataFrame, samples: list[str]) -> pl.DataFrame:
    return frame.with_columns(ts=pl.when(pl.col("sample").is_in(samples)).then(None)
                              .otherwise(pl.col("ts")))


def test_rows_without_a_time_are_counted_and_left_out(engine, capsys, tmp_path):
    frame = with_null_times(timed("binary", datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=4)),
                            ["s003", "s010", "s020"])
    window = "ts:1d,1w@America/New_York"
    with pytest.warns(DataWarning, match=r"window: 3 rows with a null 'ts' are in no window, "
                      "left out of the result") as caught:
        got = me.evaluate(frame, ["f1", "roc_auc"], by="region", window=window, engine=engine)
    assert sum(isinstance(w.message, DataWarning) for w in caught) == 1  # once per request
    want = me.evaluate(frame.drop_nulls("ts"), ["f1", "roc_auc"], by="region", window=window,
                       engine=engine)
    assert_frames_close(got, want, check_dtypes=True)
    with pytest.warns(DataWarning, match=r"window: 1 row with a null 'ts' is in no window"):
        me.curve(with_null_times(frame.drop_nulls("ts"), ["s001"]), "roc", window=window,
                 engine=engine)

    path = tmp_path / "preds.parquet"
    frame.write_parquet(path)
    code = main(["evaluate", str(path), "--metric", "f1", "--window", window, "--format", "csv"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "mleval: note: window: 3 rows with a null 'ts' are in no window" in err
    assert pl.read_csv(io.StringIO(out)).height > 0


# -- 5. the pasted statement -------------------------------------------------------------------

def naive_windows(frame: pl.DataFrame) -> pl.DataFrame:
    """The API's rows with the windows as a statement gives them: wall-clock time."""
    return frame.with_columns(pl.col("window_start", "window_end").dt.replace_time_zone(None)
                              if frame.schema["window_start"] != pl.Date else [])


def same_as_statement(got: pl.DataFrame, want: pl.DataFrame, by: list[str]) -> None:
    want = naive_windows(want)
    assert got.columns == want.columns
    assert got.schema["window_start"] == want.schema["window_start"], (got.schema, want.schema)
    keys = [*WINDOW, *by]
    assert_same_rows(got, want, keys)
    assert got.select(keys).equals(want.select(keys))  # in evaluate's order


#: (task, metrics, average, window, first time, span): a statement's cases, a kind of time
#: column each (a tz-aware one in a zone other than UTC, naive, dates) and granularities whose
#: order is not the text's ("1w" before "1mo", "1h" before "1d").
STATEMENTS = [
    pytest.param("binary", ["f1", "roc_auc"], None, "ts:1d,1w@America/New_York",
                 datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=6), id="aware-new-york"),
    pytest.param("multiclass", ["f1", "roc_auc"], "macro", "ts:1w,1mo@Asia/Kolkata",
                 datetime(2026, 2, 20, tzinfo=UTC), timedelta(days=17), id="aware-kolkata"),
    pytest.param("multilabel", ["f1", "roc_auc"], "macro", "ts:1h,1d@America/New_York",
                 datetime(2026, 11, 1, 2), timedelta(hours=6), id="naive"),
    pytest.param("regression", ["mse", "r2"], None, "ts:1w,1q", date(2026, 3, 20),
                 timedelta(days=20), id="dates"),
]


def statement_case(task: str, first: Moment, span: timedelta, tmp_path: Any,
                   ) -> tuple[pl.DataFrame, str]:
    frame = timed(task, first, span, n_samples=40)
    path = tmp_path / f"{task}.parquet"
    frame.write_parquet(path)
    return frame, str(path)


@pytest.mark.parametrize(("task", "metrics", "average", "window", "first", "span"), STATEMENTS)
def test_statement_on_duckdb_equals_evaluate(task, metrics, average, window, first, span,
                                             tmp_path):
    frame, path = statement_case(task, first, span, tmp_path)
    options = {"task": task, "by": "region", "average": average, "window": window}
    want = me.evaluate(frame, metrics, **options)
    statement = me.sql(metrics, table="preds", schema_from=path, **options)
    same_as_statement(duckdb_rows(frame, "preds", statement), want, ["region"])
    if isinstance(first, datetime) and first.tzinfo is None:  # naive: read so without a file
        statement = me.sql(metrics, table="preds", columns={"weight": "weight"}, **options)
        same_as_statement(duckdb_rows(frame, "preds", statement), want, ["region"])


def psql_windows(postgres: Postgres, statement: str, dated: bool) -> pl.DataFrame:
    rows = psql_rows(postgres, statement)
    kind = pl.Date if dated else pl.Datetime("us")
    return rows.with_columns(pl.col("window_start", "window_end").cast(pl.String).str.strptime(
        kind, "%Y-%m-%d" if dated else "%Y-%m-%d %H:%M:%S"))


@pytest.mark.parametrize(("task", "metrics", "average", "window", "first", "span"),
                         [case for case in STATEMENTS if case.id != "naive"])  # ~2 s a case
def test_statement_on_postgres_equals_evaluate(postgres, pg_connection, task, metrics, average,
                                               window, first, span, tmp_path):
    frame, path = statement_case(task, first, span, tmp_path)
    table = f"windows_{task}"
    load("postgres", pg_connection, table, frame)
    options = {"task": task, "by": "region", "average": average, "window": window}
    want = me.evaluate(frame, metrics, **options)
    dated = isinstance(first, date) and not isinstance(first, datetime)
    statement = me.sql(metrics, dialect="postgres", table=table, schema_from=path, **options)
    same_as_statement(psql_windows(postgres, statement, dated), want, ["region"])
    if task == "binary":  # the connection tells the column's type too
        statement = me.sql(metrics, table=table, connection=pg_connection, **options)
        same_as_statement(psql_windows(postgres, statement, dated), want, ["region"])


def test_curve_statement_equals_curve(postgres, pg_connection, tmp_path):
    frame, path = statement_case("multilabel", datetime(2026, 3, 1, tzinfo=UTC),
                                 timedelta(days=9), tmp_path)
    load("postgres", pg_connection, "windows_curve", frame)
    options = {"by": "region", "task": "multilabel", "window": "ts:1w,1d@Asia/Kolkata"}
    want = naive_windows(me.curve(frame, "roc", **options))
    assert list(dict.fromkeys(want["granularity"])) == ["1w", "1d"]
    for dialect, rows in (("duckdb", lambda s: duckdb_rows(frame, "windows_curve", s)),
                          ("postgres", lambda s: psql_windows(postgres, s, dated=False))):
        got = rows(me.sql(curve="roc", dialect=dialect, table="windows_curve",
                          schema_from=path, **options))
        assert got.columns == want.columns, dialect
        keys = [*WINDOW, "region", "label"]
        assert got.select(keys).equals(want.select(keys)), dialect  # in curve's order
        assert_frames_close(got.drop("threshold"), want.drop("threshold"))
        assert got["threshold"].cast(pl.Float64).equals(want["threshold"]), dialect


def test_statement_on_spark_equals_evaluate(spark, tmp_path):
    frame, path = statement_case("binary", datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=6),
                                 tmp_path)
    load("spark", spark, "windows_binary", frame)
    options = {"task": "binary", "by": "region", "window": "ts:1d,1w@America/New_York"}
    # one family (ranking: the shortest script), both granularities: Spark plans slowly
    want = me.evaluate(frame, ["roc_auc"], **options)
    got = spark_rows(spark, me.sql(["roc_auc"], dialect="spark", table="windows_binary",
                                   schema_from=path, **options))
    zone = spark.conf.get("spark.sql.session.timeZone")
    if got.schema["window_start"] != pl.Datetime("us"):  # a TIMESTAMP: as the session shows it
        got = got.with_columns(pl.col("window_start", "window_end").dt.convert_time_zone(zone)
                               .dt.replace_time_zone(None))
    same_as_statement(got, want, ["region"])


# -- 6. bad input ------------------------------------------------------------------------------

BASE = timed("binary", datetime(2026, 3, 5, tzinfo=UTC), timedelta(days=2), n_samples=12)


@pytest.mark.parametrize(("frame", "window", "by", "message"), [
    pytest.param(BASE, "when:1d", (), r"window column 'when' is not in the input; it has \[",
                 id="missing-column"),
    pytest.param(BASE.with_columns(pl.col("ts").dt.epoch("s")), "ts:1d", (),
                 r"window column 'ts' is Int64, not a date or a timestamp \(an integer epoch: "
                 "cast it to a timestamp first", id="epoch"),
    pytest.param(BASE.with_columns(pl.col("ts").cast(pl.String)), "ts:1d", (),
                 r"window column 'ts' is String, not a date or a timestamp \(text: parse it",
                 id="text"),
    pytest.param(BASE, "ts:1m", (), r"window: unknown granularity '1m'; granularities are "
                 r"\['1h', '1d', '1w', '1mo', '1q', '1y'\]", id="granularity"),
    pytest.param(BASE.with_columns(pl.col("ts").dt.date()), "ts:1d,1h", (),
                 "window: column 'ts' holds dates, which have no hours: 1h needs a timestamp",
                 id="hours-of-dates"),
    pytest.param(BASE, "ts:1d@Mars/Olympus", (), "window: unknown time_zone 'Mars/Olympus'",
                 id="time-zone"),
    pytest.param(BASE.with_columns(window_start=pl.col("region")), "ts:1d", ("window_start",),
                 "segment column 'window_start' is a column a window gives", id="by-clash"),
    pytest.param(BASE, "ts", (), "window must be COLUMN:EVERY", id="malformed"),
    pytest.param(BASE, {"column": "ts", "every": "1d", "zone": "UTC"}, (),
                 "window: unknown key 'zone'; a window has column, every and time_zone",
                 id="unknown-key"),
])
def test_bad_windows_are_one_clear_error(frame, window, by, message):
    with pytest.raises(InputError, match=message):
        me.evaluate(frame, "f1", task="binary", by=list(by), window=window)


def test_bad_window_on_the_command_line(capsys, tmp_path):
    path = tmp_path / "preds.parquet"
    BASE.write_parquet(path)
    code = main(["evaluate", str(path), "--metric", "f1", "--window", "ts:1m"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unknown granularity '1m'" in err, err


def test_window_on_spark_or_a_database_is_refused_before_it_runs(monkeypatch, capsys, tmp_path):
    def ran(*args: object, **kwargs: object) -> None:
        raise AssertionError("the request reached an engine")

    monkeypatch.setattr("mleval_sql.api.execute", ran)
    monkeypatch.setattr("mleval_sql.engines.make_engine", ran)
    for engine in ("spark", "sql"):
        with pytest.raises(InputError, match=rf"^window=.* on the engines that read files and "
                           rf"frames \({', '.join(local_engines())}\), not on engine '{engine}'; .*"
                           "`mleval sql --window` writes the statement"):
            me.evaluate(BASE, "f1", task="binary", window="ts:1d", engine=engine)
    path = tmp_path / "preds.parquet"
    BASE.write_parquet(path)
    code = main(["evaluate", str(path), "--metric", "f1", "--window", "ts:1d", "--engine",
                 "spark"])
    err = capsys.readouterr().err
    assert code == 2 and "not on engine 'spark'" in err, err
