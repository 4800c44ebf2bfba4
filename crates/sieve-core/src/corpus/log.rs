//! `--kind log`: a web service's access and application log. Classified: user names, client
//! addresses, session tokens, account numbers and amounts, or whole lines.

use super::json::timestamp;
use super::marking::Record;
use super::rng::Rng;
use super::values;
use super::words::{AGENTS, CITIES, EVENTS, FIRST_NAMES, HOSTS, LAST_NAMES, LOG_PATHS, METHODS};

pub(crate) struct Log {
    millis: u64,
}

impl Log {
    pub(crate) fn new() -> Log {
        Log { millis: 0 }
    }

    pub(crate) fn record(&mut self, r: &mut Rng, rec: &mut Record) {
        if self.millis == 0 {
            self.millis = (1_704_067_200 + r.below(60_000_000)) * 1000;
        }
        self.millis += r.range(0, 40);
        let ts = timestamp(self.millis / 1000);
        // "2024-01-01T00:00:00Z" → 2024-01-01T00:00:00.123Z
        rec.text(&ts.as_bytes()[1..20]);
        rec.text(format!(".{:03}Z ", self.millis % 1000).as_bytes());
        let level = match r.below(100) {
            0..=79 => "INFO ",
            80..=91 => "DEBUG",
            92..=97 => "WARN ",
            _ => "ERROR",
        };
        rec.text(level.as_bytes());
        rec.text(b" ");
        rec.text(r.pick(HOSTS).as_bytes());
        rec.text(b" [req ");
        r.hex(&mut rec.bytes, 12);
        rec.text(b"] user=");
        rec.value(|o| {
            o.extend_from_slice(r.zipf(FIRST_NAMES).to_ascii_lowercase().as_bytes());
            o.push(b'.');
            o.extend_from_slice(r.zipf(LAST_NAMES).to_ascii_lowercase().as_bytes());
        });
        rec.text(b" ip=");
        rec.value(|o| {
            let ip = format!("10.{}.{}.{}", r.below(32), r.below(256), r.range(1, 254));
            o.extend_from_slice(ip.as_bytes());
        });
        if r.chance(0.7) {
            rec.text(b" ");
            rec.text(r.pick(METHODS).as_bytes());
            rec.text(b" ");
            rec.text(r.zipf(LOG_PATHS).as_bytes());
            if r.chance(0.5) {
                rec.text(b"/");
                rec.value(|o| r.digits(o, 8));
            }
            let status = *r.pick(&[200, 200, 200, 200, 201, 204, 304, 400, 401, 404, 500]);
            rec.text(
                format!(
                    " {status} {}B {}.{}ms \"",
                    r.range(80, 90_000),
                    r.below(250),
                    r.below(10)
                )
                .as_bytes(),
            );
            rec.text(r.pick(AGENTS).as_bytes());
            rec.text(b"\" session=");
            rec.value(|o| r.hex(o, 32));
        } else {
            let &(_, country, currency) = r.pick(CITIES);
            rec.text(b" ");
            rec.text(r.pick(EVENTS).as_bytes());
            rec.text(b" account=");
            rec.value(|o| values::account(r, country, o));
            rec.text(b" amount=");
            rec.value(|o| values::amount(r, o));
            rec.text(b" ");
            rec.text(currency.as_bytes());
        }
        rec.text(b"\n");
    }
}
