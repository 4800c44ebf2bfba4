//! Taking a `std::sync::Mutex` whose poisoning is an internal error.
//!
//! A lock is poisoned only when a thread panicked while holding it. The state behind it may then
//! be half updated, so the caller's work fails with an error that names the lock, instead of
//! going on with that state or panicking in turn.

use std::sync::{Mutex, MutexGuard};

use anyhow::{anyhow, Result};

/// Lock `m`, or fail saying that `what` was left inconsistent by a panic.
pub(crate) fn lock<'a, T>(m: &'a Mutex<T>, what: &str) -> Result<MutexGuard<'a, T>> {
    m.lock()
        .map_err(|_| anyhow!("internal error: {what} was left inconsistent by a panic elsewhere"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_an_error_that_names_it() {
        let m = std::sync::Arc::new(Mutex::new(0));
        assert_eq!(*lock(&m, "the counter").unwrap(), 0);
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("while holding it");
        })
        .join();
        let e = lock(&m, "the counter").unwrap_err().to_string();
        assert!(e.contains("the counter"), "{e}");
    }
}
