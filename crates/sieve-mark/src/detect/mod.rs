//! Validated detectors: each decides whether some bytes are what it looks for.
//!
//! They are pure functions over the bytes around a candidate, called by [`crate::scan`] at the
//! positions its prefilters stop at. Validation is what keeps look-alikes (order numbers,
//! timestamps, version strings) in the clear: a card number passes Luhn, an IBAN mod 97, an SSN
//! the SSA's area, group and serial rules, a phone number its country's numbering plan.

pub mod api_key;
pub mod card;
pub mod date;
pub mod email;
pub mod iban;
pub mod ip;
pub mod jwt;
pub mod pem;
pub mod person;
pub mod phone;
pub mod secret;
pub mod ssn;

/// ASCII letter, digit or underscore: what may not touch a finding from outside.
#[inline]
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The byte before `i`, if any.
#[inline]
pub fn before(s: &[u8], i: usize) -> Option<u8> {
    i.checked_sub(1).map(|j| s[j])
}
