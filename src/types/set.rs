//! The Set value type and its encodings. (Created empty: the set family fills it in.)

/// A Redis set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Set {}

impl Set {
    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }
}
