//! The keyspace hash table: key bytes → `V`, with a per-entry access clock (LRU seconds) for
//! OBJECT IDLETIME, cursor SCAN and random sampling.
//!
//! PLACEHOLDER IMPLEMENTATION over std HashMap: SCAN returns everything in one call. To be
//! replaced by the compact chained table with incremental rehash (ARCHITECTURE.md section 6).

use std::collections::HashMap;

pub struct Table<V> {
    map: HashMap<Box<[u8]>, (V, u32), foldhash::fast::RandomState>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Table { map: HashMap::default() }
    }
}

impl<V> Table<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.map.get_mut(key).map(|(v, _)| v)
    }

    /// Looks up `key` and stamps its access clock.
    pub fn get_touch(&mut self, key: &[u8], clock: u32) -> Option<&mut V> {
        self.map.get_mut(key).map(|(v, c)| {
            *c = clock;
            v
        })
    }

    /// The access clock stamped by the last `get_touch` or insert.
    pub fn clock(&self, key: &[u8]) -> Option<u32> {
        self.map.get(key).map(|(_, c)| *c)
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V, clock: u32) -> Option<V> {
        if let Some(slot) = self.map.get_mut(key) {
            slot.1 = clock;
            return Some(std::mem::replace(&mut slot.0, value));
        }
        self.map.insert(key.into(), (value, clock));
        None
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.map.remove(key).map(|(v, _)| v)
    }

    /// Visits some entries starting at `cursor` and returns the next cursor (0 when done). Every
    /// key present for the whole iteration is visited at least once.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        if cursor == 0 {
            for (k, (v, _)) in &self.map {
                f(k, v);
            }
        }
        0
    }

    /// A uniformly-ish random entry.
    pub fn random(&self) -> Option<(&[u8], &V)> {
        if self.map.is_empty() {
            return None;
        }
        let n = fastrand::usize(..self.map.len());
        self.map.iter().nth(n).map(|(k, (v, _))| (&k[..], v))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.map.iter().map(|(k, (v, _))| (&k[..], v))
    }

    /// Removes every entry and hands them back (so a big table can be dropped elsewhere).
    pub fn take(&mut self) -> Table<V> {
        std::mem::take(self)
    }
}
