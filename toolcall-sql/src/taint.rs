//! The sources of a session's taint ([`TaintSource`]), as the `sources`
//! column of the row that marks the session in `toolcall_taint` holds
//! them: a JSON array, newest first, at most
//! [`MAX_SOURCES`], each
//! [`bounded`](TaintSource::bounded). `NULL` (a session marked by a
//! process at schema version 9) holds none.
//!
//! A store reads the column with the row locked (in the transaction that
//! marks the session), adds the new source with [`added`] and writes it
//! back, so that two sources added at once are both kept.

use toolcall_ledger::provenance::{MAX_SOURCES, keep};
use toolcall_ledger::store::{StoreError, TaintSource};

/// The sources a `sources` column holds (`None`: `NULL`), newest first,
/// at most [`MAX_SOURCES`].
pub fn sources(column: Option<&str>) -> Result<Vec<TaintSource>, StoreError> {
    let Some(text) = column else {
        return Ok(Vec::new());
    };
    let mut sources: Vec<TaintSource> = serde_json::from_str(text).map_err(StoreError::new)?;
    sources.truncate(MAX_SOURCES);
    Ok(sources)
}

/// The `sources` column with `source` added to what it held (`column`):
/// the new one first, bounded, then the newest of the others.
pub fn added(column: Option<&str>, source: &TaintSource) -> Result<String, StoreError> {
    // A column this version cannot read is replaced, not kept: the new
    // source is what the person must see, and the taint itself (the mark)
    // does not depend on it.
    let mut kept = sources(column).unwrap_or_default();
    keep(&mut kept, source);
    serde_json::to_string(&kept).map_err(StoreError::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_sources_are_kept_and_a_null_column_holds_none() {
        assert!(sources(None).unwrap().is_empty());
        let mut column: Option<String> = None;
        for at in 0..6u64 {
            let source = TaintSource::from_output("t", None, at, &json!({"a": "b"}), &[]);
            column = Some(added(column.as_deref(), &source).unwrap());
        }
        let kept: Vec<u64> = sources(column.as_deref())
            .unwrap()
            .iter()
            .map(|s| s.at_ms)
            .collect();
        assert_eq!(kept, [5, 4, 3, 2]);
        let source = TaintSource::from_output("t", None, 9, &json!({"a": "b"}), &[]);
        let replaced = added(Some("not json"), &source).unwrap();
        assert_eq!(sources(Some(&replaced)).unwrap(), [source]);
        assert!(sources(Some("not json")).is_err());
    }
}
