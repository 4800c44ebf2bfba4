//! A ranges file: classified ranges for any document, text or binary, kept beside it.
//!
//! JSON, so other tools (a policy engine, a redaction UI, `jq`) can write it:
//!
//! ```json
//! { "ranges": [[0, 16], [120, 180]] }
//! ```
//!
//! Each pair is a half-open byte range `[start, end)`. A bare array of pairs is accepted too.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ranges::{ClassifiedRanges, RangeError};

/// Why a ranges file cannot be used for a document.
#[derive(Debug, Error)]
pub enum RangesFileError {
    /// Not JSON, or neither `{"ranges": [[start, end], ...]}` nor a bare array of pairs.
    #[error(
        "the ranges file is not valid JSON of the form {{\"ranges\": [[start, end], ...]}}: {0}"
    )]
    Json(#[from] serde_json::Error),
    /// Well-formed JSON whose ranges do not describe the document (see [`RangeError`]).
    #[error(transparent)]
    Range(#[from] RangeError),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Wire {
    Object { ranges: Vec<(u64, u64)> },
    Bare(Vec<(u64, u64)>),
}

/// Parse a ranges file and check it against a document of `doc_len` bytes.
pub fn parse(json: &[u8], doc_len: u64) -> Result<ClassifiedRanges, RangesFileError> {
    let wire: Wire = serde_json::from_slice(json)?;
    let pairs = match wire {
        Wire::Object { ranges } | Wire::Bare(ranges) => ranges,
    };
    Ok(ClassifiedRanges::new(
        pairs.into_iter().map(|(s, e)| s..e).collect(),
        doc_len,
    )?)
}

/// Write ranges in the canonical form.
pub fn to_json(ranges: &ClassifiedRanges) -> String {
    let pairs: Vec<(u64, u64)> = ranges.as_slice().iter().map(|r| (r.start, r.end)).collect();
    serde_json::to_string(&Wire::Object { ranges: pairs }).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_parse_and_round_trip() {
        let r = parse(br#"{"ranges": [[0, 4], [4, 4], [7, 9]]}"#, 10).unwrap();
        assert_eq!(r.as_slice(), &[0..4, 4..4, 7..9]);
        assert_eq!(parse(to_json(&r).as_bytes(), 10).unwrap(), r);
        assert_eq!(parse(b"[[1,2]]", 2).unwrap().as_slice(), &[1..2]);
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(matches!(parse(b"{", 1), Err(RangesFileError::Json(_))));
        assert!(matches!(
            parse(br#"{"ranges": [[0, -1]]}"#, 1),
            Err(RangesFileError::Json(_))
        ));
        assert!(matches!(
            parse(br#"[[5, 2]]"#, 9),
            Err(RangesFileError::Range(RangeError::Reversed { .. }))
        ));
        assert!(matches!(
            parse(br#"[[0, 20]]"#, 9),
            Err(RangesFileError::Range(RangeError::OutOfBounds { .. }))
        ));
        assert!(matches!(
            parse(br#"[[0, 5], [3, 6]]"#, 9),
            Err(RangesFileError::Range(RangeError::Unsorted { .. }))
        ));
    }
}
