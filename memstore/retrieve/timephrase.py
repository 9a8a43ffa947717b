"""Time phrases in a question ("yesterday evening", "先週の火曜日", "3 weeks ago") become one window in the store's timezone.

`parse_time_query` splits a question into a `Window` (or none), the keywords that are left, and an
`occurrence` ("first" / "last" / "then") for phrases that pick an occurrence rather than a date.
Pure functions: no store, no clock (the caller passes `now`), no I/O. Windows are built from wall-clock
boundaries in `tz`, so a local day across a DST change is 23 or 25 hours long.

Ambiguity rules (each is pinned by tests/test_timephrase.py):

- Weeks start on Monday. "last week"/先週 is the previous calendar week; "N weeks ago"/N週間前 is the
  calendar week containing the day N*7 days ago; "a month ago"/Nヶ月前 is that calendar month;
  "N years ago"/N年前 that calendar year; "N days ago"/N日前 that day.
- A weekday without "this" ("Tuesday", "on Tuesday", "last Tuesday", 火曜日) is the most recent such day
  strictly before today: on a Tuesday, "on Tuesday" means a week ago (today would be "today").
  "this Tuesday" and 今週の火曜日 are the Tuesday of the current week, even if it is still ahead.
- A month or a date without a year ("in March", "March 3", 3月, 3月3日) is the most recent one that
  has started: on 10 March "March 11" is last year's, "in March" is this year's.
- Parts of the day, on the day they are attached to: morning/朝/午前 05-12, noon/lunch/昼 11-14,
  afternoon/午後 12-18, evening 17-22, 夕方 16-19, night/夜/晩 18-06 next day, 深夜/夜中 and
  "late at night" 22-05 next day. "last night"/昨夜 is yesterday 18:00 to today 06:00, which at 02:00
  is the night that is ending. "tonight"/今夜 is today 18:00 to tomorrow 06:00, except before 06:00,
  when it means the night in progress (the same window as "last night").
- Clock times give the clock hour that contains them ("at 21:30" is 21:00-22:00); with "around",
  "about", "~", "-ish", 頃, ごろ the hour is widened by one hour each side (20:00-23:00). The window
  is measured in real hours from the wall-clock hour, so it is never empty in a DST gap. "midnight"
  on a day is the midnight that ends it. A clock time with no day is the most recent one that has
  passed (today or yesterday). Japanese N時 without 午前/午後/朝/夜 is read as a 24-hour clock
  (3時 is 03:00) unless a part of the day is given (昨日の夜9時 is 21:00); likewise English H:MM
  without am/pm ("at 3:20" is 03:20). A lone single-digit H:MM ("3:20" with no "at"/"around") is
  not read as a time.
- "the past N days", "the last N weeks", "the past week", 過去N日間 are rolling: from now minus N
  units (wall clock) to now. "last week" and "the last week" (no number) are the calendar week.
  "earlier today" is midnight to now (the whole day at exactly midnight).
- Weekends run Saturday 00:00 to Monday 00:00. "last weekend", "this past weekend", 先週末 are the
  weekend of the previous calendar week; "this weekend", 今週末 that of this week; "the weekend",
  週末 the most recent one that has started.
- "between A and B", "from A to B", "AからBまで" give A's start to B's end; "since A", Aから, A以降
  give A's start to now ("after A" gives A's end to now).
- With several unrelated time phrases the leftmost wins; every one of them is still removed from the
  keywords. A time of day refines only a day; with a week, month or year it is dropped.
- Future phrases (tomorrow, next week, in 3 days, 明日, 来週) and recurring ones (every Monday, 毎週)
  make no window and stay in the keywords: in a memory store they name the topic ("what is planned
  for tomorrow"), not when it was said. "before"/"until" are not interpreted and stay as keywords.
- A bare month name is never a date ("I may go", "march on"); lowercase "may"/"march" next to a
  number count only after a preposition ("on may 3"). Weekday names are matched in full only.
- Other languages go through dateparser, only for short phrases that a cheap per-language pattern
  recognises (gestern, hier, ayer, la semana pasada, ...), only when the English/Japanese rules found
  nothing; its result takes the natural period dateparser reports (day, week, month or year).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass
from typing import Callable

UTC = dt.timezone.utc
_DAY = dt.timedelta(days=1)
_HOUR = dt.timedelta(hours=1)


@dataclass(frozen=True)
class Window:
    """A half-open span of time [start, end) found in a question."""

    start: dt.datetime  # aware, UTC
    end: dt.datetime  # aware, UTC, exclusive
    granularity: str  # "hour" | "part_of_day" | "day" | "week" | "month" | "year" | "range"
    phrase: str  # the words that produced it, as written

    def __contains__(self, moment: dt.datetime) -> bool:
        return self.start <= moment < self.end


@dataclass(frozen=True)
class TimeQuery:
    """A question split into when (a window, or which occurrence) and what (the keywords)."""

    window: Window | None
    keywords: str
    occurrence: str | None  # "first" | "last" | "then"


@dataclass(frozen=True)
class _Ctx:
    now: dt.datetime  # aware, UTC
    tz: dt.tzinfo
    local: dt.datetime  # `now` on the store's wall clock, naive

    @property
    def today(self) -> dt.date:
        return self.local.date()


@dataclass
class _Piece:
    """One recognised phrase: where it is, and what it means before the pieces are combined."""

    start: int
    end: int
    kind: str  # "day" | "span" | "tod" | "occ" | "shield"
    day: dt.date | None = None
    part: tuple[int, int] | None = None  # wall-clock hours from the day's midnight; may pass 24
    clock: tuple[int, bool, bool] | None = None  # (hour, around, 12-hour ambiguous)
    window: Window | None = None  # spans are resolved when found
    occ: str | None = None
    cut: tuple[int, int] | None = None  # the span plus its glue words, removed from the keywords
    possessive: bool = False


# --------------------------------------------------------------------------- windows on the wall clock


def _wall(day: dt.date, hours: int, tz: dt.tzinfo) -> dt.datetime:
    """The UTC instant at which the clock in `tz` shows `day` + `hours`.

    A wall time skipped by DST resolves to the instant after the jump (fold=0 uses the offset before
    the change), so a day always starts at its first real instant.
    """
    local = dt.datetime.combine(day, dt.time()) + dt.timedelta(hours=hours)
    return local.replace(tzinfo=tz).astimezone(UTC)


def _instant(local: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    return local.replace(tzinfo=tz).astimezone(UTC)


def _days(c: _Ctx, first: dt.date, stop: dt.date, granularity: str, phrase: str) -> Window:
    return Window(_wall(first, 0, c.tz), _wall(stop, 0, c.tz), granularity, phrase)


def _day_window(c: _Ctx, day: dt.date, phrase: str) -> Window:
    return _days(c, day, day + _DAY, "day", phrase)


def _week_window(c: _Ctx, day: dt.date, phrase: str) -> Window:
    monday = day - dt.timedelta(days=day.weekday())
    return _days(c, monday, monday + 7 * _DAY, "week", phrase)


def _month_start(year: int, month: int, shift: int = 0) -> dt.date:
    index = year * 12 + (month - 1) + shift
    return dt.date(index // 12, index % 12 + 1, 1)


def _month_window(c: _Ctx, year: int, month: int, phrase: str) -> Window:
    return _days(c, _month_start(year, month), _month_start(year, month, 1), "month", phrase)


def _year_window(c: _Ctx, year: int, phrase: str) -> Window:
    return _days(c, dt.date(year, 1, 1), dt.date(year + 1, 1, 1), "year", phrase)


def _part_window(c: _Ctx, day: dt.date, part: tuple[int, int], phrase: str) -> Window:
    return Window(_wall(day, part[0], c.tz), _wall(day, part[1], c.tz), "part_of_day", phrase)


def _hour_window(c: _Ctx, day: dt.date, hour: int, around: bool, phrase: str) -> Window:
    # Real hours from the wall-clock anchor: a wall-clock end could fall into a DST gap and
    # make the window empty.
    anchor = _wall(day, hour, c.tz)
    if around:
        return Window(anchor - _HOUR, anchor + 2 * _HOUR, "hour", phrase)
    return Window(anchor, anchor + _HOUR, "hour", phrase)


def _weekend_window(c: _Ctx, monday: dt.date, phrase: str) -> Window:
    saturday = monday + 5 * _DAY
    return _days(c, saturday, saturday + 2 * _DAY, "range", phrase)


def _until_now(c: _Ctx, start: dt.datetime, phrase: str) -> Window | None:
    return Window(start, c.now, "range", phrase) if start < c.now else None


def _minus(local: dt.datetime, n: int, unit: str) -> dt.datetime:
    """`local` moved back n units on the wall clock; month ends clamp (31 March - 1 month = 28 Feb)."""
    if unit in ("day", "week"):
        return local - dt.timedelta(days=n * (7 if unit == "week" else 1))
    months = n * (12 if unit == "year" else 1)
    first = _month_start(local.year, local.month, -months)
    last_day = (_month_start(first.year, first.month, 1) - _DAY).day
    return local.replace(year=first.year, month=first.month, day=min(local.day, last_day))


def _latest_started(c: _Ctx, year: int | None, month: int, day: int = 1) -> dt.date | None:
    """The date month/day in `year`, or without a year the most recent one that is not ahead."""
    if year is not None:
        return dt.date(year, month, day)
    for back in range(9):  # 29 February can be up to 8 years back
        try:
            candidate = dt.date(c.today.year - back, month, day)
        except ValueError:
            continue
        if candidate <= c.today:
            return candidate
    return None


# --------------------------------------------------------------------------- vocabulary

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_JA_WEEKDAYS = "月火水木金土日"
_WD_NAMES = "|".join(_WEEKDAYS)
_WD = r"(?P<wd>" + _WD_NAMES + ")"
_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_NAMES = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
)
_MONTH_FULL = r"(?P<mon>" + _MONTH_NAMES + ")"
_MONTH_ANY = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAYNUM = r"(?P<d>[0-9]{1,2})(?:st|nd|rd|th)?(?![0-9:])"
_YEAR = r"(?P<y>[0-9]{4})"
_EN_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
_EN_NUM = r"(?:[0-9]+|an?|" + "|".join(_EN_WORDS) + r"|(?:a\s+)?couple(?:\s+of)?)"
_JA_NUM = r"[0-9０-９]+|[〇一二三四五六七八九十]+"
_JA_DIGITS = "〇一二三四五六七八九"
_EN_PARTS = {
    "morning": (5, 12), "afternoon": (12, 18), "evening": (17, 22), "night": (18, 30),
    "lunch": (11, 14), "lunchtime": (11, 14), "late": (22, 29),
}  # fmt: skip
_JA_PARTS = {
    "早朝": (4, 7), "明け方": (3, 6), "朝": (5, 12), "午前": (5, 12), "午前中": (5, 12),
    "昼": (11, 14), "昼間": (9, 17), "午後": (12, 18), "夕方": (16, 19), "夜": (18, 30),
    "晩": (18, 30), "夜中": (22, 29), "深夜": (22, 29),
}  # fmt: skip
_VERB_MONTHS = ("may", "march")  # month names that are also common English verbs
_PREPOSITION_BEFORE = re.compile(
    r"\b(?:on|in|of|since|from|until|by|during|before|after)\s+$", re.I
)


def _en_num(text: str) -> int:
    word = text.lower()
    if word.isdigit():
        return int(word)
    if "couple" in word:
        return 2
    return 1 if word in ("a", "an") else _EN_WORDS.index(word) + 1


def _ja_num(text: str) -> int:
    if text.isdigit():
        return int(text)  # int() reads full-width digits too
    if "十" not in text:
        return int("".join(str(_JA_DIGITS.index(ch)) for ch in text))
    tens, _, ones = text.partition("十")
    return (_JA_DIGITS.index(tens) if tens else 1) * 10 + (_JA_DIGITS.index(ones) if ones else 0)


def _unit(word: str) -> str:
    word = word.lower().rstrip("s")
    return {"min": "minute", "hr": "hour"}.get(word, word)


_JA_UNITS = {
    "日": "day",
    "週": "week",
    "週間": "week",
    "年": "year",
    "時間": "hour",
    "分": "minute",
}


def _ja_unit(word: str) -> str:
    return _JA_UNITS.get(word, "month")  # ヶ月, か月, カ月, ケ月, 箇月


# --------------------------------------------------------------------------- rules

_RULES: list[tuple[str, int, Callable]] = []


def _rule(pattern: str, flags: int = re.IGNORECASE):
    """Register a pattern and the builder that turns its match into a piece; order is priority."""

    def register(build):
        _RULES.append((pattern, flags, build))
        return build

    return register


@functools.cache
def _compiled_rules() -> list[tuple[re.Pattern, Callable]]:
    # Compiling every rule takes ~150 ms; pay it on the first question, not on import (ct --help).
    return [(re.compile(pattern, flags), build) for pattern, flags, build in _RULES]


def _piece(m: re.Match, kind: str, **fields) -> _Piece:
    return _Piece(m.start(), m.end(), kind, **fields)


def _span(m: re.Match, window: Window | None) -> _Piece | None:
    return _piece(m, "span", window=window) if window else None


def _verb_month(m: re.Match) -> bool:
    """A lowercase "may"/"march" with no preposition before it is a verb, not a month."""
    word = m.group("mon")
    if word not in _VERB_MONTHS:  # exact lowercase only: "May 3" is a date
        return False
    before = m.string[: m.start("mon")]
    return not _PREPOSITION_BEFORE.search(before)


# Future and recurring phrases are claimed first so later rules cannot read "next Tuesday" as
# "Tuesday"; they make no window and stay in the keywords.
@_rule(
    r"\b(?:the\s+day\s+after\s+)?tomorrow\b|\b(?:next|coming|every)\s+(?:day|night|morning|evening|"
    r"week(?:end)?|month|year|" + _WD_NAMES + "|" + _MONTH_NAMES + r")\b|"
    r"\bin\s+" + _EN_NUM + r"\s+(?:minutes?|hours?|days?|weeks?|months?|years?)\b"
)
def _future_en(m, c):
    return _piece(m, "shield")


# Before the shields: 過去3日間 is a window, a bare 3日間 is a duration.
@_rule(r"(?:過去|ここ|この)(?P<n>" + _JA_NUM + r")(?P<u>日|週間|ヶ月|か月|カ月|ケ月|年)間?")
def _rolling_ja(m, c):
    return _span(m, _rolling(c, _ja_num(m.group("n")), _ja_unit(m.group("u")), m.group(0)))


@_rule(
    r"明日|あした|明後日|あさって|再?来(?:週|月|年)|毎(?:日|週|朝|晩|月|年)|(?:"
    + _JA_NUM
    + r")(?:日|週間|ヶ月|か月|カ月|年|時間|分)[後間]|(?:"
    + _JA_NUM
    + r")時間(?!前)"
)
def _future_ja(m, c):
    return _piece(m, "shield")


@_rule(
    r"\b(?:for\s+)?(?:the\s+)?first\s+time\b|\b(?:the\s+)?last\s+time\b|\bback\s+then\b|\bat\s+(?:the|that)\s+time\b|\bthat\s+time\b"
)
def _occurrence_en(m, c):
    text = m.group(0).lower()
    occ = "first" if "first" in text else "last" if "last" in text else "then"
    return _piece(m, "occ", occ=occ)


_JA_OCCURRENCES = {
    "最初に": "first",
    "最初の": "first",
    "初めて": "first",
    "はじめて": "first",
    "前回": "last",
    "最後に": "last",
}


@_rule(r"最初に|最初の|初めて|はじめて|前回|最後に|あの時|あのとき|あの頃|あのころ|当時")
def _occurrence_ja(m, c):
    return _piece(m, "occ", occ=_JA_OCCURRENCES.get(m.group(0), "then"))


@_rule(r"\b(?:the\s+)?day\s+before\s+yesterday\b")
def _day_before_yesterday(m, c):
    return _piece(m, "day", day=c.today - 2 * _DAY)


@_rule(r"\bearlier\s+today\b|\bearlier\s+this\s+(?P<u>week|month|year)\b")
def _earlier(m, c):
    unit = (m.group("u") or "day").lower()
    whole = {
        "day": _day_window(c, c.today, m.group(0)),
        "week": _relative_unit(c, "week", 0, m.group(0)),
        "month": _relative_unit(c, "month", 0, m.group(0)),
        "year": _relative_unit(c, "year", 0, m.group(0)),
    }[unit]
    # At the very start of the unit nothing is "earlier" yet; the whole unit is the honest answer.
    return _span(m, _until_now(c, whole.start, m.group(0)) or whole)


@_rule(r"\blast\s+night\b|昨夜|昨晩|ゆうべ")
def _last_night(m, c):
    return _piece(m, "day", day=c.today - _DAY, part=_EN_PARTS["night"])


@_rule(r"\btonight\b|今夜|今晩")
def _tonight(m, c):
    # Before 06:00 the night in progress began yesterday evening.
    day = c.today - _DAY if c.local.hour < 6 else c.today
    return _piece(m, "day", day=day, part=_EN_PARTS["night"])


@_rule(r"\bthis\s+(?P<p>morning|afternoon|evening)\b|今朝")
def _this_part(m, c):
    return _piece(m, "day", day=c.today, part=_EN_PARTS[(m.group("p") or "morning").lower()])


@_rule(r"\b(?P<w>last|this\s+past|past|this|the)\s+weekend\b|(?P<ja>先週末|今週末|週末)")
def _weekend(m, c):
    which = (m.group("w") or m.group("ja")).lower()
    monday = c.today - dt.timedelta(days=c.today.weekday())
    if which in ("last", "this past", "past", "先週末") or (
        which in ("the", "週末") and c.today.weekday() < 5
    ):
        monday -= 7 * _DAY
    return _span(m, _weekend_window(c, monday, m.group(0)))


@_rule(r"\bthe\s+(?P<u>week|month|year)\s+before\s+last\b")
def _before_last(m, c):
    return _span(m, _relative_unit(c, _unit(m.group("u")), 2, m.group(0)))


@_rule(
    r"\b(?:(?:the|this)\s+)?past\s+(?:(?P<n>"
    + _EN_NUM
    + r")\s+)?(?P<u>hours?|days?|weeks?|months?|years?)\b"
)
def _rolling_past(m, c):
    return _span(m, _rolling(c, _en_num(m.group("n") or "1"), _unit(m.group("u")), m.group(0)))


@_rule(
    r"\bthe\s+last\s+(?P<n>[0-9]+|"
    + "|".join(_EN_WORDS[1:])
    + r")\s+(?P<u>hours|days|weeks|months|years)\b"
)
def _rolling_last(m, c):
    return _span(m, _rolling(c, _en_num(m.group("n")), _unit(m.group("u")), m.group(0)))


def _rolling(c: _Ctx, n: int, unit: str, phrase: str) -> Window | None:
    if n < 1:
        return None
    if unit == "hour":
        return Window(c.now - n * _HOUR, c.now, "range", phrase)
    return _until_now(c, _instant(_minus(c.local, n, unit), c.tz), phrase)


@_rule(r"\b(?:on\s+)?" + _WD + r"\s+(?:of\s+)?(?P<w>last|this)\s+week\b")
def _weekday_of_week_en(m, c):
    return _weekday_in_week(m, c, -1 if m.group("w").lower() == "last" else 0)


@_rule(r"\b(?P<w>last|this)\s+week(?:['’]s)?\s+(?:on\s+)?" + _WD + r"\b")
def _week_then_weekday_en(m, c):
    return _weekday_in_week(m, c, -1 if m.group("w").lower() == "last" else 0)


@_rule(r"(?P<w>先々週|先週|今週)の?(?P<wd>[月火水木金土日])曜日?")
def _weekday_of_week_ja(m, c):
    return _weekday_in_week(m, c, {"先々週": -2, "先週": -1, "今週": 0}[m.group("w")])


def _weekday_in_week(m: re.Match, c: _Ctx, weeks: int) -> _Piece:
    wd = m.group("wd")
    index = _JA_WEEKDAYS.index(wd) if wd in _JA_WEEKDAYS else _WEEKDAYS.index(wd.lower())
    monday = c.today - dt.timedelta(days=c.today.weekday()) + dt.timedelta(weeks=weeks)
    return _piece(m, "day", day=monday + dt.timedelta(days=index))


@_rule(r"(?<![0-9])" + _YEAR + r"[-/](?P<m>[0-9]{1,2})[-/](?P<d>[0-9]{1,2})(?![0-9])")
def _iso_day(m, c):
    return _piece(m, "day", day=dt.date(int(m.group("y")), int(m.group("m")), int(m.group("d"))))


@_rule(r"(?<![0-9])(?P<y>[0-9]{4})-(?P<m>[0-9]{2})(?![0-9-])")
def _iso_month(m, c):
    return _span(m, _month_window(c, int(m.group("y")), _valid_month(m.group("m")), m.group(0)))


def _valid_month(text: str) -> int:
    month = int(text)
    if not 1 <= month <= 12:
        raise ValueError(f"no month {month}")
    return month


@_rule(r"(?P<y>[0-9０-９]{4})年(?P<m>" + _JA_NUM + r")月(?:(?P<d>" + _JA_NUM + r")日)?")
def _ja_year_month(m, c):
    year, month = _ja_num(m.group("y")), _valid_month(str(_ja_num(m.group("m"))))
    if m.group("d"):
        return _piece(m, "day", day=dt.date(year, month, _ja_num(m.group("d"))))
    return _span(m, _month_window(c, year, month, m.group(0)))


@_rule(
    r"(?<![0-9０-９〇一二三四五六七八九十])(?P<m>"
    + _JA_NUM
    + r")月(?:(?P<d>"
    + _JA_NUM
    + r")日(?!間))?(?![曜間])"
)
def _ja_month_day(m, c):
    month = _valid_month(str(_ja_num(m.group("m"))))
    if m.group("d"):
        return _piece(m, "day", day=_latest_started(c, None, month, _ja_num(m.group("d"))))
    start = _latest_started(c, None, month)
    return _span(m, _month_window(c, start.year, month, m.group(0)))


@_rule(r"(?P<y>[0-9０-９]{4})年(?!度)")
def _ja_year(m, c):
    return _span(m, _year_window(c, _ja_num(m.group("y")), m.group(0)))


@_rule(r"\b" + _MONTH_ANY + r"\s+" + _DAYNUM + r"(?:,?\s+" + _YEAR + r"(?![0-9]))?")
def _month_day(m, c):
    return _calendar_day(m, c)


@_rule(
    r"\b(?:the\s+)?"
    + _DAYNUM
    + r"\s+(?:of\s+)?"
    + _MONTH_ANY
    + r"(?:,?\s+"
    + _YEAR
    + r"(?![0-9]))?\b"
)
def _day_month(m, c):
    return _calendar_day(m, c)


def _calendar_day(m: re.Match, c: _Ctx) -> _Piece | None:
    if _verb_month(m):
        return None
    year = int(m.group("y")) if m.group("y") else None
    day = _latest_started(c, year, _MONTHS[m.group("mon").lower()], int(m.group("d")))
    return _piece(m, "day", day=day) if day else None


@_rule(
    r"\b(?:(?P<prep>in|during)\s+(?:the\s+month\s+of\s+)?)?"
    + _MONTH_FULL
    + r"(?:,?\s+"
    + _YEAR
    + r"(?![0-9]))?\b"
)
def _month_name(m, c):
    # A bare month name is never a date; it needs "in"/"during" or a year.
    if not (m.group("prep") or m.group("y")) or (not m.group("prep") and _verb_month(m)):
        return None
    month = _MONTHS[m.group("mon").lower()]
    year = int(m.group("y")) if m.group("y") else _latest_started(c, None, month).year
    return _span(m, _month_window(c, year, month, m.group(0)))


@_rule(r"\b(?:in|during)\s+(?P<y>(?:19|20)[0-9]{2})\b(?![-/])")
def _in_year(m, c):
    return _span(m, _year_window(c, int(m.group("y")), m.group(0)))


@_rule(
    r"\b(?P<n>"
    + _EN_NUM
    + r")\s+(?P<u>minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\s+ago\b"
)
def _ago_en(m, c):
    return _ago(m, c, _en_num(m.group("n")), _unit(m.group("u")))


@_rule(r"(?P<n>" + _JA_NUM + r")(?P<u>日|週間|週|ヶ月|か月|カ月|ケ月|箇月|年|時間|分)前")
def _ago_ja(m, c):
    return _ago(m, c, _ja_num(m.group("n")), _ja_unit(m.group("u")))


def _ago(m: re.Match, c: _Ctx, n: int, unit: str) -> _Piece | None:
    if unit in ("hour", "minute"):
        return _span(m, _ago_recent(c, n, unit, m.group(0)))
    if unit == "day":
        return _piece(m, "day", day=c.today - dt.timedelta(days=n))
    return _span(m, _relative_unit(c, unit, n, m.group(0)))


def _ago_recent(c: _Ctx, n: int, unit: str, phrase: str) -> Window:
    """An hour either side of "N hours ago"; half of N (at least 5) minutes either side of "N minutes ago"."""
    if unit == "hour":
        anchor, slack, granularity = c.now - n * _HOUR, _HOUR, "hour"
    else:
        anchor, slack, granularity = (
            c.now - dt.timedelta(minutes=n),
            dt.timedelta(minutes=max(5, n / 2)),
            "range",
        )
    return Window(anchor - slack, min(anchor + slack, c.now), granularity, phrase)


def _relative_unit(c: _Ctx, unit: str, back: int, phrase: str) -> Window:
    """The calendar week, month or year `back` units before the current one."""
    if unit == "week":
        return _week_window(c, c.today - dt.timedelta(weeks=back), phrase)
    if unit == "month":
        first = _month_start(c.today.year, c.today.month, -back)
        return _month_window(c, first.year, first.month, phrase)
    return _year_window(c, c.today.year - back, phrase)


@_rule(r"\b(?P<d>today|yesterday)\b|(?P<ja>一昨日|おととい|おとつい|昨日|今日|本日)")
def _simple_day(m, c):
    word = (m.group("d") or m.group("ja")).lower()
    back = {"today": 0, "今日": 0, "本日": 0, "yesterday": 1, "昨日": 1}.get(word, 2)
    return _piece(m, "day", day=c.today - dt.timedelta(days=back))


_JA_RELATIVE = {
    "先々週": ("week", 2), "先週": ("week", 1), "今週": ("week", 0),
    "先々月": ("month", 2), "先月": ("month", 1), "今月": ("month", 0),
    "一昨年": ("year", 2), "おととし": ("year", 2), "去年": ("year", 1), "昨年": ("year", 1), "今年": ("year", 0),
}  # fmt: skip


@_rule(
    r"\b(?:the\s+)?(?P<w>last|this|previous)\s+(?P<u>week|month|year)\b|(?P<ja>先々週|先週|今週|先々月|先月|今月|一昨年|おととし|去年|昨年|今年)"
)
def _this_or_last(m, c):
    if m.group("ja"):
        unit, back = _JA_RELATIVE[m.group("ja")]
    else:
        unit, back = m.group("u").lower(), 0 if m.group("w").lower() == "this" else 1
    return _span(m, _relative_unit(c, unit, back, m.group(0)))


@_rule(r"\b(?:(?P<mod>last|this\s+past|past|this|on)\s+)?" + _WD + r"\b")
def _weekday_en(m, c):
    if (m.group("mod") or "").lower() == "this":
        return _weekday_in_week(m, c, 0)
    return _weekday_before(m, c, _WEEKDAYS.index(m.group("wd").lower()))


@_rule(r"(?:(?:この)?前の)?(?P<wd>[月火水木金土日])曜日?")
def _weekday_ja(m, c):
    return _weekday_before(m, c, _JA_WEEKDAYS.index(m.group("wd")))


def _weekday_before(m: re.Match, c: _Ctx, index: int) -> _Piece:
    back = (c.today.weekday() - index) % 7 or 7  # strictly before today
    return _piece(m, "day", day=c.today - dt.timedelta(days=back))


_AROUND_EN = (
    r"(?:(?P<pre>(?:at\s+)?(?:around|about|approximately|roughly|circa)|at)\s+|(?P<tilde>~)\s*)?"
)


@_rule(
    _AROUND_EN
    + r"\b(?P<h>1[0-2]|0?[1-9])(?::(?P<mi>[0-5][0-9]))?\s*(?P<ap>[ap])\.?m\b\.?(?P<ish>-?ish\b)?"
)
def _clock_12h(m, c):
    hour = int(m.group("h")) % 12 + (12 if m.group("ap").lower() == "p" else 0)
    return _clock_piece(m, hour)


@_rule(
    _AROUND_EN
    + r"(?<![0-9:.])(?P<h>[01]?[0-9]|2[0-3]):(?P<mi>[0-5][0-9])(?![0-9:])(?P<ish>-?ish\b)?"
)
def _clock_24h(m, c):
    if len(m.group("h")) == 1 and not (m.group("pre") or m.group("tilde")):
        return None  # "3:20" alone is as likely a ratio or a verse as a time
    return _clock_piece(m, int(m.group("h")))


@_rule(r"\b(?P<pre>(?:at\s+)?(?:around|about)|at)\s+(?P<w>noon|midday|midnight)\b")
def _noon_midnight(m, c):
    return _clock_piece(m, 24 if m.group("w").lower() == "midnight" else 12)


def _clock_piece(m: re.Match, hour: int) -> _Piece:
    pre = (m.groupdict().get("pre") or "").lower()
    around = pre not in ("", "at") or bool(m.groupdict().get("tilde") or m.groupdict().get("ish"))
    return _piece(m, "tod", clock=(hour, around, False))


@_rule(
    r"(?P<pre>午前|午後|朝|夜|夕方|昼)?(?P<h>"
    + _JA_NUM
    + r")時(?!間)(?:(?P<mi>"
    + _JA_NUM
    + r")分|半)?(?P<around>頃|ごろ|くらい|ぐらい|前後)?"
)
def _clock_ja(m, c):
    hour, pre = _ja_num(m.group("h")), m.group("pre")
    if hour > 24:
        return None
    if pre in ("午後", "夜", "夕方") and hour < 12:
        hour += 12
    return _piece(m, "tod", clock=(hour, bool(m.group("around")), pre is None and hour <= 12))


@_rule(
    r"\b(?:in|during)\s+the\s+(?P<p>morning|afternoon|evening)\b|\b(?:at|during|over)\s+(?P<l>lunch(?:time)?)\b|\b(?P<late>late\s+)?at\s+night\b"
)
def _bare_part_en(m, c):
    word = m.group("p") or m.group("l") or ("late" if m.group("late") else "night")
    return _piece(m, "tod", part=_EN_PARTS[word.lower()])


_SUFFIX_EN = re.compile(r"\s+(?P<p>morning|afternoon|evening|night)\b", re.I)
_SUFFIX_JA = re.compile(
    r"の?(?P<p>早朝|明け方|午前中|午前|朝|昼間|昼|午後|夕方|夜中|深夜|夜|晩)(?!食|飯|ご飯|御飯|酌|刊|ごはん)"
)


def _attach_parts(pieces: list[_Piece], masked: str, text: str) -> None:
    """A part of the day right after a day: "yesterday evening", "last Tuesday night", 昨日の夜."""
    for p in pieces:
        if p.kind != "day" or p.part:
            continue
        suffix = _SUFFIX_JA if _cjk(text[p.end - 1]) else _SUFFIX_EN
        m = suffix.match(masked, p.end)
        if m:
            word = m.group("p")
            p.part = _JA_PARTS.get(word) or _EN_PARTS[word.lower()]
            p.end = m.end()


# --------------------------------------------------------------------------- scanning


def _find(text: str, c: _Ctx) -> list[_Piece]:
    """Every time phrase in `text`, combined into ranges, each with the span to cut from the keywords."""
    pieces = _scan(text, c)
    if not any(p.kind != "shield" for p in pieces):
        pieces += _foreign(text, c, pieces)
    pieces.sort(key=lambda p: p.start)
    pieces = _compose(pieces, text, c)
    for p in pieces:
        _glue(p, text)
    return pieces


def _scan(text: str, c: _Ctx) -> list[_Piece]:
    masked, pieces = text, []
    for pattern, build in _compiled_rules():
        found = [p for m in pattern.finditer(masked) if (p := _build(build, m, c))]
        # Mask after each rule so that a lower-priority rule never reuses claimed words.
        masked = _mask(masked, found)
        pieces += found
    _attach_parts(pieces, masked, text)
    return pieces


def _build(build: Callable, m: re.Match, c: _Ctx) -> _Piece | None:
    try:
        return build(m, c)
    except (ValueError, OverflowError):  # 31 February, year 99999: not a time after all
        return None


def _mask(text: str, pieces: list[_Piece]) -> str:
    for p in pieces:
        text = text[: p.start] + "\0" * (p.end - p.start) + text[p.end :]
    return text


_RANGE_GAP = re.compile(r"\s*(?:and|to|until|till|through|thru|-|–|—|から|〜|～|~)\s*", re.I)
_RANGE_OPEN = re.compile(r"\b(?P<w>between|from)\s+$", re.I)
_SINCE_BEFORE = re.compile(r"\b(?P<w>since|after)\s+$", re.I)
_SINCE_AFTER = re.compile(r"\s*(?:から|以降|以来)")
_UNTIL_AFTER = re.compile(r"\s*まで")


def _compose(pieces: list[_Piece], text: str, c: _Ctx) -> list[_Piece]:
    """Join "between A and B", "from A to B", "since A", "Aから" into one range piece."""
    out: list[_Piece] = []
    i = 0
    while i < len(pieces):
        a = pieces[i]
        b = pieces[i + 1] if i + 1 < len(pieces) else None
        joined = _between(a, b, text, c) if b else None
        if joined:
            out.append(joined)
            i += 2
            continue
        out.append(_since(a, text, c) or a)
        i += 1
    return out


def _own_window(p: _Piece, c: _Ctx, text: str) -> Window | None:
    if p.kind == "span":
        return p.window
    if p.kind == "day":
        phrase = text[p.start : p.end]
        return _part_window(c, p.day, p.part, phrase) if p.part else _day_window(c, p.day, phrase)
    return None


def _between(a: _Piece, b: _Piece, text: str, c: _Ctx) -> _Piece | None:
    gap = _RANGE_GAP.fullmatch(text[a.end : b.start])
    if not gap:
        return None
    opener = _RANGE_OPEN.search(text[: a.start])
    if gap.group(0).strip().lower() == "and" and not (
        opener and opener.group("w").lower() == "between"
    ):
        return None
    wa, wb = _own_window(a, c, text), _own_window(b, c, text)
    if not (wa and wb and wa.start < wb.end):
        return None
    start = opener.start() if opener else a.start
    until = _UNTIL_AFTER.match(text, b.end)
    end = until.end() if until else b.end
    window = Window(wa.start, wb.end, "range", text[start:end])
    return _Piece(start, end, "span", window=window)


def _since(a: _Piece, text: str, c: _Ctx) -> _Piece | None:
    before = _SINCE_BEFORE.search(text[: a.start])
    after = _SINCE_AFTER.match(text, a.end)
    own = _own_window(a, c, text)
    if own is None or not (before or after):
        return None
    start = before.start() if before else a.start
    end = after.end() if after else a.end
    edge = own.end if before and before.group("w").lower() == "after" else own.start
    window = _until_now(c, edge, text[start:end])
    return _Piece(start, end, "span", window=window) if window else None


_LEFT_GLUE = {
    "day": r"on|from|for|of",
    "span": r"in|on|during|from|for|of|over|throughout|within",
    "tod": r"at|in|from|around|about",
    "occ": r"",
}
_RIGHT_GLUE_JA = re.compile(r"には|では|にも|の|に|は|も|から|まで")
_POSSESSIVE = re.compile(r"['’]s\b")


def _glue(p: _Piece, text: str) -> None:
    """Widen the cut over words that only served the time phrase: "on", "in", "'s", の, に."""
    start, end = p.start, p.end
    if _cjk(text[end - 1]):
        m = _RIGHT_GLUE_JA.match(text, end)
        end = m.end() if m else end
    else:
        m = _POSSESSIVE.match(text, end)
        if m:
            end, p.possessive = m.end(), True
    words = _LEFT_GLUE.get(p.kind, "")
    if words and not p.possessive:  # "on yesterday's call": "on" belongs to "call"
        m = re.search(r"\b(?:" + words + r")\s+$", text[:start], re.I)
        start = m.start() if m else start
    p.cut = (start, end)


# --------------------------------------------------------------------------- other languages

_FOREIGN_GATES = {
    "de": (
        "vorgestern", "gestern", "heute", r"letzte[nrs]?\s+(?:woche|monat|jahr)",
        r"vor\s+[0-9]+\s+(?:tagen|wochen|monaten|jahren|woche|monat|jahr)",
        r"(?:im|in)\s+(?:januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember)",
        "montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag",
    ),
    "fr": (
        "avant-hier", "hier", "aujourd['’]hui", r"(?:la\s+)?semaine\s+dernière", r"(?:le\s+)?mois\s+dernier",
        r"(?:l['’])?année\s+dernière", r"il\s+y\s+a\s+[0-9]+\s+(?:jours?|semaines?|mois|ans?)",
        r"en\s+(?:janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre)",
        "lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche",
    ),
    "es": (
        "anteayer", "ayer", "hoy", r"(?:la\s+)?semana\s+pasada", r"(?:el\s+)?mes\s+pasado", r"(?:el\s+)?año\s+pasado",
        r"hace\s+[0-9]+\s+(?:días?|semanas?|meses|mes|años?)",
        r"en\s+(?:enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)",
        "lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo",
    ),
    "it": (
        r"l['’]altro\s+ieri", "ieri", "oggi", r"(?:la\s+)?settimana\s+scorsa", r"(?:il\s+)?mese\s+scorso",
        r"(?:l['’])?anno\s+scorso", r"[0-9]+\s+giorni\s+fa",
    ),
    "pt": (
        "anteontem", "ontem", "hoje", r"(?:a\s+)?semana\s+passada", r"(?:o\s+)?mês\s+passado",
        r"(?:o\s+)?ano\s+passado", r"há\s+[0-9]+\s+dias",
    ),
    "nl": ("eergisteren", "gisteren", "vandaag", r"vorige\s+(?:week|maand)", r"vorig\s+jaar", r"[0-9]+\s+dagen\s+geleden"),
    "ru": (
        "позавчера", "вчера", "сегодня", r"на\s+прошлой\s+неделе", r"в\s+прошлом\s+месяце", r"в\s+прошлом\s+году",
        r"[0-9]+\s+(?:дня|дней)\s+назад",
    ),
    "zh": ("前天", "昨天", "今天", "上周", "上星期", "上(?:个|個)?月"),
    "ko": ("그저께", "어제", "오늘", "지난주", "지난달", "작년"),
}  # fmt: skip
_UNSPACED = ("zh", "ko")  # written without spaces: a word boundary would never match
# "hier" is "here" in German and Dutch; read it as French only when the text is not Germanic.
_GERMANIC = re.compile(
    r"\b(?:ich|bin|ist|sind|wir|das|und|nicht|ik|het|een|ben|zijn|wat|hier\s+ist)\b", re.I
)


@functools.cache
def _foreign_gates() -> dict[str, re.Pattern]:
    gates = {}
    for lang, alternatives in _FOREIGN_GATES.items():
        pattern = "|".join(alternatives)
        gates[lang] = re.compile(
            pattern if lang in _UNSPACED else rf"(?<!\w)(?:{pattern})(?!\w)", re.I
        )
    return gates


def _foreign(text: str, c: _Ctx, claimed: list[_Piece]) -> list[_Piece]:
    """Time words in other languages, read by dateparser one short phrase at a time."""
    hits = [(lang, m) for lang, gate in _foreign_gates().items() for m in gate.finditer(text)]
    hits = [
        (lang, m)
        for lang, m in hits
        if not _overlaps(m, claimed) and not _false_friend(lang, m, text)
    ]
    if not hits:
        return []
    from dateparser.date import DateDataParser  # slow to import: only when a gate matched

    settings = {
        "RELATIVE_BASE": c.local,
        "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    pieces: list[_Piece] = []
    for lang, m in sorted(hits, key=lambda hit: hit[1].start()):
        if _overlaps(m, pieces):
            continue
        try:
            data = DateDataParser(languages=[lang], settings=settings).get_date_data(m.group(0))
        except (ValueError, OverflowError):
            continue  # a fallback that fails is no time phrase, never a broken search
        if data.date_obj is not None:
            pieces.append(_period_piece(m, data.date_obj.date(), data.period, c))
    return pieces


def _false_friend(lang: str, m: re.Match, text: str) -> bool:
    return lang == "fr" and m.group(0).lower() == "hier" and bool(_GERMANIC.search(text))


def _overlaps(m: re.Match, pieces: list[_Piece]) -> bool:
    return any(m.start() < p.end and p.start < m.end() for p in pieces)


def _period_piece(m: re.Match, day: dt.date, period: str, c: _Ctx) -> _Piece:
    if period == "week":
        return _piece(m, "span", window=_week_window(c, day, m.group(0)))
    if period == "month":
        return _piece(m, "span", window=_month_window(c, day.year, day.month, m.group(0)))
    if period == "year":
        return _piece(m, "span", window=_year_window(c, day.year, m.group(0)))
    return _piece(m, "day", day=day)  # hours and minutes are read as that day


# --------------------------------------------------------------------------- combining


def _resolve(pieces: list[_Piece], text: str, c: _Ctx) -> Window | None:
    anchors = [p for p in pieces if p.kind in ("day", "span")]
    tods = [p for p in pieces if p.kind == "tod"]
    if anchors and anchors[0].kind == "span":
        return anchors[0].window
    if anchors:
        return _on_day(anchors[0], tods[0] if tods else None, text, c)
    if tods:
        return _latest_tod(tods[0], text, c)
    return None


def _on_day(a: _Piece, tod: _Piece | None, text: str, c: _Ctx) -> Window:
    if tod and tod.part and a.part:
        tod = None  # "last night in the evening": the day's own part already says it
    phrase = _phrase(text, [a, tod] if tod else [a])
    part = a.part or (tod.part if tod else None)
    if tod and tod.clock:
        hour, around, loose = tod.clock
        hour = _fit(hour, part, loose) if part else hour
        return _hour_window(c, a.day, hour, around, phrase)
    if part:
        return _part_window(c, a.day, part, phrase)
    return _day_window(c, a.day, phrase)


def _fit(hour: int, part: tuple[int, int], loose: bool) -> int:
    """Move a clock hour into the part of the day it refines: 夜9時 is 21:00, "last night at 2am" is 26."""
    for candidate in (hour, hour + 12, hour + 24) if loose else (hour, hour + 24):
        if part[0] <= candidate < part[1]:
            return candidate
    return hour


def _latest_tod(t: _Piece, text: str, c: _Ctx) -> Window:
    """A time of day with no day: the most recent one that has begun (today's, else yesterday's)."""
    first_hour = t.clock[0] if t.clock else t.part[0]
    day = c.today if _wall(c.today, first_hour, c.tz) <= c.now else c.today - _DAY
    return _on_day(_Piece(t.start, t.start, "day", day=day), t, text, c)


def _phrase(text: str, used: list[_Piece]) -> str:
    used = sorted(used, key=lambda p: p.start)
    out = text[used[0].start : used[0].end]
    for left, right in zip(used, used[1:]):
        gap = text[left.end : right.start]
        glue = re.fullmatch(r"\s*(?:,|、|の|に|at|on|in|around|about)?\s*", gap, re.I)
        out += (gap if glue else " ") + text[right.start : right.end]
    return out.strip()


# --------------------------------------------------------------------------- keywords


def _cjk(ch: str) -> bool:
    return (
        "\u3000" <= ch <= "\u9fff"
        or "\uf900" <= ch <= "\ufaff"
        or "\uff00" <= ch <= "\uffef"
        or "\uac00" <= ch <= "\ud7af"
    )


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    out, pos = "", 0
    for start, end in sorted(spans):
        if start > pos:
            out = _join(out, text[pos:start])
        pos = max(pos, end)
    return _tidy(_join(out, text[pos:]))


def _join(left: str, right: str) -> str:
    # A space where two words would otherwise touch, but none between CJK characters.
    if (
        left
        and right
        and not left[-1].isspace()
        and not right[0].isspace()
        and not (_cjk(left[-1]) or _cjk(right[0]))
    ):
        return left + " " + right
    return left + right


_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?、。，？！])")
_REPEATED_COMMA = re.compile(r"([,、，])(?:\s*[,、，])+")


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    text = _REPEATED_COMMA.sub(r"\1", _SPACE_BEFORE_PUNCT.sub(r"\1", text))
    text = text.strip(" ,;:、，").strip()
    return text if any(ch.isalnum() for ch in text) else ""  # "yesterday?" leaves no keywords


def _keywords(question: str, pieces: list[_Piece], c: _Ctx) -> str:
    # Repeat until nothing is left to cut: removing one phrase can bring two time words together.
    text = question
    while spans := [p.cut for p in pieces if p.kind != "shield"]:
        text = _cut(text, spans)
        pieces = _find(text, c)
    return text


# --------------------------------------------------------------------------- public


def _context(now: dt.datetime, tz: dt.tzinfo) -> _Ctx:
    if now.tzinfo is None:
        now = now.replace(tzinfo=tz)  # a naive `now` is on the store's wall clock
    now = now.astimezone(UTC)
    return _Ctx(now, tz, now.astimezone(tz).replace(tzinfo=None))


def parse_time_query(question: str, now: dt.datetime, tz: dt.tzinfo) -> TimeQuery:
    """Split `question` into a time window (or none), an occurrence word, and the remaining keywords."""
    c = _context(now, tz)
    pieces = _find(question, c)
    window = _resolve(pieces, question, c)
    occurrence = next((p.occ for p in pieces if p.kind == "occ"), None)
    return TimeQuery(window, _keywords(question, pieces, c), occurrence)


_DURATION = re.compile(r"(?P<n>[0-9]+)\s*(?P<u>m|min|h|d|w)", re.I)
_DURATION_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, now: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """The instant a --since/--until value names: ISO time, "3d"/"12h", or a phrase (its window's start)."""
    from ..errors import UsageError

    c = _context(now, tz)
    text = value.strip()
    duration = _DURATION.fullmatch(text)
    if duration:
        unit = _DURATION_UNITS[duration.group("u").lower()]
        return c.now - dt.timedelta(**{unit: int(duration.group("n"))})
    iso = _iso_instant(text, tz)
    if iso is not None:
        return iso
    query = parse_time_query(text, c.now, tz)
    if query.window is None or query.keywords.strip(" .,"):
        leftover = f" (did not understand {query.keywords!r})" if query.window else ""
        raise UsageError(
            f"cannot read {value!r} as a time{leftover}",
            hint='Try an ISO time like 2026-03-01 or 2026-03-01T09:00, "3d", or a phrase like "last week".',
        )
    return query.window.start


def _iso_instant(text: str, tz: dt.tzinfo) -> dt.datetime | None:
    if not re.match(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return None
    try:
        moment = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=tz)).astimezone(UTC)


__all__ = ["TimeQuery", "Window", "parse_since", "parse_time_query"]
