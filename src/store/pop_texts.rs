//! The payload texts of one pop attempt, left where PostgreSQL put them.
//!
//! Why not copy each payload out into its own `String`: a pop's payloads
//! arrive in one result row (one `jsonb[]` column), and copying them out
//! held every payload twice until the answer was written; a pop of 10,000
//! messages of 1 KiB held 10 MiB of copies beside the row (issue 18: a
//! huge request may cost its size once). Here the row is kept, shared, until
//! the answer is written, and each message names its payload by a span of
//! the column's bytes. The blanks jsonb's output puts after `:` and `,` are
//! dropped while the answer is written ([`compact_into`]), except in an
//! answer big enough to point into the row instead of copying it
//! (`api::pop_answer::SPLICE_AT`), where they stay.

use postgres::types::{FromSql, Type};
use std::sync::Arc;

/// The version byte of jsonb's binary output format.
const JSONB_VERSION: u8 = 1;

/// Where one message's payload text lies in [`Texts`] (`start..end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonText {
    start: usize,
    end: usize,
}

impl JsonText {
    /// The text this span covers in `column` ([`Texts::bytes`], looked up
    /// once by a caller reading many spans); empty if it lies outside.
    pub fn in_column(self, column: &[u8]) -> &[u8] {
        column.get(self.start..self.end).unwrap_or_default()
    }

    /// Where the text lies in the column's bytes.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

/// The bytes a pop's [`JsonText`] spans point into: the result row's payload
/// column (or, in tests, any buffer).
#[derive(Clone)]
pub struct Texts(Arc<dyn AsRef<[u8]> + Send + Sync>);

impl Default for Texts {
    fn default() -> Texts {
        Texts(Arc::new(Vec::new()))
    }
}

impl std::fmt::Debug for Texts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Texts({} bytes)", self.bytes().len())
    }
}

impl PartialEq for Texts {
    fn eq(&self, other: &Texts) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Texts {}

impl Texts {
    /// Texts kept in `source` (the spans are then made against its bytes).
    pub fn new(source: impl AsRef<[u8]> + Send + Sync + 'static) -> Texts {
        Texts(Arc::new(source))
    }

    /// The buffer itself, shared (a body may point into it:
    /// `shards::http::Spliced`).
    pub fn shared(&self) -> Arc<dyn AsRef<[u8]> + Send + Sync> {
        self.0.clone()
    }

    /// All the bytes the spans point into.
    pub fn bytes(&self) -> &[u8] {
        (*self.0).as_ref()
    }

    /// The text `t` spans (empty if `t` is not one of these texts' spans).
    #[cfg(test)]
    pub fn get(&self, t: &JsonText) -> &[u8] {
        t.in_column(self.bytes())
    }

    /// The span of `text`, which must be a slice of [`Texts::bytes`].
    #[cfg(test)]
    pub fn span_of(&self, text: &[u8]) -> Option<JsonText> {
        span_in(self.bytes(), text)
    }
}

/// The span of `part` inside `whole`, when it lies inside.
fn span_in(whole: &[u8], part: &[u8]) -> Option<JsonText> {
    let base = whole.as_ptr() as usize;
    let start = (part.as_ptr() as usize).checked_sub(base)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(JsonText { start, end })
}

/// A column's bytes as PostgreSQL sent them (any type; decoded by the caller).
pub struct RawColumn<'a>(pub &'a [u8]);

impl<'a> FromSql<'a> for RawColumn<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawColumn(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// The spans of the elements of `column`, a binary `jsonb[]` (a NULL element
/// is `None`), each without jsonb's version byte.
pub fn jsonb_array_spans(
    column: &[u8],
) -> Result<Vec<Option<JsonText>>, Box<dyn std::error::Error + Sync + Send>> {
    use postgres::fallible_iterator::FallibleIterator;
    use postgres_protocol::types::array_from_sql;
    let array = array_from_sql(column)?;
    let mut values = array.values();
    let mut out = Vec::new();
    while let Some(v) = values.next()? {
        out.push(match v {
            None => None,
            Some(raw) => match raw.split_first() {
                Some((&JSONB_VERSION, text)) => {
                    Some(span_in(column, text).ok_or("jsonb element outside its column")?)
                }
                _ => return Err("unsupported jsonb binary version".into()),
            },
        });
    }
    Ok(out)
}

/// Appends `text` without the blanks between tokens (none inside strings is
/// touched), so it reads as compactly as `serde_json` writes. Works on
/// bytes: every byte JSON's structure uses is ASCII, and no byte of a
/// multi-byte UTF-8 sequence is.
pub fn compact_into(out: &mut Vec<u8>, text: &[u8]) {
    let (mut in_string, mut escaped) = (false, false);
    for &c in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
        } else if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            continue;
        }
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::types::{array_to_sql, ArrayDimension};

    fn compact(text: &str) -> String {
        let mut out = Vec::new();
        compact_into(&mut out, text.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn jsonb_text_loses_its_blanks_but_never_inside_strings() {
        assert_eq!(
            compact(r#"{"a": [1, 2], "b c": "x, \"y\": z", "d": {"e": null}}"#),
            r#"{"a":[1,2],"b c":"x, \"y\": z","d":{"e":null}}"#
        );
        assert_eq!(compact(r#""tab\\" , 1"#), r#""tab\\",1"#);
        assert_eq!(compact("{\"é\": \"ü ß\"}"), "{\"é\":\"ü ß\"}");
    }

    /// A binary `jsonb[]` as PostgreSQL sends it.
    fn jsonb_array(elems: &[Option<&str>]) -> Vec<u8> {
        let mut buf = bytes::BytesMut::new();
        let dims = [ArrayDimension {
            len: elems.len() as i32,
            lower_bound: 1,
        }];
        array_to_sql(
            dims,
            Type::JSONB.oid(),
            elems.iter(),
            |e, out| match e {
                None => Ok(postgres_protocol::IsNull::Yes),
                Some(t) => {
                    out.extend_from_slice(&[JSONB_VERSION]);
                    out.extend_from_slice(t.as_bytes());
                    Ok(postgres_protocol::IsNull::No)
                }
            },
            &mut buf,
        )
        .unwrap();
        buf.to_vec()
    }

    #[test]
    fn array_elements_are_spans_of_the_column_itself() {
        let texts = Texts::new(jsonb_array(&[Some(r#"{"k": "v"}"#), None, Some("[1, 2]")]));
        let spans = jsonb_array_spans(texts.bytes()).unwrap();
        assert_eq!(spans.len(), 3);
        assert_eq!(texts.get(&spans[0].unwrap()), br#"{"k": "v"}"#);
        assert_eq!(spans[1], None);
        assert_eq!(texts.get(&spans[2].unwrap()), b"[1, 2]");
    }

    #[test]
    fn a_wrong_version_byte_or_a_foreign_slice_is_refused() {
        let mut column = jsonb_array(&[Some("{}")]);
        let at = column.len() - 3; // the element's version byte
        column[at] = 2;
        assert!(jsonb_array_spans(&column).is_err());
        let texts = Texts::new(b"abc".to_vec());
        assert_eq!(texts.span_of(b"abc"), None);
        let inside = &texts.bytes()[1..];
        assert_eq!(texts.get(&texts.span_of(inside).unwrap()), b"bc");
    }
}
