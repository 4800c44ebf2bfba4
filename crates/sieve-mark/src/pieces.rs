//! Test inputs built from the pieces a detector's findings (and their look-alikes) are made of:
//! random concatenations find the boundaries a fast path must agree on with its definition far
//! sooner than random bytes do.

use proptest::prelude::*;

/// Up to `max - 1` of `pieces`, chosen with repetition, concatenated.
pub(crate) fn concat_of(pieces: Vec<&'static [u8]>, max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|v| v.concat())
}
