//! # sieve-transport
//!
//! The I/O around `sieve-core`: TLS 1.3 and plain TCP channels, session set-up and joining, the
//! send and receive loops, and the durable store. Algorithms live in the core; this crate only
//! moves their results over sockets.

// Every public item says what it is and what a caller must know.
#![warn(missing_docs)]
// Unsafe code only where no safe wrapper exists (file mappings, leases, TCP_INFO, SIOCOUTQ,
// SO_RCVLOWAT, another process's CPU clock, NH's vector loads); each site is allowed by name and
// proves itself.
#![deny(unsafe_code)]

pub mod cache;
pub mod calibrate;
pub(crate) mod change;
pub mod conn;
pub mod cpu;
pub mod explain;
#[cfg(feature = "insecure-thesis-suites")]
pub mod legacy_tls;
mod lock;
pub(crate) mod lowat;
pub mod mac;
pub mod paths;
pub(crate) mod progress;
pub mod receiver;
pub(crate) mod secured;
pub mod sender;
pub(crate) mod sendq;
mod sockopt;
pub mod source;
pub mod store;
pub mod tls;
pub mod token;
