//! Helpers shared by the tests that run the real `sieve` binary.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SIEVE: &str = env!("CARGO_BIN_EXE_sieve");

pub fn sieve() -> Command {
    let mut c = Command::new(SIEVE);
    c.env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run sieve")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Remove ANSI colour sequences, in case the log is coloured anyway.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list folder")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

pub fn partials(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.starts_with(".sieve-partial-"))
        .collect()
}

pub fn finals(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| !n.starts_with(".sieve-partial-"))
        .collect()
}
