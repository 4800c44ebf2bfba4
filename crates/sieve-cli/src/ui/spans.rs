//! The marking page's classified ranges: what the policy found, edited by hand.
//!
//! A sorted list of disjoint labelled segments. Marking a range lays a `manual` segment over
//! it; unmarking cuts it out of whatever segments it crosses. The ranges file merges touching
//! segments whatever their labels.

use std::ops::Range;

/// A classified segment and who classified it (detector names, or `manual`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Seg {
    pub start: u64,
    pub end: u64,
    pub label: String,
}

#[derive(Debug, Clone, Default)]
pub struct Spans {
    segs: Vec<Seg>,
}

impl Spans {
    pub fn from_segs(mut segs: Vec<Seg>) -> Spans {
        segs.retain(|s| s.end > s.start);
        segs.sort_by_key(|s| s.start);
        let mut out = Spans::default();
        for s in segs {
            out.mark(s.start..s.end, &s.label);
        }
        out
    }

    /// Classify `r`, labelled `label`.
    pub fn mark(&mut self, r: Range<u64>, label: &str) {
        if r.is_empty() {
            return;
        }
        self.unmark(r.clone());
        let at = self.segs.partition_point(|s| s.end <= r.start);
        self.segs.insert(
            at,
            Seg {
                start: r.start,
                end: r.end,
                label: label.to_string(),
            },
        );
        // Join with touching neighbours of the same label.
        if at + 1 < self.segs.len()
            && self.segs[at + 1].start == r.end
            && self.segs[at + 1].label == label
        {
            self.segs[at].end = self.segs[at + 1].end;
            self.segs.remove(at + 1);
        }
        if at > 0 && self.segs[at - 1].end == r.start && self.segs[at - 1].label == label {
            self.segs[at - 1].end = self.segs[at].end;
            self.segs.remove(at);
        }
    }

    /// Stop classifying `r`.
    pub fn unmark(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        let a = self.segs.partition_point(|s| s.end <= r.start);
        let mut b = a;
        while b < self.segs.len() && self.segs[b].start < r.end {
            b += 1;
        }
        let mut keep = Vec::new();
        for s in &self.segs[a..b] {
            if s.start < r.start {
                keep.push(Seg {
                    end: r.start,
                    ..s.clone()
                });
            }
            if s.end > r.end {
                keep.push(Seg {
                    start: r.end,
                    ..s.clone()
                });
            }
        }
        self.segs.splice(a..b, keep);
    }

    /// Segments overlapping `r`.
    pub fn within(&self, r: Range<u64>) -> &[Seg] {
        let a = self.segs.partition_point(|s| s.end <= r.start);
        let b = self.segs.partition_point(|s| s.start < r.end);
        &self.segs[a..b.max(a)]
    }

    /// The ranges a ranges file holds: touching segments merged.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        for s in &self.segs {
            match out.last_mut() {
                Some(l) if l.end == s.start => l.end = s.end,
                _ => out.push(s.start..s.end),
            }
        }
        out
    }

    pub fn classified(&self) -> u64 {
        self.segs.iter().map(|s| s.end - s.start).sum()
    }

    pub fn len(&self) -> usize {
        self.segs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Marking and unmarking agree with a byte map of the document.
        #[test]
        fn edits_agree_with_a_byte_map(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..64), 0..40)) {
            let mut s = Spans::default();
            let mut bytes = [false; 64];
            for (mark, a, b) in ops {
                let r = a.min(b)..a.max(b);
                if mark { s.mark(r.clone(), "manual") } else { s.unmark(r.clone()) }
                for i in r { bytes[i as usize] = mark; }
            }
            let mut want: Vec<Range<u64>> = Vec::new();
            for (i, &on) in bytes.iter().enumerate() {
                let i = i as u64;
                if on {
                    match want.last_mut() {
                        Some(l) if l.end == i => l.end = i + 1,
                        _ => want.push(i..i + 1),
                    }
                }
            }
            prop_assert_eq!(s.ranges(), want);
            prop_assert_eq!(s.classified(), bytes.iter().filter(|&&b| b).count() as u64);
        }
    }

    #[test]
    fn labels_survive_partial_unmarking() {
        let mut s = Spans::from_segs(vec![Seg {
            start: 10,
            end: 20,
            label: "email".into(),
        }]);
        s.unmark(12..15);
        s.mark(30..32, "manual");
        let got: Vec<(u64, u64, &str)> = s
            .within(0..100)
            .iter()
            .map(|x| (x.start, x.end, x.label.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![(10, 12, "email"), (15, 20, "email"), (30, 32, "manual")]
        );
        assert_eq!(s.within(16..31).len(), 2);
        assert!(s.within(20..30).is_empty());
    }
}
