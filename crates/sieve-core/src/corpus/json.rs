//! `--kind json`: JSON lines, one order per line with a nested customer. Classified: the values
//! (inside their quotes) of names, e-mail addresses, streets, accounts, amounts and memos, or
//! whole lines; the keys and the structure stay in the clear.

use super::marking::Record;
use super::rng::Rng;
use super::values;
use super::words::{CITIES, PROSE, STATUSES};

pub(crate) struct Json {
    id: u64,
    second: u64,
}

impl Json {
    pub(crate) fn new() -> Json {
        Json { id: 0, second: 0 }
    }

    pub(crate) fn record(&mut self, r: &mut Rng, rec: &mut Record) {
        if self.id == 0 {
            self.id = 1_000_000 + r.below(9_000_000);
            self.second = 1_704_067_200 + r.below(60_000_000);
        }
        self.id += 1;
        self.second += r.range(0, 90);
        let &(city, country, currency) = r.pick(CITIES);
        rec.text(format!("{{\"id\":{},\"created\":", self.id).as_bytes());
        rec.text(timestamp(self.second).as_bytes());
        rec.text(b",\"customer\":{\"name\":\"");
        rec.value(|o| values::name(r, o));
        rec.text(b"\",\"email\":\"");
        rec.value(|o| values::email(r, o));
        rec.text(b"\",\"address\":{\"street\":\"");
        rec.value(|o| values::street(r, o));
        rec.text(format!("\",\"city\":\"{city}\",\"country\":\"{country}\"}}}},").as_bytes());
        rec.text(b"\"account\":\"");
        rec.value(|o| values::account(r, country, o));
        rec.text(b"\",\"amount\":");
        rec.value(|o| values::amount(r, o));
        rec.text(
            format!(
                ",\"currency\":\"{currency}\",\"status\":\"{}\"",
                r.pick(STATUSES)
            )
            .as_bytes(),
        );
        rec.text(b",\"tags\":[");
        for i in 0..r.range(0, 3) {
            if i > 0 {
                rec.text(b",");
            }
            rec.text(format!("\"{}\"", r.zipf(&PROSE[50..])).as_bytes());
        }
        rec.text(b"]");
        if r.chance(0.5) {
            rec.text(b",\"memo\":\"");
            rec.value(|o| values::sentence(r, o));
            rec.text(b"\"");
        }
        rec.text(b"}\n");
    }
}

/// `"2024-01-01T00:00:00Z"` for seconds since the epoch (days from the civil calendar).
pub(crate) fn timestamp(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil(days);
    format!(
        "\"{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z\"",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Year, month, day of `days` since 1970-01-01 (H. Hinnant's `civil_from_days`).
pub(crate) fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_723), (2024, 1, 1));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(timestamp(1_704_067_200 + 3661), "\"2024-01-01T01:01:01Z\"");
    }
}
