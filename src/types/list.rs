//! The List value type and its encodings. (Created empty: the list family fills it in.)

/// A Redis list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List {}

impl List {
    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }
}
