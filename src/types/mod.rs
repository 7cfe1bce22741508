//! Value types of the keyspace with their compact encodings. They know nothing of commands,
//! clients or replies; commands drive them through plain methods.

pub mod bits;
pub mod hll;
pub mod string;

pub use string::RStr;

/// A value stored under a key. Kept at 16 bytes so a keyspace entry stays small: collections
/// live behind one pointer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(RStr),
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
        }
    }

    /// The name OBJECT ENCODING replies with.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding_name(),
        }
    }

    pub fn as_str(&self) -> Option<&RStr> {
        match self {
            Value::Str(s) => Some(s),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn value_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<super::Value>(), 16);
    }
}
