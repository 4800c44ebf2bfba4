//! `--kind csv`: a header, then one customer transaction per row. Classified: names, e-mail
//! addresses, streets, accounts, amounts and notes, or whole rows; never the header.

use super::marking::Record;
use super::rng::Rng;
use super::values;
use super::words::{CITIES, STATUSES};

const HEADER: &[u8] =
    b"id,name,email,street,city,postcode,country,account,amount,currency,date,status,note\n";

pub(crate) struct Csv {
    id: u64,
}

impl Csv {
    pub(crate) fn new() -> Csv {
        Csv { id: 0 }
    }

    pub(crate) fn record(&mut self, r: &mut Rng, rec: &mut Record) {
        if self.id == 0 {
            self.id = 100_000 + r.below(900_000);
            rec.text(HEADER);
            rec.plain_only = true;
            return;
        }
        self.id += 1;
        let &(city, country, currency) = r.pick(CITIES);
        rec.text(self.id.to_string().as_bytes());
        rec.text(b",");
        rec.value(|o| values::name(r, o));
        rec.text(b",");
        rec.value(|o| values::email(r, o));
        rec.text(b",");
        rec.value(|o| values::street(r, o));
        rec.text(b",");
        rec.text(city.as_bytes());
        rec.text(b",");
        let mut pc = Vec::new();
        r.digits(&mut pc, 5);
        rec.text(&pc);
        rec.text(b",");
        rec.text(country.as_bytes());
        rec.text(b",");
        rec.value(|o| values::account(r, country, o));
        rec.text(b",");
        rec.value(|o| values::amount(r, o));
        rec.text(b",");
        rec.text(currency.as_bytes());
        rec.text(b",");
        let mut d = Vec::new();
        values::date(r, &mut d);
        rec.text(&d);
        rec.text(b",");
        rec.text(r.pick(STATUSES).as_bytes());
        rec.text(b",\"");
        if r.chance(0.6) {
            rec.value(|o| values::sentence(r, o));
        }
        rec.text(b"\"\n");
    }
}
