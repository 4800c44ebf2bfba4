//! Split a batch of documents over `k` channels of one kind (thesis §4.5).
//!
//! Batching (PO2) sends several documents over the same channels. Per kind, the input is the
//! *sieved batch data list*: for each document, the lengths of its segments of that kind. Pieces
//! carry their document index, and [`crate::split::combine`] puts every document's stream back.
//!
//! * **BFS**, batch file split (§4.5.1): the unit is a whole document stream. Documents fill
//!   the empty channels first, then each goes to the channel with the fewest bytes (SS's rule
//!   with documents for segments). No document is cut, so one big document can leave the other
//!   channels idle (UFS with x = 10: the 10 MB file on one channel, both 1 MB files on the other).
//! * **BES**, batch even split (§4.5.2): ES on each document's list in turn.
//! * **BSS**, batch segment split (§4.5.3): SS on each document's list in turn. The thesis calls
//!   SS once per list, so the fill phase and the byte counts start afresh for each document.
//!
//! The secure-only system's batch algorithms are the same with one segment per document.

use std::fmt;
use std::str::FromStr;

use crate::plan::{Piece, Plan};
use crate::split::{even_split_into, least_loaded, segment_split_into, ParseSplitError};

/// Which batch split a sender uses; the receiver must be told the same one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BatchSplit {
    /// Channels ask for the next fixed-size chunk when they are free ([`crate::chunk`]).
    #[default]
    Dynamic,
    /// BFS (§4.5.1): [`batch_file_split`].
    File,
    /// BES (§4.5.2): [`batch_even_split`].
    Even,
    /// BSS (§4.5.3): [`batch_segment_split`].
    Segment,
}

impl BatchSplit {
    /// The names accepted by [`FromStr`], in declaration order.
    pub(crate) const NAMES: [&'static str; 4] = ["dynamic", "file", "even", "segment"];

    /// The recomputable plan for `docs` over `k` channels, or `None` for
    /// [`BatchSplit::Dynamic`], whose assignment is only decided while sending.
    pub fn plan<D: AsRef<[u64]>>(self, docs: &[D], k: usize) -> Option<Plan> {
        match self {
            BatchSplit::Dynamic => None,
            BatchSplit::File => Some(batch_file_split(docs, k)),
            BatchSplit::Even => Some(batch_even_split(docs, k)),
            BatchSplit::Segment => Some(batch_segment_split(docs, k)),
        }
    }

    fn name(self) -> &'static str {
        match self {
            BatchSplit::Dynamic => "dynamic",
            BatchSplit::File => "file",
            BatchSplit::Even => "even",
            BatchSplit::Segment => "segment",
        }
    }
}

impl fmt::Display for BatchSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BatchSplit {
    type Err = ParseSplitError;

    fn from_str(s: &str) -> Result<BatchSplit, ParseSplitError> {
        match s {
            "dynamic" => Ok(BatchSplit::Dynamic),
            "file" => Ok(BatchSplit::File),
            "even" => Ok(BatchSplit::Even),
            "segment" => Ok(BatchSplit::Segment),
            _ => Err(ParseSplitError {
                input: s.to_owned(),
                expected: &BatchSplit::NAMES,
            }),
        }
    }
}

/// Document index as carried by a [`Piece`].
///
/// # Panics
///
/// With more than `u32::MAX` documents in one batch.
fn doc_index(d: usize) -> u32 {
    u32::try_from(d).expect("more than u32::MAX documents in one batch")
}

/// BFS (§4.5.1): each document's whole stream is one piece `(doc, 0, total)`.
///
/// Document `i < k` goes to channel `i` (an empty document still fills its channel), every later
/// document to the channel with the fewest bytes, ties to the lowest index. Empty documents
/// produce no piece. `k == 0` is treated as 1.
pub fn batch_file_split<D: AsRef<[u64]>>(docs: &[D], k: usize) -> Plan {
    let mut plan = Plan::new(k.max(1));
    let totals: Vec<u64> = docs
        .iter()
        .map(|d| d.as_ref().iter().fold(0u64, |t, &l| t.saturating_add(l)))
        .collect();
    let mut doc = 0usize;
    least_loaded(plan.channels.len(), &totals, |channel, len| {
        if len > 0 {
            plan.channels[channel].push(Piece {
                doc: doc_index(doc),
                offset: 0,
                len,
            });
        }
        doc += 1;
    });
    plan
}

/// BES (§4.5.2): [`even_split`](crate::split::even_split) of each document's list in turn.
/// `k == 0` is treated as 1.
pub fn batch_even_split<D: AsRef<[u64]>>(docs: &[D], k: usize) -> Plan {
    let mut plan = Plan::new(k.max(1));
    for (d, lens) in docs.iter().enumerate() {
        even_split_into(&mut plan, doc_index(d), lens.as_ref());
    }
    plan
}

/// BSS (§4.5.3): [`segment_split`](crate::split::segment_split) of each document's list in
/// turn, each with a fresh fill phase and byte count. `k == 0` is treated as 1.
pub fn batch_segment_split<D: AsRef<[u64]>>(docs: &[D], k: usize) -> Plan {
    let mut plan = Plan::new(k.max(1));
    for (d, lens) in docs.iter().enumerate() {
        segment_split_into(&mut plan, doc_index(d), lens.as_ref());
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::{even_split, segment_split};

    fn p(doc: u32, offset: u64, len: u64) -> Piece {
        Piece { doc, offset, len }
    }

    #[test]
    fn bfs_fill_phase_counts_empty_documents() {
        let docs: Vec<Vec<u64>> = vec![vec![5, 5], vec![], vec![0, 0], vec![3], vec![4]];
        let plan = batch_file_split(&docs, 3);
        // docs 0,1,2 fill channels 0,1,2 (1 and 2 with nothing); 3 -> ch1 (0 bytes, lowest);
        // 4 -> ch2 (0 bytes).
        assert_eq!(
            plan.channels,
            vec![vec![p(0, 0, 10)], vec![p(3, 0, 3)], vec![p(4, 0, 4)]]
        );
    }

    #[test]
    fn single_document_batches_match_the_single_document_splits() {
        let lens = [9u64, 0, 7, 3, 12];
        for k in 1..=5 {
            assert_eq!(batch_even_split(&[&lens[..]], k), even_split(&lens, k));
            assert_eq!(
                batch_segment_split(&[&lens[..]], k),
                segment_split(&lens, k)
            );
        }
    }

    #[test]
    fn secure_only_bfs_is_ss_over_documents() {
        // §4.5.1: "the secure-only system's BFS algorithm is identical to the SS algorithm".
        let docs = [[4u64], [9], [1], [0], [6], [2]];
        let sizes: Vec<u64> = docs.iter().map(|d| d[0]).collect();
        for k in 1..=4 {
            let bfs = batch_file_split(&docs, k);
            let ss = segment_split(&sizes, k);
            assert_eq!(bfs.channel_bytes(), ss.channel_bytes());
        }
    }

    #[test]
    fn batch_split_names_round_trip() {
        for s in [
            BatchSplit::Dynamic,
            BatchSplit::File,
            BatchSplit::Even,
            BatchSplit::Segment,
        ] {
            assert_eq!(s.to_string().parse::<BatchSplit>(), Ok(s));
        }
        assert!("bfs".parse::<BatchSplit>().is_err());
        assert_eq!(BatchSplit::Dynamic.plan(&[[1u64]], 2), None);
    }
}
