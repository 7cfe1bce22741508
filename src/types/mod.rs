//! Value types of the keyspace with their compact encodings. They know nothing of commands,
//! clients or replies; commands drive them through plain methods.

pub mod bits;
pub mod cow;
pub mod geohash;
pub mod hash;
pub mod hll;
pub mod list;
pub mod segvec;
pub mod set;
mod slot_index;
pub mod sort;
pub mod stream;
pub mod string;
pub mod table;
pub mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::Stream;
pub use string::RStr;
pub use zset::ZSet;

/// A value stored under a key. Kept at 16 bytes so a keyspace entry stays small: collections
/// live behind one pointer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(RStr),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// Bytes of heap a collection holds, its own allocation included (MEMORY USAGE's figure;
    /// strings are sized by their caller, which knows Redis's string encodings).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(_) => 0,
            Value::List(l) => std::mem::size_of::<List>() + l.allocated_bytes(),
            Value::Hash(h) => std::mem::size_of::<Hash>() + h.heap_bytes(),
            Value::Set(s) => std::mem::size_of::<Set>() + s.heap_bytes(),
            Value::ZSet(z) => std::mem::size_of::<ZSet>() + z.heap_bytes(),
            Value::Stream(s) => std::mem::size_of::<Stream>() + s.alloc_bytes(),
        }
    }

    /// How many allocations freeing the value costs, roughly (Redis's lazyfreeGetFreeEffort).
    pub fn free_effort(&self) -> usize {
        self.element_count()
    }

    /// The collection's element count (a stream's entries); 1 for a string.
    pub fn element_count(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::Stream(s) => s.len() as usize,
        }
    }

    /// One incremental rehash step of a collection's hash table while it resizes (Redis steps
    /// a resizing dict on every lookup; the keyspace lookups call this).
    pub fn rehash_step(&mut self) {
        match self {
            Value::Hash(h) => {
                h.rehash_step();
            }
            Value::Set(s) => {
                s.rehash_step();
            }
            Value::ZSet(z) => {
                z.rehash_step();
            }
            Value::Str(_) | Value::List(_) | Value::Stream(_) => {}
        }
    }

    /// The name OBJECT ENCODING replies with.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding_name(),
            Value::List(l) => l.encoding_name(),
            Value::Hash(h) => h.encoding_name(),
            Value::Set(s) => s.encoding_name(),
            Value::ZSet(z) => z.encoding_name(),
            Value::Stream(_) => "stream",
        }
    }

    pub fn as_str(&self) -> Option<&RStr> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// What Redis would spend on this value: a 16-byte object header, plus its string storage
/// (embedded with the header up to 44 bytes, separate beyond).
pub fn value_memory(v: &Value) -> usize {
    const ROBJ: usize = 16;
    match v.as_str() {
        Some(RStr::Int(_)) => ROBJ,
        Some(s) if v.encoding_name() == "embstr" => crate::util::alloc::size_class(ROBJ + 3 + s.len() + 1),
        Some(RStr::Raw(b)) => ROBJ + crate::util::alloc::sds_alloc(b.capacity().max(b.len())),
        Some(s) => ROBJ + crate::util::alloc::sds_alloc(s.len()),
        None => ROBJ + v.heap_bytes(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn value_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<super::Value>(), 16);
    }
}
