//! Which document names a receiver accepts: a sender must never choose where files go.

/// Prefix of the receiver's temporary files; never a valid name.
pub const TEMP_PREFIX: &str = ".sieve-partial-";

/// Refuse any name that is not a plain base name.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the file name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("'{name}' is not a file name"));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(format!(
            "'{name}' contains a path separator; only base names are accepted"
        ));
    }
    if name.contains('\0') {
        return Err("the file name contains a NUL byte".into());
    }
    if name.starts_with(TEMP_PREFIX) {
        return Err(format!(
            "'{name}' uses the receiver's reserved prefix {TEMP_PREFIX}"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("{name:?} contains control characters"));
    }
    Ok(())
}
