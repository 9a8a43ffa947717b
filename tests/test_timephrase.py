"""Time phrases → windows: a table checked in two timezones, DST edges, and properties that always hold."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.errors import UsageError
from memstore.retrieve.timephrase import TimeQuery, Window, parse_since, parse_time_query

UTC = dt.timezone.utc
NEW_YORK = ZoneInfo("America/New_York")  # DST began Sunday 2026-03-08: that day is 23 hours
TOKYO = ZoneInfo("Asia/Tokyo")  # no DST
ZONES = [NEW_YORK, TOKYO]
# Tuesday 2026-03-10 15:00 on each zone's wall clock, so one table of wall times serves both.
NOW_LOCAL = dt.datetime(2026, 3, 10, 15, 0)

# (question, local start, local end, granularity, keywords)
# Calendar: Mon 2 Mar, Tue 3, Sat 7, Sun 8 (US DST starts), Mon 9, Tue 10 (today).
TABLE = [
    # English: days and parts of days
    (
        "what did we say yesterday evening about the budget",
        "2026-03-09 17:00",
        "2026-03-09 22:00",
        "part_of_day",
        "what did we say about the budget",
    ),
    ("today", "2026-03-10 00:00", "2026-03-11 00:00", "day", ""),
    ("notes from yesterday", "2026-03-09 00:00", "2026-03-10 00:00", "day", "notes"),
    ("yesterday's standup notes", "2026-03-09 00:00", "2026-03-10 00:00", "day", "standup notes"),
    (
        "what did we ship the day before yesterday",
        "2026-03-08 00:00",
        "2026-03-09 00:00",
        "day",
        "what did we ship",
    ),
    (
        "what happened last night",
        "2026-03-09 18:00",
        "2026-03-10 06:00",
        "part_of_day",
        "what happened",
    ),
    ("plans for tonight", "2026-03-10 18:00", "2026-03-11 06:00", "part_of_day", "plans"),
    ("this morning's deploy", "2026-03-10 05:00", "2026-03-10 12:00", "part_of_day", "deploy"),
    ("this afternoon", "2026-03-10 12:00", "2026-03-10 18:00", "part_of_day", ""),
    ("this evening", "2026-03-10 17:00", "2026-03-10 22:00", "part_of_day", ""),
    (
        "Yesterday morning, the outage",
        "2026-03-09 05:00",
        "2026-03-09 12:00",
        "part_of_day",
        "the outage",
    ),
    ("yesterday afternoon deploy", "2026-03-09 12:00", "2026-03-09 18:00", "part_of_day", "deploy"),
    ("earlier today", "2026-03-10 00:00", "2026-03-10 15:00", "range", ""),
    ("in the morning", "2026-03-10 05:00", "2026-03-10 12:00", "part_of_day", ""),
    # English: weekdays (strictly before today, today being a Tuesday)
    ("last Tuesday", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    (
        "what did Sam say last Tuesday night",
        "2026-03-03 18:00",
        "2026-03-04 06:00",
        "part_of_day",
        "what did Sam say",
    ),
    ("the call on Tuesday", "2026-03-03 00:00", "2026-03-04 00:00", "day", "the call"),
    ("on Monday", "2026-03-09 00:00", "2026-03-10 00:00", "day", ""),
    ("Friday's retro", "2026-03-06 00:00", "2026-03-07 00:00", "day", "retro"),
    ("this past Sunday", "2026-03-08 00:00", "2026-03-09 00:00", "day", ""),
    ("Tuesday last week", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("last week's Thursday", "2026-03-05 00:00", "2026-03-06 00:00", "day", ""),
    ("this Wednesday", "2026-03-11 00:00", "2026-03-12 00:00", "day", ""),
    # English: weeks, months, years
    ("last week", "2026-03-02 00:00", "2026-03-09 00:00", "week", ""),
    ("this week", "2026-03-09 00:00", "2026-03-16 00:00", "week", ""),
    ("the week before last", "2026-02-23 00:00", "2026-03-02 00:00", "week", ""),
    ("last month", "2026-02-01 00:00", "2026-03-01 00:00", "month", ""),
    ("this month", "2026-03-01 00:00", "2026-04-01 00:00", "month", ""),
    ("last year", "2025-01-01 00:00", "2026-01-01 00:00", "year", ""),
    ("this year's goals", "2026-01-01 00:00", "2027-01-01 00:00", "year", "goals"),
    (
        "what did we decide in March",
        "2026-03-01 00:00",
        "2026-04-01 00:00",
        "month",
        "what did we decide",
    ),
    ("in April", "2025-04-01 00:00", "2025-05-01 00:00", "month", ""),
    ("during December", "2025-12-01 00:00", "2026-01-01 00:00", "month", ""),
    ("in may", "2025-05-01 00:00", "2025-06-01 00:00", "month", ""),
    ("in 2025", "2025-01-01 00:00", "2026-01-01 00:00", "year", ""),
    ("June 2024", "2024-06-01 00:00", "2024-07-01 00:00", "month", ""),
    # English: dates
    ("on March 3", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("March 3rd", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("3 March", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("the 3rd of March", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("March 11", "2025-03-11 00:00", "2025-03-12 00:00", "day", ""),
    ("Mar 3, 2025", "2025-03-03 00:00", "2025-03-04 00:00", "day", ""),
    ("2026-03-03", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("the 2026-02 invoices", "2026-02-01 00:00", "2026-03-01 00:00", "month", "the invoices"),
    # English: "ago", rolling and ranges
    ("2 days ago", "2026-03-08 00:00", "2026-03-09 00:00", "day", ""),
    ("a couple of days ago", "2026-03-08 00:00", "2026-03-09 00:00", "day", ""),
    ("3 weeks ago", "2026-02-16 00:00", "2026-02-23 00:00", "week", ""),
    ("a month ago", "2026-02-01 00:00", "2026-03-01 00:00", "month", ""),
    ("five years ago", "2021-01-01 00:00", "2022-01-01 00:00", "year", ""),
    ("2 hours ago", "2026-03-10 12:00", "2026-03-10 14:00", "hour", ""),
    ("10 minutes ago", "2026-03-10 14:45", "2026-03-10 14:55", "range", ""),
    ("in the past 3 days", "2026-03-07 15:00", "2026-03-10 15:00", "range", ""),
    ("since Monday", "2026-03-09 00:00", "2026-03-10 15:00", "range", ""),
    ("between March 2 and March 4", "2026-03-02 00:00", "2026-03-05 00:00", "range", ""),
    ("last weekend", "2026-03-07 00:00", "2026-03-09 00:00", "range", ""),
    ("over this past weekend", "2026-03-07 00:00", "2026-03-09 00:00", "range", ""),
    # English: clock times
    ("around 9pm yesterday", "2026-03-09 20:00", "2026-03-09 23:00", "hour", ""),
    ("yesterday at 9:30pm", "2026-03-09 21:00", "2026-03-09 22:00", "hour", ""),
    ("at 21:00", "2026-03-09 21:00", "2026-03-09 22:00", "hour", ""),
    ("around 9am", "2026-03-10 08:00", "2026-03-10 11:00", "hour", ""),
    ("at noon yesterday", "2026-03-09 12:00", "2026-03-09 13:00", "hour", ""),
    ("last night around 2am", "2026-03-10 01:00", "2026-03-10 04:00", "hour", ""),
    # Japanese
    ("今日", "2026-03-10 00:00", "2026-03-11 00:00", "day", ""),
    ("昨日の予算の話", "2026-03-09 00:00", "2026-03-10 00:00", "day", "予算の話"),
    ("一昨日", "2026-03-08 00:00", "2026-03-09 00:00", "day", ""),
    ("おととい話したこと", "2026-03-08 00:00", "2026-03-09 00:00", "day", "話したこと"),
    ("昨夜", "2026-03-09 18:00", "2026-03-10 06:00", "part_of_day", ""),
    ("昨晩の件", "2026-03-09 18:00", "2026-03-10 06:00", "part_of_day", "件"),
    ("今朝", "2026-03-10 05:00", "2026-03-10 12:00", "part_of_day", ""),
    ("今夜", "2026-03-10 18:00", "2026-03-11 06:00", "part_of_day", ""),
    ("先週", "2026-03-02 00:00", "2026-03-09 00:00", "week", ""),
    ("今週", "2026-03-09 00:00", "2026-03-16 00:00", "week", ""),
    ("先週の火曜日", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("先週の火曜日の夜の会議", "2026-03-03 18:00", "2026-03-04 06:00", "part_of_day", "会議"),
    ("火曜日に決めたこと", "2026-03-03 00:00", "2026-03-04 00:00", "day", "決めたこと"),
    ("3日前", "2026-03-07 00:00", "2026-03-08 00:00", "day", ""),
    ("三日前", "2026-03-07 00:00", "2026-03-08 00:00", "day", ""),
    ("2週間前", "2026-02-23 00:00", "2026-03-02 00:00", "week", ""),
    ("先月", "2026-02-01 00:00", "2026-03-01 00:00", "month", ""),
    ("今月", "2026-03-01 00:00", "2026-04-01 00:00", "month", ""),
    ("去年", "2025-01-01 00:00", "2026-01-01 00:00", "year", ""),
    ("昨年の決算", "2025-01-01 00:00", "2026-01-01 00:00", "year", "決算"),
    ("今年", "2026-01-01 00:00", "2027-01-01 00:00", "year", ""),
    ("3月3日", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("12月に", "2025-12-01 00:00", "2026-01-01 00:00", "month", ""),
    ("2026年3月3日", "2026-03-03 00:00", "2026-03-04 00:00", "day", ""),
    ("21時ごろ", "2026-03-09 20:00", "2026-03-09 23:00", "hour", ""),
    ("3時頃", "2026-03-10 02:00", "2026-03-10 05:00", "hour", ""),
    ("昨日の夜", "2026-03-09 18:00", "2026-03-10 06:00", "part_of_day", ""),
    ("昨日の朝", "2026-03-09 05:00", "2026-03-09 12:00", "part_of_day", ""),
    ("昨日の夕方", "2026-03-09 16:00", "2026-03-09 19:00", "part_of_day", ""),
    ("昨日の夜9時", "2026-03-09 21:00", "2026-03-09 22:00", "hour", ""),
    ("午後3時", "2026-03-10 15:00", "2026-03-10 16:00", "hour", ""),
    ("昨日の午後3時の会議", "2026-03-09 15:00", "2026-03-09 16:00", "hour", "会議"),
    ("昨日の朝食", "2026-03-09 00:00", "2026-03-10 00:00", "day", "朝食"),
    ("先週末", "2026-03-07 00:00", "2026-03-09 00:00", "range", ""),
    ("過去3日間", "2026-03-07 15:00", "2026-03-10 15:00", "range", ""),
    ("3月2日から3月4日まで", "2026-03-02 00:00", "2026-03-05 00:00", "range", ""),
    # Other languages, through dateparser
    ("gestern", "2026-03-09 00:00", "2026-03-10 00:00", "day", ""),
    (
        "was haben wir gestern besprochen",
        "2026-03-09 00:00",
        "2026-03-10 00:00",
        "day",
        "was haben wir besprochen",
    ),
    ("vor 3 Tagen", "2026-03-07 00:00", "2026-03-08 00:00", "day", ""),
    (
        "qu'est-ce qu'on a dit hier",
        "2026-03-09 00:00",
        "2026-03-10 00:00",
        "day",
        "qu'est-ce qu'on a dit",
    ),
    ("ayer", "2026-03-09 00:00", "2026-03-10 00:00", "day", ""),
    ("la semana pasada", "2026-03-02 00:00", "2026-03-09 00:00", "week", ""),
    ("昨天", "2026-03-09 00:00", "2026-03-10 00:00", "day", ""),
]


def _now(tz):
    return NOW_LOCAL.replace(tzinfo=tz)


def _utc(local: str, tz) -> dt.datetime:
    return dt.datetime.strptime(local, "%Y-%m-%d %H:%M").replace(tzinfo=tz).astimezone(UTC)


@pytest.mark.parametrize("tz", ZONES, ids=lambda z: z.key)
@pytest.mark.parametrize(
    "question,start,end,granularity,keywords", TABLE, ids=[row[0] for row in TABLE]
)
def test_table(question, start, end, granularity, keywords, tz):
    q = parse_time_query(question, _now(tz), tz)
    assert q.window is not None, question
    assert (q.window.start, q.window.end) == (_utc(start, tz), _utc(end, tz))
    assert q.window.granularity == granularity
    assert q.keywords == keywords
    assert q.occurrence is None


def test_table_is_big_enough():
    assert len(TABLE) >= 60
    assert sum(any("\u3040" <= ch <= "\u9fff" for ch in row[0]) for row in TABLE) >= 20


OCCURRENCES = [
    ("when did we discuss pricing for the first time", "first", "when did we discuss pricing"),
    ("the last time we talked about hiring", "last", "we talked about hiring"),
    ("what did we think back then", "then", "what did we think"),
    ("最初に話したのはいつ", "first", "話したのはいつ"),
    ("前回の打ち合わせ", "last", "打ち合わせ"),
    ("あの時の話", "then", "話"),
]


@pytest.mark.parametrize("question,occurrence,keywords", OCCURRENCES)
def test_occurrence_is_not_a_date(question, occurrence, keywords):
    q = parse_time_query(question, _now(TOKYO), TOKYO)
    assert q == TimeQuery(None, keywords, occurrence)


def test_occurrence_and_window_together():
    q = parse_time_query("the last time we met in March", _now(TOKYO), TOKYO)
    assert q.occurrence == "last" and q.window.granularity == "month" and q.keywords == "we met"


NOT_TIMES = [
    "I may go to the march",
    "march forward and we may win",
    "good morning team",
    "the overnight build",
    "what is planned for tomorrow",
    "next week's agenda",
    "every Monday standup",
    "ratio 3:20",
    "we sat in the sun on wed",
    "in 3 days we ship",
    "明日の予定",
    "来週の会議",
    "3時間かかった",
    "夕食のメニュー",
    "ich bin hier",
    "the 2 may agree",
]


@pytest.mark.parametrize("question", NOT_TIMES)
def test_not_a_time(question):
    assert parse_time_query(question, _now(NEW_YORK), NEW_YORK) == TimeQuery(None, question, None)


@pytest.mark.parametrize(
    "question,keywords",
    [
        ("what happened yesterday?", "what happened?"),
        ("yesterday?", ""),
        ("昨日は？", ""),
        ("Yesterday, what did Kim say", "what did Kim say"),
        ("what did we do on the weekend", "what did we do"),
        ("what happened the last week", "what happened"),
        ("on yesterday's call", "on call"),
    ],
)
def test_keyword_glue(question, keywords):
    assert parse_time_query(question, _now(TOKYO), TOKYO).keywords == keywords


def test_phrase_is_as_written():
    q = parse_time_query("What did we say Yesterday Evening about X", _now(TOKYO), TOKYO)
    assert q.window.phrase == "Yesterday Evening"
    assert q.keywords == "What did we say about X"


# --------------------------------------------------------------------------- DST


def test_day_across_spring_forward_is_23_hours():
    w = parse_time_query("the day before yesterday", _now(NEW_YORK), NEW_YORK).window
    assert w.end - w.start == dt.timedelta(hours=23)
    week = parse_time_query("last week", _now(NEW_YORK), NEW_YORK).window
    assert week.end - week.start == dt.timedelta(hours=7 * 24 - 1)
    tokyo = parse_time_query("last week", _now(TOKYO), TOKYO).window
    assert tokyo.end - tokyo.start == dt.timedelta(hours=7 * 24)


def test_day_across_fall_back_is_25_hours():
    now = dt.datetime(2026, 11, 3, 12, 0, tzinfo=NEW_YORK)  # DST ended Sunday 1 November
    w = parse_time_query("the day before yesterday", now, NEW_YORK).window
    assert w.start == dt.datetime(2026, 11, 1, 4, 0, tzinfo=UTC)
    assert w.end - w.start == dt.timedelta(hours=25)


def test_hour_in_dst_gap_is_not_empty():
    now = dt.datetime(2026, 3, 9, 12, 0, tzinfo=NEW_YORK)  # 02:00-03:00 on 8 March never happened
    w = parse_time_query("yesterday at 2:30am", now, NEW_YORK).window
    assert w.end - w.start == dt.timedelta(hours=1)
    assert w.start == dt.datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # the instant after the jump


def test_same_phrase_differs_by_zone():
    now = dt.datetime(
        2026, 3, 10, 1, 0, tzinfo=UTC
    )  # 21:00 on the 9th in New York, 10:00 on the 10th in Tokyo
    ny = parse_time_query("yesterday", now, NEW_YORK).window
    tokyo = parse_time_query("yesterday", now, TOKYO).window
    assert ny.start == _utc("2026-03-08 00:00", NEW_YORK)
    assert tokyo.start == _utc("2026-03-09 00:00", TOKYO)


# --------------------------------------------------------------------------- nights


def test_last_night_at_two_am_is_the_night_ending():
    now = dt.datetime(2026, 3, 10, 2, 0, tzinfo=TOKYO)
    for phrase in ("last night", "tonight", "昨夜", "今夜"):
        w = parse_time_query(phrase, now, TOKYO).window
        assert (w.start, w.end) == (
            _utc("2026-03-09 18:00", TOKYO),
            _utc("2026-03-10 06:00", TOKYO),
        ), phrase
        assert now in w


def test_bare_clock_time_is_the_latest_that_passed():
    morning = dt.datetime(2026, 3, 10, 8, 0, tzinfo=TOKYO)
    w = parse_time_query("around 9pm", morning, TOKYO).window
    assert w.start == _utc("2026-03-09 20:00", TOKYO)
    w = parse_time_query("at midnight", morning, TOKYO).window
    assert w.start == _utc("2026-03-10 00:00", TOKYO)


def test_earlier_today_at_midnight_is_the_day():
    midnight = dt.datetime(2026, 3, 10, 0, 0, tzinfo=TOKYO)
    w = parse_time_query("earlier today", midnight, TOKYO).window
    assert (w.start, w.end, w.granularity) == (
        _utc("2026-03-10 00:00", TOKYO),
        _utc("2026-03-11 00:00", TOKYO),
        "day",
    )


def test_naive_now_is_local():
    assert parse_time_query("today", NOW_LOCAL, TOKYO) == parse_time_query(
        "today", _now(TOKYO), TOKYO
    )


# --------------------------------------------------------------------------- parse_since


@pytest.mark.parametrize(
    "value,local",
    [
        ("2026-03-01", "2026-03-01 00:00"),
        ("2026-03-01T09:30", "2026-03-01 09:30"),
        ("yesterday", "2026-03-09 00:00"),
        ("3 days ago", "2026-03-07 00:00"),
        ("last week", "2026-03-02 00:00"),
        ("2026-02", "2026-02-01 00:00"),
        ("3d", "2026-03-07 15:00"),
        ("12h", "2026-03-10 03:00"),
        ("先週", "2026-03-02 00:00"),
    ],
)
def test_parse_since(value, local):
    assert parse_since(value, _now(TOKYO), TOKYO) == _utc(local, TOKYO)


def test_parse_since_accepts_utc_suffix():
    assert parse_since("2026-03-01T00:00:00Z", _now(TOKYO), TOKYO) == dt.datetime(
        2026, 3, 1, tzinfo=UTC
    )


@pytest.mark.parametrize("value", ["budget", "yesterday budget", "", "the first time"])
def test_parse_since_rejects(value):
    with pytest.raises(UsageError) as info:
        parse_since(value, _now(TOKYO), TOKYO)
    assert "2026-03-01" in str(info.value)  # the hint says what would work


def test_dateparser_is_not_imported_for_plain_questions():
    import subprocess
    import sys

    code = (
        "import sys, datetime as dt, zoneinfo\n"
        "from memstore.retrieve.timephrase import parse_time_query\n"
        "tz = zoneinfo.ZoneInfo('Asia/Tokyo')\n"
        "parse_time_query('what did we decide yesterday about the budget', dt.datetime(2026, 3, 10, tzinfo=tz), tz)\n"
        "print('dateparser' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


# --------------------------------------------------------------------------- properties

PAST_PHRASES = [
    "yesterday", "the day before yesterday", "last night", "last Tuesday", "on Friday", "Sunday",
    "last week", "last month", "last year", "in March", "in December", "March 3", "3 March",
    "3 weeks ago", "a month ago", "2 days ago", "10 days ago", "2 hours ago", "earlier today",
    "last weekend", "this past weekend", "the weekend", "around 9pm", "at 07:15", "in the evening",
    "yesterday evening", "last Tuesday night", "the past 2 weeks", "since Monday", "earlier this month",
    "昨日", "一昨日", "昨夜", "先週", "先週の金曜日", "3日前", "2週間前", "先月", "去年", "3月3日",
    "12月", "21時ごろ", "昨日の夜", "先週末", "過去3日間", "this week", "this month", "this year",
    "今週", "今月", "今年", "today", "今日", "earlier this week",
]  # fmt: skip
OTHER_PHRASES = [
    "tonight",
    "this morning",
    "this evening",
    "今夜",
    "今朝",
    "this Friday",
    "午後3時",
    "2025-06-01",
]
OCCURRENCE_PHRASES = ["the first time", "last time", "back then", "最初に", "前回", "あの時"]
FILLER = [
    "what", "did", "we", "say", "about", "the", "budget", "may", "march", "second", "time", "night",
    "morning", "good", "on", "in", "at", "of", "last", "first", "next", "sun", "wed", "3", "21", "2026",
    "予算", "の", "に", "会議", "は", "夜", "朝食", "時間", "tomorrow", "week", "Tuesday", "gestern", "hier",
]  # fmt: skip
PROPERTY_ZONES = [
    ZoneInfo(name)
    for name in (
        "America/New_York",
        "Asia/Tokyo",
        "Europe/London",
        "Australia/Lord_Howe",
        "America/Santiago",
        "Asia/Kathmandu",
    )
] + [UTC]

nows = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2040, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC)
)
zones = st.sampled_from(PROPERTY_ZONES)
words = st.sampled_from(FILLER + PAST_PHRASES + OTHER_PHRASES + OCCURRENCE_PHRASES)
questions = st.lists(words, max_size=6).flatmap(
    lambda parts: st.sampled_from([" ".join(parts), "".join(parts)])
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_window(w: Window):
    assert w.start < w.end
    assert w.start.utcoffset() == dt.timedelta(0) and w.end.utcoffset() == dt.timedelta(0)
    assert w.granularity in ("hour", "part_of_day", "day", "week", "month", "year", "range")
    assert w.phrase


@PROPERTY
@given(questions, nows, zones)
def test_windows_are_well_formed_and_keywords_hold_no_time_words(question, now, tz):
    q = parse_time_query(question, now, tz)
    if q.window:
        _check_window(q.window)
    again = parse_time_query(q.keywords, now, tz)
    assert again == TimeQuery(None, q.keywords, None)  # nothing left to recognise, and stable
    assert parse_time_query(question, now, tz) == q  # deterministic
    assert _is_subsequence(q.keywords.replace(" ", ""), question)  # only cuts, never new words


def _is_subsequence(small: str, big: str) -> bool:
    chars = iter(big)
    return all(ch in chars for ch in small)


@PROPERTY
@given(st.sampled_from(PAST_PHRASES), nows, zones)
def test_past_phrases_never_start_after_now(phrase, now, tz):
    q = parse_time_query(phrase, now, tz)
    assert q.window is not None, phrase
    assert q.window.start <= now
    assert q.keywords == ""
    _check_window(q.window)


@PROPERTY
@given(
    st.sampled_from(
        ["today", "yesterday", "2 days ago", "last Tuesday", "March 3", "昨日", "一昨日", "3日前"]
    ),
    nows,
    zones,
)
def test_a_day_is_one_local_date(phrase, now, tz):
    w = parse_time_query(phrase, now, tz).window
    first, last = w.start.astimezone(tz), (w.end - dt.timedelta(microseconds=1)).astimezone(tz)
    before = (w.start - dt.timedelta(microseconds=1)).astimezone(tz)
    assert first.date() == last.date() != before.date()
    assert w.end.astimezone(tz).date() == first.date() + dt.timedelta(days=1)


@PROPERTY
@given(
    st.sampled_from(["last week", "this week", "3 weeks ago", "先週", "今週", "2週間前"]),
    nows,
    zones,
)
def test_a_week_runs_monday_to_monday(phrase, now, tz):
    w = parse_time_query(phrase, now, tz).window
    start, end = w.start.astimezone(tz).date(), w.end.astimezone(tz).date()
    assert start.weekday() == 0 and end - start == dt.timedelta(days=7)


@PROPERTY
@given(st.sampled_from(PAST_PHRASES + OTHER_PHRASES), nows, zones)
def test_window_does_not_depend_on_surrounding_words(phrase, now, tz):
    alone = parse_time_query(phrase, now, tz).window
    spaced = parse_time_query(f"notes {phrase} budget", now, tz).window
    assert (alone.start, alone.end, alone.granularity) == (
        spaced.start,
        spaced.end,
        spaced.granularity,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(
        min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    st.sampled_from([UTC, NEW_YORK, TOKYO, ZoneInfo("Asia/Kolkata"), ZoneInfo("Europe/Amsterdam")]),
)
def test_a_record_s_day_is_strftime_s_day_in_the_store_s_zone(when, zone):
    """timeutil.local_day (the day log a record goes to) takes the date's isoformat where that is
    strftime's "%Y-%m-%d" (a four-digit year) and strftime's text below year 1000, whatever the
    zone (whole hours, half hours, and Amsterdam's 1930s offset with seconds)."""
    from memstore.format.timeutil import local_day

    assert local_day(when, zone) == when.astimezone(zone).strftime("%Y-%m-%d")
