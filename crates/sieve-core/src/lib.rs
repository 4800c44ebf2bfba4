//! # sieve-core
//!
//! The protocol core of the security sieve (N. Lim, *Techniques for Enhancing the Performance of
//! Secure Sockets Layer-Based Systems*, 2011): everything that can be stated as a pure function of
//! bytes. No sockets, no threads, no clocks, no async runtime; the transport crate drives it.
//!
//! | thesis | here |
//! |---|---|
//! | secure tags `<$S>` / `<$E>` (§3.1) | [`marks`] (streaming, binary-safe, with an escape) |
//! | sieve / integrate (§3.1-3.2) | [`sieve`] over [`ranges`] and a [`layout::Layout`] |
//! | ES / SS split and combine (§4.3.3-4.3.4) | [`split`] |
//! | BFS / BES / BSS (§4.5) | [`batch`] |
//! | channels ask for the next chunk (our default) | [`chunk`] |
//! | `<!$!>`, `MSG_DONE`, `MSG_ACK` in-band strings (§4.2.4) | typed, length-prefixed [`frame`]s and [`message`]s |
//! | x-P files (§5.1.2) | [`gen`] |
//! | — (the thesis sent one file name) | [`name`]: which relative names a receiver accepts |
//! | realistic documents with x-P marking (prose, CSV, JSON lines, logs) | [`corpus`] |
//! | ACCENT's adaptive compression (Park and Park, 2011), for the cleartext only | [`compress`] |
//! | — (the thesis sent the cleartext unprotected) | [`mac`]: which MAC, negotiated by measured speed |
//! | — (the thesis always sieved) | [`cost`]: `--mode auto`, sieve or secure-only by predicted time |
//! | the thesis's measured times (§5.1.1) | [`report`]: `sieve send --json`, one type for writer and readers |

// Pure functions of bytes need no unsafe code; the compiler keeps it so.
#![forbid(unsafe_code)]
// Every public item says what it is and what a caller must know.
#![deny(missing_docs)]
// Lists holding a single byte range are normal here (one classified span), not a mistaken
// `vec![0..n]` meant as a list of indices.
#![allow(clippy::single_range_in_vec_init)]

pub mod batch;
pub mod budget;
pub mod chunk;
pub mod compress;
pub mod corpus;
pub mod cost;
pub mod frame;
pub mod gen;
pub mod layout;
pub mod ledger;
pub mod mac;
pub mod marks;
pub mod marks_fast;
pub mod marks_parallel;
pub mod message;
pub mod name;
pub mod plan;
pub mod ranges;
pub mod ranges_file;
pub mod receiver;
pub mod report;
pub mod sender;
pub mod sieve;
pub mod split;

pub use layout::{Kind, Layout};
pub use plan::{Piece, Plan};
