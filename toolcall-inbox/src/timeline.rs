//! Buckets of wall time over an audit log, for the charts over time: a
//! width chosen from the log's span so that there are at most
//! [`MAX_BUCKETS`], each aligned on the UTC clock and labelled with the UTC
//! time it starts at.

use crate::html::utc;

/// The most buckets a chart over time has.
pub(crate) const MAX_BUCKETS: u64 = 24;

const SECOND: u64 = 1000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// The widths a bucket may have, narrowest first; a log longer than
/// [`MAX_BUCKETS`] weeks gets a whole number of days.
const WIDTHS: [u64; 17] = [
    SECOND,
    5 * SECOND,
    10 * SECOND,
    30 * SECOND,
    MINUTE,
    5 * MINUTE,
    10 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
];

/// Consecutive buckets of one width, from the bucket that holds the log's
/// first timed record to the one that holds its last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// Each bucket's width, in milliseconds.
    pub width_ms: u64,
    /// When the first bucket starts, in milliseconds since the Unix epoch (a
    /// multiple of the width: buckets start on the UTC clock's round times).
    pub start_ms: u64,
    /// Each bucket's label: the UTC time it starts at, as short as the
    /// width and the span allow.
    pub labels: Vec<String>,
}

impl Timeline {
    /// The buckets over the times `at_ms` of a log's records; a time of 0
    /// (a record from a log written before records kept one) is left out.
    /// `None` when no record has a time.
    pub(crate) fn over(times: impl IntoIterator<Item = u64>) -> Option<Timeline> {
        let (first, last) =
            times
                .into_iter()
                .filter(|&t| t > 0)
                .fold(None, |span, t| match span {
                    None => Some((t, t)),
                    Some((first, last)) => Some((t.min(first), t.max(last))),
                })?;
        let buckets = |width: u64| last / width - first / width + 1;
        let width_ms = WIDTHS
            .into_iter()
            .find(|&width| buckets(width) <= MAX_BUCKETS)
            .unwrap_or_else(|| {
                let days = (last / DAY - first / DAY) / (MAX_BUCKETS - 1) + 1;
                days * DAY
            });
        let start_ms = first / width_ms * width_ms;
        let count = buckets(width_ms);
        let starts: Vec<u64> = (0..count).map(|i| start_ms + i * width_ms).collect();
        let one_day = first / DAY == last / DAY;
        let labels = starts
            .iter()
            .map(|&at| {
                // `YYYY-MM-DD HH:MM:SS UTC`
                let text = utc(at);
                let part = match (width_ms, one_day) {
                    (w, _) if w >= DAY => &text[..10],
                    (w, true) if w < MINUTE => &text[11..19],
                    (_, true) => &text[11..16],
                    (w, false) if w < MINUTE => &text[5..19],
                    (_, false) => &text[5..16],
                };
                part.to_owned()
            })
            .collect();
        Some(Timeline {
            width_ms,
            start_ms,
            labels,
        })
    }

    /// The bucket a record made at `at_ms` falls in; `None` for a record
    /// without a time (0) or outside the buckets.
    pub(crate) fn bucket(&self, at_ms: u64) -> Option<usize> {
        if at_ms == 0 || at_ms < self.start_ms {
            return None;
        }
        let index = usize::try_from((at_ms - self.start_ms) / self.width_ms).ok()?;
        (index < self.labels.len()).then_some(index)
    }

    /// When the last bucket ends (exclusive), in ms since the Unix epoch.
    pub(crate) fn end_ms(&self) -> u64 {
        self.start_ms + self.width_ms * self.labels.len() as u64
    }

