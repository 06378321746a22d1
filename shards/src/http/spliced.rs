//! A response body that points into a buffer it did not copy.
//!
//! Why: a huge answer is mostly bytes the handler already holds in one
//! shared buffer (a pop's payloads, as PostgreSQL sent them). Copying them
//! into the body held them twice while the answer was written. Here the
//! body is the handler's own framing text, with ranges of the shared buffer
//! spliced in at given offsets; the connection writes the pieces in order.

use std::ops::Range;
use std::sync::Arc;

/// A buffer a body may point into.
pub type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The framing text, and the ranges of `source` spliced into it.
#[derive(Clone)]
pub struct Spliced {
    /// Everything that is not spliced, in order.
    text: Vec<u8>,
    /// The buffer the splices point into.
    source: Shared,
    /// (offset in `text`, range of `source`), offsets ascending.
    splices: Vec<(usize, Range<usize>)>,
}

impl Spliced {
    /// An empty body splicing from `source`, with room for `text_capacity`
    /// bytes of framing.
    pub fn new(source: Shared, text_capacity: usize) -> Spliced {
        Spliced {
            text: Vec::with_capacity(text_capacity),
            source,
            splices: Vec::new(),
        }
    }

    /// The framing text so far; append to it.
    pub fn text(&mut self) -> &mut Vec<u8> {
        &mut self.text
    }

    /// Appends `range` of the source at the current end. A range outside
    /// the source is clamped to it (nothing is read past its end).
    pub fn splice(&mut self, range: Range<usize>) {
        let total = (*self.source).as_ref().len();
        let range = range.start.min(total)..range.end.min(total).max(range.start.min(total));
        if !range.is_empty() {
            self.splices.push((self.text.len(), range));
        }
    }

    /// Length on the wire.
    pub fn len(&self) -> usize {
        self.text.len() + self.splices.iter().map(|(_, r)| r.len()).sum::<usize>()
    }

    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces in wire order.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        let source = (*self.source).as_ref();
        let mut at = 0;
        let mut out = Vec::with_capacity(self.splices.len() * 2 + 1);
        for (pos, range) in &self.splices {
            out.push(&self.text[at..*pos]);
            out.push(&source[range.clone()]);
            at = *pos;
        }
        out.push(&self.text[at..]);
        out.into_iter().filter(|p| !p.is_empty())
    }

    /// The whole body in one buffer (tests, small writes).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        for p in self.pieces() {
            v.extend_from_slice(p);
        }
        v
    }
}

impl std::fmt::Debug for Spliced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Spliced({} bytes, {} splices)",
            self.len(),
            self.splices.len()
        )
    }
}

impl PartialEq for Spliced {
    fn eq(&self, other: &Spliced) -> bool {
        self.to_vec() == other.to_vec()
    }
}

impl Eq for Spliced {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_interleave_text_and_splices_in_order() {
        let source: Shared = Arc::new(b"0123456789".to_vec());
        let mut s = Spliced::new(source, 16);
        s.text().extend_from_slice(b"[");
        s.splice(2..5);
        s.text().extend_from_slice(b",");
        s.splice(7..9);
        s.splice(0..1);
        s.text().extend_from_slice(b"]");
        assert_eq!(s.to_vec(), b"[234,780]");
        assert_eq!(s.len(), 9);
        assert_eq!(s.pieces().count(), 6);
    }

    #[test]
    fn a_range_past_the_source_is_clamped() {
        let source: Shared = Arc::new(b"abc".to_vec());
        let mut s = Spliced::new(source, 0);
        s.splice(1..10);
        s.splice(5..8);
        assert_eq!(s.to_vec(), b"bc");
        assert!(!s.is_empty());
    }
}
