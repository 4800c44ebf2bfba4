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

/// The canonical form. Fields other than `ranges` are ignored, so tools may add their own.
#[derive(Debug, Serialize, Deserialize)]
struct Object {
    ranges: Vec<(u64, u64)>,
}

/// Parse a ranges file and check it against a document of `doc_len` bytes.
///
/// The form is told by the first byte that is not white space, not by trying one form and then
/// the other: serde's untagged enums buffer the whole file as generic values first, which made
/// reading the ranges of 32 MiB of generated CSV (226,838 pairs) most of the time the sieve
/// spent before sending, and their error names no line or column.
pub fn parse(json: &[u8], doc_len: u64) -> Result<ClassifiedRanges, RangesFileError> {
    let bare = json.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let pairs = if bare {
        serde_json::from_slice::<Vec<(u64, u64)>>(json)?
    } else {
        serde_json::from_slice::<Object>(json)?.ranges
    };
    Ok(ClassifiedRanges::new(
        pairs.into_iter().map(|(s, e)| s..e).collect(),
        doc_len,
    )?)
}

/// Write ranges in the canonical form.
pub fn to_json(ranges: &ClassifiedRanges) -> String {
    let pairs: Vec<(u64, u64)> = ranges.as_slice().iter().map(|r| (r.start, r.end)).collect();
    serde_json::to_string(&Object { ranges: pairs }).unwrap_or_default()
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
        assert!(matches!(parse(b"", 1), Err(RangesFileError::Json(_))));
        assert!(matches!(
            parse(br#"{"ranges": [[0, 1]], "x": 1}"#, 1),
            Ok(r) if r.as_slice() == [0..1]
        ));
        // Where the file goes wrong is named, as for any JSON.
        let e = parse(b"{\"ranges\": [[0, 1],\n [2]]}", 9).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(matches!(
            parse(br#"{"other": []}"#, 1),
            Err(RangesFileError::Json(_))
        ));
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