    /// The width in words: `10 s`, `15 min`, `3 h`, `1 day`, `7 days`.
    pub(crate) fn width(&self) -> String {
        let w = self.width_ms;
        match w {
            _ if w >= DAY && w.is_multiple_of(DAY) => {
                let days = w / DAY;
                if days == 1 {
                    "1 day".to_owned()
                } else {
                    format!("{days} days")
                }
            }
            _ if w >= HOUR && w.is_multiple_of(HOUR) => format!("{} h", w / HOUR),
            _ if w >= MINUTE && w.is_multiple_of(MINUTE) => format!("{} min", w / MINUTE),
            _ => format!("{} s", w / SECOND),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30 13:00:00 UTC.
    const T0: u64 = 1_796_043_600_000;

    #[test]
    fn three_hours_are_eighteen_buckets_of_ten_minutes() {
        let times = [
            T0,                                        // 13:00:00
            T0 + 9 * MINUTE + 59 * SECOND,             // 13:09:59
            T0 + 10 * MINUTE,                          // 13:10:00
            T0 + 2 * HOUR + 59 * MINUTE + 59 * SECOND, // 15:59:59
        ];
        let timeline = Timeline::over(times).unwrap();
        assert_eq!(timeline.width_ms, 10 * MINUTE);
        assert_eq!(timeline.width(), "10 min");
        assert_eq!(timeline.start_ms, T0);
        assert_eq!(timeline.labels.len(), 18);
        assert_eq!(timeline.labels[0], "13:00");
        assert_eq!(timeline.labels[1], "13:10");
        assert_eq!(timeline.labels[17], "15:50");
        let buckets: Vec<Option<usize>> = times.iter().map(|&t| timeline.bucket(t)).collect();
        assert_eq!(buckets, [Some(0), Some(0), Some(1), Some(17)]);
        assert_eq!(timeline.end_ms(), T0 + 3 * HOUR);
    }

    #[test]
    fn the_buckets_start_on_the_clock_whatever_the_first_record() {
        // 13:07:30 to 13:31:10: 24 buckets of a minute would not hold the
        // 25 minutes touched, so buckets of 5 minutes from 13:05.
        let timeline = Timeline::over([
            T0 + 7 * MINUTE + 30 * SECOND,
            T0 + 31 * MINUTE + 10 * SECOND,
        ])
        .unwrap();
        assert_eq!(timeline.width(), "5 min");
        assert_eq!(timeline.start_ms, T0 + 5 * MINUTE);
        assert_eq!(
            timeline.labels,
            ["13:05", "13:10", "13:15", "13:20", "13:25", "13:30"]
        );
        assert_eq!(timeline.bucket(T0 + 7 * MINUTE + 30 * SECOND), Some(0));
        assert_eq!(timeline.bucket(T0 + 31 * MINUTE + 10 * SECOND), Some(5));
        assert_eq!(timeline.bucket(T0), None, "before the first bucket");
        assert_eq!(timeline.bucket(T0 + HOUR), None, "after the last");
    }

    #[test]
    fn seconds_minutes_hours_and_days_as_the_span_asks() {
        let width = |span: u64| Timeline::over([T0, T0 + span]).unwrap().width();
        assert_eq!(width(0), "1 s");
        assert_eq!(width(20 * SECOND), "1 s");
        assert_eq!(width(2 * MINUTE), "10 s");
        assert_eq!(width(20 * MINUTE), "1 min");
        assert_eq!(width(20 * HOUR), "1 h");
        assert_eq!(width(2 * DAY), "3 h");
        assert_eq!(width(10 * DAY), "12 h");
        assert_eq!(width(15 * DAY), "1 day");
        assert_eq!(width(100 * DAY), "7 days");
        let long = Timeline::over([T0, T0 + 400 * DAY]).unwrap();
        assert!(long.labels.len() as u64 <= MAX_BUCKETS, "{long:?}");
        assert!(long.width_ms.is_multiple_of(DAY));
        assert_eq!(long.bucket(T0 + 400 * DAY), Some(long.labels.len() - 1));
    }

    #[test]
    fn labels_name_the_day_when_the_span_crosses_midnight() {
        // 2026-11-30 13:00 to 2026-12-02 12:00: buckets of 3 hours.
        let timeline = Timeline::over([T0, T0 + 47 * HOUR]).unwrap();
        assert_eq!(timeline.width(), "3 h");
        assert_eq!(timeline.labels[0], "11-30 12:00");
        assert_eq!(timeline.labels.last().unwrap(), "12-02 12:00");
        let days = Timeline::over([T0, T0 + 15 * DAY]).unwrap();
        assert_eq!(days.labels[0], "2026-11-30");
        assert_eq!(days.labels[10], "2026-12-10");
    }

    #[test]
    fn records_without_a_time_are_left_out() {
        assert_eq!(Timeline::over([0, 0]), None);
        assert_eq!(Timeline::over([]), None);
        let timeline = Timeline::over([0, T0, 0]).unwrap();
        assert_eq!(timeline.labels, ["13:00:00"]);
        assert_eq!(timeline.bucket(0), None);
        assert_eq!(timeline.bucket(T0), Some(0));
    }
}
