//! The ZSet value type and its encodings. (Created empty: the zset family fills it in.)

/// A Redis zset.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZSet {}

impl ZSet {
    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }
}
