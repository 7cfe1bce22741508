//! The Hash value type and its encodings. (Created empty: the hash family fills it in.)

/// A Redis hash.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hash {}

impl Hash {
    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }
}
