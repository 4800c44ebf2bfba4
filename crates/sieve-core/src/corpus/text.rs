//! `--kind text`: prose, paragraph by paragraph, some sentences naming people, amounts and
//! accounts. Classified: the names, amounts and accounts, or whole sentences.

use super::marking::Record;
use super::rng::Rng;
use super::values;
use super::words::CITIES;

pub(crate) struct Text {
    in_paragraph: u64,
    paragraph_len: u64,
}

impl Text {
    pub(crate) fn new() -> Text {
        Text {
            in_paragraph: 0,
            paragraph_len: 0,
        }
    }

    /// One sentence and what follows it (a space, or a paragraph break).
    pub(crate) fn record(&mut self, r: &mut Rng, rec: &mut Record) {
        if self.in_paragraph == 0 {
            self.paragraph_len = r.range(3, 9);
        }
        if r.chance(0.25) {
            let &(city, country, currency) = r.pick(CITIES);
            rec.text(b"On ");
            rec.value(|o| values::date(r, o));
            rec.text(b", ");
            rec.value(|o| values::name(r, o));
            rec.text(b" of ");
            rec.text(city.as_bytes());
            rec.text(b" transferred ");
            rec.value(|o| values::amount(r, o));
            rec.text(b" ");
            rec.text(currency.as_bytes());
            rec.text(b" from account ");
            rec.value(|o| values::account(r, country, o));
            rec.text(b". ");
            let start = rec.bytes.len();
            values::sentence(r, &mut rec.bytes);
            rec.spans.push(start..rec.bytes.len());
        } else {
            rec.value(|o| values::sentence(r, o));
        }
        self.in_paragraph += 1;
        if self.in_paragraph == self.paragraph_len {
            self.in_paragraph = 0;
            rec.text(b"\n\n");
        } else {
            rec.text(b" ");
        }
    }
}
