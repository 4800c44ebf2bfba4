//! The values records are made of: names, addresses, accounts, amounts, dates, sentences.

use super::rng::Rng;
use super::words::*;

pub(crate) fn name(r: &mut Rng, out: &mut Vec<u8>) {
    out.extend_from_slice(r.zipf(FIRST_NAMES).as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.zipf(LAST_NAMES).as_bytes());
}

/// `first.last@domain`, lower case, for a name drawn afresh.
pub(crate) fn email(r: &mut Rng, out: &mut Vec<u8>) {
    let first = r.zipf(FIRST_NAMES).to_ascii_lowercase();
    let last = r.zipf(LAST_NAMES).to_ascii_lowercase();
    out.extend_from_slice(first.as_bytes());
    out.push(b'.');
    out.extend_from_slice(last.as_bytes());
    if r.chance(0.3) {
        out.extend_from_slice(r.range(1, 99).to_string().as_bytes());
    }
    out.push(b'@');
    out.extend_from_slice(r.pick(MAIL_DOMAINS).as_bytes());
}

/// `123 Oak Street`.
pub(crate) fn street(r: &mut Rng, out: &mut Vec<u8>) {
    out.extend_from_slice(r.range(1, 2400).to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.pick(STREETS).as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.pick(STREET_TYPES).as_bytes());
}

/// An IBAN-shaped account number: country, two check digits, 18 digits in groups of four.
pub(crate) fn account(r: &mut Rng, country: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(country.as_bytes());
    r.digits(out, 2);
    for _ in 0..4 {
        out.push(b' ');
        r.digits(out, 4);
    }
    out.push(b' ');
    r.digits(out, 2);
}

/// An amount with two decimals, most of them small (log-uniform from 1 to 100 000).
pub(crate) fn amount(r: &mut Rng, out: &mut Vec<u8>) {
    let exp = (r.below(5_000) as f64) / 1000.0;
    let cents = (10f64.powf(exp) * 100.0) as u64;
    out.extend_from_slice(format!("{}.{:02}", cents / 100, cents % 100).as_bytes());
}

/// A date in 2024-2026 as `YYYY-MM-DD`.
pub(crate) fn date(r: &mut Rng, out: &mut Vec<u8>) {
    out.extend_from_slice(
        format!(
            "{}-{:02}-{:02}",
            r.range(2024, 2026),
            r.range(1, 12),
            r.range(1, 28)
        )
        .as_bytes(),
    );
}

/// A sentence of prose: a capital, 5 to 22 words with a comma now and then, a full stop.
pub(crate) fn sentence(r: &mut Rng, out: &mut Vec<u8>) {
    let words = r.range(5, 22);
    for i in 0..words {
        let w = r.zipf(PROSE).as_bytes();
        if i == 0 {
            out.push(w[0].to_ascii_uppercase());
            out.extend_from_slice(&w[1..]);
        } else {
            out.push(b' ');
            out.extend_from_slice(w);
        }
        if i + 1 < words && i > 2 && r.chance(0.08) {
            out.push(b',');
        }
    }
    out.push(b'.');
}
