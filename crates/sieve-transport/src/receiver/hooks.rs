//! Points where a test can hold the receiver, to force an interleaving that timing alone makes
//! rare. Compiled only with the `test-hooks` feature, which the crate's own tests turn on.

use std::sync::{Arc, Mutex};

/// A hook: called where it is installed, on whatever thread gets there.
pub(crate) type Hook = Arc<dyn Fn() + Send + Sync>;

/// Called on the blocking pool between a document's verification and its commit.
pub static BEFORE_COMMIT: Mutex<Option<Hook>> = Mutex::new(None);

pub(crate) fn run(hook: &Mutex<Option<Hook>>) {
    let h = hook.lock().ok().and_then(|h| h.clone());
    if let Some(h) = h {
        h();
    }
}
