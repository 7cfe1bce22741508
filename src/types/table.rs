//! The keyspace hash table: key bytes → `V`, with a per-entry access clock (LRU seconds) for
//! OBJECT IDLETIME, cursor SCAN and random sampling.
//!
//! Layout (ARCHITECTURE.md section 6, "memory is a feature"): chained buckets in power-of-two
//! arrays, and one heap allocation per entry holding the chain pointer, the value, a small header
//! (access clock, key length) and the key bytes inline. With a 16-byte `Value` and a 16-byte key
//! that is exactly 48 bytes (a jemalloc size class), plus one 8-byte bucket slot per key.
//!
//! Growth and shrinking never stop the world: like Redis's dict, two bucket arrays coexist while
//! resizing and every mutating operation (plus `rehash_step`, for the cron) moves a bounded number
//! of buckets from the old array to the new one. SCAN uses Redis's reverse-binary cursor over the
//! bucket index, visiting the small and the big array during a resize, so a full iteration sees
//! every key present throughout even while the table grows or shrinks.

use std::alloc::{self, Layout};
use std::hash::{BuildHasher, Hasher};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The hasher used unless a table is built with another: seeded randomly per table from a
/// per-process random seed, so bucket placement cannot be predicted by clients.
pub type DefaultHashBuilder = foldhash::quality::RandomState;

/// Buckets of a table's first array.
const INITIAL_SIZE: usize = 4;
/// Below this fill percentage a table shrinks (Redis's HASHTABLE_MIN_FILL).
const MIN_FILL_PERCENT: usize = 10;
/// When resizing is discouraged (a fork child is writing a snapshot), a table still grows once
/// it holds this many keys per bucket (Redis's dict_force_resize_ratio).
pub const FORCE_RESIZE_RATIO: usize = 5;
/// Empty buckets one rehash step may skip per bucket of budget.
const EMPTY_VISITS_PER_STEP: usize = 10;
/// Buckets moved by each mutating operation during a resize. More than one so a resize always
/// finishes before the next one is due, even under pure inserts.
const STEPS_PER_OP: usize = 2;

/// Tables with fewer buckets are not prefetched for: their slots and entries (a few MiB at most)
/// mostly stay in the CPU's caches, and the hint would only cost the key's hashing.
const PREFETCH_MIN_BUCKETS: usize = 1 << 16;

static RESIZE_ALLOWED: AtomicBool = AtomicBool::new(true);

/// maxmemory (0: none), published by the executor: a table does not grow past it while its load
/// stays at most MAX_LOAD_PER_MILLE (Redis 7.0's dictExpandAllowed), so a bucket array doubling
/// does not push the server over maxmemory by itself.
static MAXMEMORY: AtomicU64 = AtomicU64::new(0);
/// Redis's HASHTABLE_MAX_LOAD_FACTOR (1.618), in keys per thousand buckets.
const MAX_LOAD_PER_MILLE: usize = 1618;

pub fn set_maxmemory(limit: u64) {
    MAXMEMORY.store(limit, Ordering::Relaxed);
}

/// Whether a table holding `used` keys in `size` buckets may allocate `more` bytes to grow.
fn growth_allowed(used: usize, size: usize, more: usize) -> bool {
    let limit = MAXMEMORY.load(Ordering::Relaxed);
    if limit == 0 || used * 1000 > size * MAX_LOAD_PER_MILLE {
        return true;
    }
    crate::alloc::used().is_none_or(|now| now + more as u64 <= limit)
}

/// Allows or discourages resizing every table (Redis's dictSetResizeEnabled): while a fork child
/// shares the parent's pages, moving entries around only costs copy-on-write memory.
pub fn set_resize_allowed(allowed: bool) {
    RESIZE_ALLOWED.store(allowed, Ordering::Relaxed);
}

/// One entry. The key bytes follow the struct in the same allocation (`klen` of them), so the
/// struct is `repr(C)` and only ever handled through a raw pointer.
///
/// Each entry also carries a 24-bit tag that costs no byte: its low 8 bits sit in the top byte
/// of `clock` (the access field is 24 bits, Redis's LRU/LFU width), its high 16 bits in the top
/// of `next` (see `Link`). An index kept beside the table (the cluster's keys per slot) stores
/// there where it holds the entry, so it can drop it without a search.
#[repr(C)]
struct Node<V> {
    next: Link<V>,
    value: V,
    /// 24-bit LRU clock of the last access (OBJECT IDLETIME), under 8 bits of the tag.
    clock: u32,
    klen: u32,
}

/// Bits of an access clock; the byte above holds part of the entry's tag.
const CLOCK_MASK: u32 = 0x00ff_ffff;
/// Bits of an entry's tag (`Table::entry_tag`).
pub const TAG_BITS: u32 = 24;
/// Address bits of a pointer kept in a `Link`: 64-bit Linux hands user space addresses below
/// 2^47 (x86-64) or 2^48 (aarch64) unless a mapping asks for more, which no allocator here does.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: usize = (1 << ADDR_BITS) - 1;
const _: () = assert!(usize::BITS == 64, "the table keeps tag bits above 48-bit addresses");

/// A chain pointer with 16 tag bits above its 48 address bits. Read only through `ptr`, which
/// masks them (a tagged null must still read as the chain's end).
#[repr(transparent)]
struct Link<V>(*mut Node<V>);

impl<V> Link<V> {
    fn ptr(&self) -> *mut Node<V> {
        self.0.map_addr(|a| a & ADDR_MASK)
    }

    /// Points the link at `to` (an untagged pointer), keeping the tag.
    fn set_ptr(&mut self, to: *mut Node<V>) {
        let tag = self.0.addr() & !ADDR_MASK;
        self.0 = to.map_addr(|a| a | tag);
    }

    fn tag(&self) -> u32 {
        (self.0.addr() >> ADDR_BITS) as u32
    }

    fn set_tag(&mut self, tag: u32) {
        self.0 = self.0.map_addr(|a| (a & ADDR_MASK) | ((tag as usize & 0xffff) << ADDR_BITS));
    }
}

/// The tag of a live node.
///
/// # Safety
/// `node` must be live.
unsafe fn node_tag<V>(node: *const Node<V>) -> u32 {
    // SAFETY: per the contract.
    unsafe { ((*node).clock >> 24) | ((*node).next.tag() << 8) }
}

/// Sets the tag of a live node (its low `TAG_BITS` bits).
///
/// # Safety
/// `node` must be live and not otherwise borrowed.
unsafe fn set_node_tag<V>(node: *mut Node<V>, tag: u32) {
    // SAFETY: per the contract.
    unsafe {
        (*node).clock = ((*node).clock & CLOCK_MASK) | ((tag & 0xff) << 24);
        (*node).next.set_tag(tag >> 8);
    }
}

/// Replaces a node's access clock, keeping its tag.
///
/// # Safety
/// `node` must be live and not otherwise borrowed.
unsafe fn set_node_clock<V>(node: *mut Node<V>, clock: u32) {
    // SAFETY: per the contract.
    unsafe { (*node).clock = ((*node).clock & !CLOCK_MASK) | (clock & CLOCK_MASK) }
}

/// Offset of the key bytes inside a node allocation.
const fn key_offset<V>() -> usize {
    std::mem::size_of::<Node<V>>()
}

fn node_layout<V>(klen: usize) -> Layout {
    // The size cannot overflow: klen fits in u32 (checked by the caller) and the header is small.
    match Layout::from_size_align(key_offset::<V>() + klen, std::mem::align_of::<Node<V>>()) {
        Ok(l) => l.pad_to_align(),
        Err(_) => alloc::handle_alloc_error(Layout::new::<Node<V>>()),
    }
}

/// Allocates a node holding `key` and `value`.
fn alloc_node<V>(key: &[u8], value: V, clock: u32, next: *mut Node<V>) -> NonNull<Node<V>> {
    // Keys are bounded by proto-max-bulk-len, far below 4 GiB; a longer one is a bug upstream.
    let klen = u32::try_from(key.len()).expect("key longer than 4 GiB");
    let layout = node_layout::<V>(key.len());
    // SAFETY: the layout has a non-zero size (the header alone is at least a pointer wide).
    let raw = unsafe { alloc::alloc(layout) } as *mut Node<V>;
    let Some(node) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
    if raw.addr() & !ADDR_MASK != 0 {
        // Not on the platforms this builds for (see ADDR_BITS): the chains could not be read.
        eprintln!("the allocator returned an address above 2^48; the key table cannot link it");
        std::process::abort();
    }
    // SAFETY: `node` is a fresh allocation of `layout`, which is aligned for `Node<V>` and
    // large enough for the header plus `klen` bytes at `key_offset`; the key source cannot
    // overlap a fresh allocation.
    unsafe {
        node.as_ptr().write(Node { next: Link(next), value, clock: clock & CLOCK_MASK, klen });
        ptr::copy_nonoverlapping(key.as_ptr(), (raw as *mut u8).add(key_offset::<V>()), key.len());
    }
    node
}

/// Frees a node, handing back its value.
///
/// # Safety
/// `node` must come from `alloc_node`, be unlinked from every chain and not be used again.
unsafe fn free_node<V>(node: *mut Node<V>) -> V {
    // SAFETY: per the contract the node is live and owned by the caller; its layout is recomputed
    // from the stored key length exactly as it was allocated.
    unsafe {
        let layout = node_layout::<V>((*node).klen as usize);
        let value = ptr::read(&(*node).value);
        alloc::dealloc(node as *mut u8, layout);
        value
    }
}

/// The key bytes of a live node.
///
/// # Safety
/// `node` must be live for `'a`.
unsafe fn node_key<'a, V>(node: *const Node<V>) -> &'a [u8] {
    // SAFETY: a live node has `klen` initialised key bytes at `key_offset`.
    unsafe { std::slice::from_raw_parts((node as *const u8).add(key_offset::<V>()), (*node).klen as usize) }
}

/// Nodes in the chain starting at `head`.
fn chain_len<V>(mut node: *mut Node<V>) -> usize {
    let mut n = 0;
    while !node.is_null() {
        n += 1;
        // SAFETY: chains link live nodes owned by their table, ending in null.
        node = unsafe { (*node).next.ptr() };
    }
    n
}

/// A handle to one entry of a table: its node's address, which stays put while the entry lives
/// (resizing relinks nodes, never moves them; replacing a value writes in place). Indexes kept
/// beside a table (the cluster's keys per hash slot) hold these to reach an entry's key without
/// copying it (`addr` packs one in 6 bytes). Comparing handles is safe at any time; reading through one is
/// only while the entry is still in its table (see `Table::entry_key`).
pub struct EntryRef<V>(NonNull<Node<V>>);

impl<V> Clone for EntryRef<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for EntryRef<V> {}
impl<V> PartialEq for EntryRef<V> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<V> Eq for EntryRef<V> {}
impl<V> EntryRef<V> {
    /// The handle as an address (exposed, so `from_addr` may turn it back into a handle).
    pub fn addr(self) -> usize {
        self.0.as_ptr().expose_provenance()
    }

    /// The handle whose `addr` was `addr` (None for 0). Only as good as the handle it came
    /// from: reading through it still needs the entry to be in its table.
    pub fn from_addr(addr: usize) -> Option<Self> {
        NonNull::new(ptr::with_exposed_provenance_mut(addr)).map(EntryRef)
    }
}
impl<V> std::fmt::Debug for EntryRef<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EntryRef({:p})", self.0)
    }
}
// SAFETY: a handle is an address; it is only dereferenced through `Table::entry_key`, which
// borrows the table owning the node, so moving or sharing handles between threads adds nothing
// beyond what moving or sharing the table allows.
unsafe impl<V: Send> Send for EntryRef<V> {}
// SAFETY: as above.
unsafe impl<V: Sync> Sync for EntryRef<V> {}

/// Whether tables may start a resize now (false while a fork child shares the pages).
pub fn resize_allowed() -> bool {
    RESIZE_ALLOWED.load(Ordering::Relaxed)
}

/// Appends one array's block of DEBUG HTSTATS (Redis 7.0's dictGetStats text) given the chain
/// length of each of its buckets, in order. Array 0 is the main one, array 1 the target of a
/// resize in progress. Other collections' tables report through this too, so every
/// HTSTATS block reads the same.
pub fn write_stats(out: &mut String, index: usize, chains: impl Iterator<Item = usize> + Clone) {
    use std::fmt::Write;
    let name = if index == 0 { "main hash table" } else { "rehashing target" };
    let _ = writeln!(out, "Hash table {index} stats ({name}):");
    let count: usize = chains.clone().sum();
    if count == 0 {
        out.push_str("No stats available for empty dictionaries\n");
        return;
    }
    const MAX_CHAIN: usize = 50;
    let mut histogram = [0usize; MAX_CHAIN];
    let (mut size, mut used_slots, mut max_chain) = (0usize, 0usize, 0usize);
    for len in chains {
        size += 1;
        histogram[len.min(MAX_CHAIN - 1)] += 1;
        if len > 0 {
            used_slots += 1;
            max_chain = max_chain.max(len);
        }
    }
    let _ = write!(
        out,
        " table size: {size}\n number of elements: {count}\n different slots: {used_slots}\n max chain length: {max_chain}\n avg chain length (counted): {:.2}\n avg chain length (computed): {:.2}\n Chain length distribution:\n",
        count as f64 / used_slots as f64,
        count as f64 / used_slots as f64
    );
    for (len, &n) in histogram.iter().enumerate() {
        if n > 0 {
            let _ = writeln!(out, "   {len}: {n} ({:.02}%)", n as f64 * 100.0 / size as f64);
        }
    }
}

/// One bucket array. An empty array (no allocation) has size 0.
struct Buckets<V> {
    slots: Box<[*mut Node<V>]>,
    used: usize,
}

impl<V> Buckets<V> {
    fn empty() -> Self {
        Buckets { slots: Box::new([]), used: 0 }
    }

    fn with_size(size: usize) -> Self {
        // Allocated zeroed rather than filled: a big array then comes straight from fresh zero
        // pages, with no up-front writing pass (that pass cost 0.4 s at 16M buckets).
        let Ok(layout) = Layout::array::<*mut Node<V>>(size) else {
            alloc::handle_alloc_error(Layout::new::<usize>());
        };
        if layout.size() == 0 {
            return Buckets::empty();
        }
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) } as *mut *mut Node<V>;
        if raw.is_null() {
            alloc::handle_alloc_error(layout);
        }
        // SAFETY: `raw` is a global-allocator allocation with exactly the layout a `Box<[_]>` of
        // `size` pointers uses, and all-zero bytes are valid (null) pointers.
        let slots = unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(raw, size)) };
        Buckets { slots, used: 0 }
    }

    fn size(&self) -> usize {
        self.slots.len()
    }

    /// Drops an emptied array, a big one on another thread (`util::bgfree`): a 64 MiB array's
    /// free purged pages on the executor for 2-3 ms.
    fn free_elsewhere(self) {
        debug_assert_eq!(self.used, 0, "only an emptied array holds no node");
        let raw = Box::into_raw(self.slots);
        // SAFETY: a slice of pointers and a slice of usize of the same length have the same
        // layout, so the allocation is freed with the layout it was made with; every slot is
        // null (no node is owned through it), and a usize is Send.
        let plain = unsafe { Box::from_raw(raw as *mut [usize]) };
        crate::util::bgfree::drop_big(plain);
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// Frees every node. Iterative, so long chains cannot overflow the stack.
    fn free_all(&mut self) {
        for slot in self.slots.iter_mut() {
            let mut node = std::mem::replace(slot, ptr::null_mut());
            while !node.is_null() {
                // SAFETY: every node reachable from a slot is live and owned by this array; it
                // is read before being freed and never reached again (the slot was cleared).
                unsafe {
                    let next = (*node).next.ptr();
                    drop(free_node(node));
                    node = next;
                }
            }
        }
        self.used = 0;
    }
}

/// The keyspace dict. `S` builds the key hasher (swappable, seeded per table by default).
pub struct Table<V, S = DefaultHashBuilder> {
    /// `ht[0]` is the live array; `ht[1]` is the target of a resize in progress.
    ht: [Buckets<V>; 2],
    /// Next bucket of `ht[0]` to move while resizing; `None` when not resizing.
    rehash_idx: Option<usize>,
    hasher: S,
    _owns: PhantomData<Box<V>>,
}

// SAFETY: a table exclusively owns every node it points to (nothing else holds the pointers), so
// sending or sharing it is exactly as safe as sending or sharing a `Box<V>`.
unsafe impl<V: Send, S: Send> Send for Table<V, S> {}
// SAFETY: as above; `&Table` only hands out `&V` and `&[u8]`.
unsafe impl<V: Sync, S: Sync> Sync for Table<V, S> {}

impl<V, S: Default> Default for Table<V, S> {
    fn default() -> Self {
        Table { ht: [Buckets::empty(), Buckets::empty()], rehash_idx: None, hasher: S::default(), _owns: PhantomData }
    }
}

impl<V, S> Drop for Table<V, S> {
    fn drop(&mut self) {
        self.ht[0].free_all();
        self.ht[1].free_all();
    }
}

/// Asks the CPU to start loading the cache line at `p` (a hint: it never faults, whatever `p`).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Reverses the bits of a cursor (SCAN walks bucket indexes in reverse-binary order).
fn rev(v: u64) -> u64 {
    v.reverse_bits()
}

impl<V> Table<V, DefaultHashBuilder> {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<V, S: BuildHasher + Default> Table<V, S> {
    /// An empty table hashing with `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        Table { ht: [Buckets::empty(), Buckets::empty()], rehash_idx: None, hasher, _owns: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.ht[0].used + self.ht[1].used
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a resize is in progress.
    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    /// Bucket slots currently allocated (both arrays during a resize).
    pub fn buckets(&self) -> usize {
        self.ht[0].size() + self.ht[1].size()
    }

    /// DEBUG HTSTATS's report of the bucket arrays, in Redis 7.0's dictGetStats words: for
    /// each array in use, its size, entries, used slots, chain lengths and their distribution.
    pub fn stats(&self) -> String {
        let mut out = String::new();
        for (i, ht) in self.ht.iter().enumerate() {
            if i == 1 && self.rehash_idx.is_none() {
                break;
            }
            write_stats(&mut out, i, ht.slots.iter().map(|&head| chain_len(head)));
        }
        out
    }

    /// Bytes one entry's allocation requests for a key of `key_len` bytes (MEMORY USAGE); the
    /// allocator may round it up to its size class.
    pub fn entry_bytes(key_len: usize) -> usize {
        node_layout::<V>(key_len).size()
    }

    fn hash(&self, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish() as usize
    }

    /// Starts loading, without waiting, what a lookup of `key` reads first: its bucket slot in
    /// each array in use. The executor calls it for the commands after the one it runs, so their
    /// cache misses (the slot of a big table is almost never cached) overlap with that command's
    /// work instead of adding to it, as Valkey 8 prefetches the keys of a batch.
    pub fn prefetch_slot(&self, key: &[u8]) {
        if self.buckets() < PREFETCH_MIN_BUCKETS {
            return;
        }
        let h = self.hash(key);
        for t in self.arrays() {
            prefetch(&t.slots[h & t.mask()]);
        }
    }

    /// The second step after `prefetch_slot`: the slot is loaded by now, so the first entry of
    /// its chain can be asked for too.
    pub fn prefetch_entry(&self, key: &[u8]) {
        if self.buckets() < PREFETCH_MIN_BUCKETS {
            return;
        }
        let h = self.hash(key);
        for t in self.arrays() {
            let node = t.slots[h & t.mask()];
            if !node.is_null() {
                prefetch(node);
            }
        }
    }

    /// The bucket arrays in use (both during a resize), skipping unallocated ones.
    fn arrays(&self) -> impl Iterator<Item = &Buckets<V>> {
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        self.ht[..tables].iter().filter(|t| t.size() > 0)
    }

    /// The node holding `key`, or null.
    fn find(&self, key: &[u8]) -> *mut Node<V> {
        if self.is_empty() {
            return ptr::null_mut();
        }
        self.find_hashed(self.hash(key), key)
    }

    /// `find` with the key's hash already computed.
    fn find_hashed(&self, h: usize, key: &[u8]) -> *mut Node<V> {
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        for t in &self.ht[..tables] {
            if t.size() == 0 {
                continue;
            }
            let mut node = t.slots[h & t.mask()];
            while !node.is_null() {
                // SAFETY: nodes reachable from the arrays are live while `self` is borrowed.
                unsafe {
                    if (*node).klen as usize == key.len() && node_key(node) == key {
                        return node;
                    }
                    node = (*node).next.ptr();
                }
            }
        }
        ptr::null_mut()
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let node = self.find(key);
        // SAFETY: a non-null result of `find` is live for the borrow of `self`.
        (!node.is_null()).then(|| unsafe { &(*node).value })
    }

    /// The key as stored and its value (the returned key lives as long as the entry).
    pub fn get_key_value(&self, key: &[u8]) -> Option<(&[u8], &V)> {
        let node = self.find(key);
        // SAFETY: a non-null result of `find` is live for the borrow of `self`.
        (!node.is_null()).then(|| unsafe { (node_key(node), &(*node).value) })
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        !self.find(key).is_null()
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.step_if_rehashing();
        let node = self.find(key);
        // SAFETY: a non-null result of `find` is live, and `&mut self` makes the access unique.
        (!node.is_null()).then(|| unsafe { &mut (*node).value })
    }

    /// Looks up `key` and stamps its access clock.
    pub fn get_touch(&mut self, key: &[u8], clock: u32) -> Option<&mut V> {
        self.get_touch_with(key, |_| clock)
    }

    /// Looks up `key` and replaces its access clock with `stamp(old clock)`.
    pub fn get_touch_with(&mut self, key: &[u8], stamp: impl FnOnce(u32) -> u32) -> Option<&mut V> {
        self.step_if_rehashing();
        let node = self.find(key);
        if node.is_null() {
            return None;
        }
        // SAFETY: `node` is live, and `&mut self` makes the access unique.
        unsafe {
            if RESIZE_ALLOWED.load(Ordering::Relaxed) {
                set_node_clock(node, stamp((*node).clock & CLOCK_MASK));
            }
            Some(&mut (*node).value)
        }
    }

    /// The access clock stamped by the last `get_touch` or insert.
    pub fn clock(&self, key: &[u8]) -> Option<u32> {
        let node = self.find(key);
        // SAFETY: a non-null result of `find` is live for the borrow of `self`.
        (!node.is_null()).then(|| unsafe { (*node).clock & CLOCK_MASK })
    }

    /// Sets the access clock of an existing key without reading it (RESTORE IDLETIME, loading).
    pub fn set_clock(&mut self, key: &[u8], clock: u32) -> bool {
        let node = self.find(key);
        if node.is_null() {
            return false;
        }
        // SAFETY: `node` is live, and `&mut self` makes the access unique.
        unsafe { set_node_clock(node, clock) };
        true
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V, clock: u32) -> Option<V> {
        self.insert_entry(key, value, clock).0
    }

    /// `insert`, also handing back the entry's handle (new or replaced in place).
    pub fn insert_entry(&mut self, key: &[u8], value: V, clock: u32) -> (Option<V>, EntryRef<V>) {
        self.step_if_rehashing();
        let h = self.hash(key);
        let node = self.find_hashed(h, key);
        if let Some(node) = NonNull::new(node) {
            // SAFETY: `node` is live, and `&mut self` makes the access unique.
            let old = unsafe {
                set_node_clock(node.as_ptr(), clock);
                std::mem::replace(&mut (*node.as_ptr()).value, value)
            };
            return (Some(old), EntryRef(node));
        }
        self.expand_if_needed();
        let t = &mut self.ht[if self.rehash_idx.is_some() { 1 } else { 0 }];
        let slot = &mut t.slots[h & t.mask()];
        let node = alloc_node(key, value, clock, *slot);
        *slot = node.as_ptr();
        t.used += 1;
        (None, EntryRef(node))
    }

    /// The handle of `key`'s entry.
    pub fn entry(&self, key: &[u8]) -> Option<EntryRef<V>> {
        NonNull::new(self.find(key)).map(EntryRef)
    }

    /// The key of the entry behind `entry`.
    ///
    /// # Safety
    /// `entry` must have come from this table and its entry must not have been removed since
    /// (nor the table taken, cleared or dropped).
    pub unsafe fn entry_key(&self, entry: EntryRef<V>) -> &[u8] {
        // SAFETY: per the contract the node is live for the borrow of `self`.
        unsafe { node_key(entry.0.as_ptr()) }
    }

    /// The tag of the entry behind `entry` (0 until set).
    ///
    /// # Safety
    /// As for `entry_key`.
    pub unsafe fn entry_tag(&self, entry: EntryRef<V>) -> u32 {
        // SAFETY: per the contract the node is live for the borrow of `self`.
        unsafe { node_tag(entry.0.as_ptr()) }
    }

    /// Sets the tag of the entry behind `entry` to the low `TAG_BITS` bits of `tag`.
    ///
    /// # Safety
    /// As for `entry_key`.
    pub unsafe fn set_entry_tag(&mut self, entry: EntryRef<V>, tag: u32) {
        // SAFETY: per the contract the node is live, and `&mut self` makes the access unique.
        unsafe { set_node_tag(entry.0.as_ptr(), tag) }
    }

    /// `remove`, also handing back the removed entry's handle (dangling now, good only for
    /// comparing with handles taken while it lived) and its tag.
    pub fn remove_entry(&mut self, key: &[u8]) -> Option<(V, EntryRef<V>, u32)> {
        self.step_if_rehashing();
        if self.is_empty() {
            return None;
        }
        let found = self.unlink_entry(key)?;
        self.shrink_if_sparse();
        Some(found)
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.step_if_rehashing();
        if self.is_empty() {
            return None;
        }
        let (value, _, _) = self.unlink_entry(key)?;
        self.shrink_if_sparse();
        Some(value)
    }

    /// Removes `key` without considering a shrink; hands back its value, (dangling) handle and tag.
    fn unlink_entry(&mut self, key: &[u8]) -> Option<(V, EntryRef<V>, u32)> {
        let h = self.hash(key);
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        for t in &mut self.ht[..tables] {
            if t.size() == 0 {
                continue;
            }
            let idx = h & t.mask();
            let mut prev: *mut Node<V> = ptr::null_mut();
            let mut node = t.slots[idx];
            // SAFETY: `prev` (null: the bucket slot) and `node` are consecutive live nodes of
            // this chain; unlinking rewrites the link to `node` before it is freed, so the chain
            // stays well formed and the freed node is never reached again.
            unsafe {
                while !node.is_null() {
                    if (*node).klen as usize == key.len() && node_key(node) == key {
                        let next = (*node).next.ptr();
                        if prev.is_null() {
                            t.slots[idx] = next;
                        } else {
                            (*prev).next.set_ptr(next);
                        }
                        t.used -= 1;
                        let handle = EntryRef(NonNull::new_unchecked(node));
                        let tag = node_tag(node);
                        return Some((free_node(node), handle, tag));
                    }
                    prev = node;
                    node = (*node).next.ptr();
                }
            }
        }
        None
    }

    /// Sizes an empty table for `n` keys up front (an RDB file's RESIZEDB hint); a no-op once
    /// the table holds anything. Callers cap `n`: it comes from a file.
    pub fn reserve_empty(&mut self, n: usize) {
        if self.is_empty() && self.rehash_idx.is_none() && n > self.ht[0].size() {
            self.ht[0] = Buckets::with_size(n.next_power_of_two());
        }
    }

    /// Starts a resize when the table is too full (Redis grows when keys ≥ buckets).
    fn expand_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        let size = self.ht[0].size();
        if size == 0 {
            self.ht[0] = Buckets::with_size(INITIAL_SIZE);
            return;
        }
        let used = self.ht[0].used;
        if used >= size && (RESIZE_ALLOWED.load(Ordering::Relaxed) || used / size > FORCE_RESIZE_RATIO) {
            let target = (used + 1).next_power_of_two();
            if growth_allowed(used, size, target * std::mem::size_of::<usize>()) {
                self.start_resize(target);
            }
        }
    }

    /// Starts shrinking when under 10% of the buckets are used (Redis's htNeedsResize). Called
    /// after removals; also callable from a cron. Returns whether a resize started.
    pub fn shrink_if_sparse(&mut self) -> bool {
        if self.rehash_idx.is_some() || !RESIZE_ALLOWED.load(Ordering::Relaxed) {
            return false;
        }
        let (size, used) = (self.ht[0].size(), self.ht[0].used);
        if size > INITIAL_SIZE && used * 100 < size * MIN_FILL_PERCENT {
            let target = used.max(INITIAL_SIZE).next_power_of_two();
            if target < size {
                self.start_resize(target);
                return true;
            }
        }
        false
    }

    fn start_resize(&mut self, size: usize) {
        if self.ht[0].used == 0 {
            // Nothing to move: swap the array in place.
            self.ht[0] = Buckets::with_size(size);
            return;
        }
        self.ht[1] = Buckets::with_size(size);
        self.rehash_idx = Some(0);
    }

    fn step_if_rehashing(&mut self) {
        // While a fork child shares our pages a resize in progress pauses (moving entries would
        // copy every page they sit on), unless the new array is already overfull, as Redis 7.2.
        if self.rehash_idx.is_some()
            && (RESIZE_ALLOWED.load(Ordering::Relaxed)
                || (self.ht[0].used + self.ht[1].used) / self.ht[1].size().max(1) > FORCE_RESIZE_RATIO)
        {
            self.rehash_step(STEPS_PER_OP);
        }
    }

    /// Moves up to `budget` non-empty buckets of a resize in progress (skipping at most ten empty
    /// buckets per unit of budget). Returns whether the resize still has work left. The cron calls
    /// this so an idle table finishes resizing too.
    pub fn rehash_step(&mut self, budget: usize) -> bool {
        let Some(mut idx) = self.rehash_idx else { return false };
        let mut empty_visits = budget.saturating_mul(EMPTY_VISITS_PER_STEP);
        let mut budget = budget;
        let [old, new] = &mut self.ht;
        while budget > 0 && old.used > 0 {
            // `used > 0` guarantees a non-empty bucket at or after `idx`.
            while old.slots[idx].is_null() {
                idx += 1;
                empty_visits -= 1;
                if empty_visits == 0 {
                    self.rehash_idx = Some(idx);
                    return true;
                }
            }
            let mut node = std::mem::replace(&mut old.slots[idx], ptr::null_mut());
            let mask = new.mask();
            while !node.is_null() {
                // SAFETY: the chain was detached from `old` above, so each node is owned here
                // until it is linked into `new`; `next` is read before being overwritten.
                unsafe {
                    let next = (*node).next.ptr();
                    let mut h = self.hasher.build_hasher();
                    h.write(node_key(node));
                    let slot = &mut new.slots[h.finish() as usize & mask];
                    (*node).next.set_ptr(*slot);
                    *slot = node;
                    node = next;
                }
                old.used -= 1;
                new.used += 1;
            }
            idx += 1;
            budget -= 1;
        }
        if old.used == 0 {
            let done = std::mem::replace(old, std::mem::replace(new, Buckets::empty()));
            done.free_elsewhere();
            self.rehash_idx = None;
            return false;
        }
        // The next step (the next write's) moves the chains that follow: their first entries
        // start loading now, so that step does not wait on each of them.
        for &head in old.slots[idx..].iter().take(2 * STEPS_PER_OP) {
            if !head.is_null() {
                prefetch(head);
            }
        }
        self.rehash_idx = Some(idx);
        true
    }

    /// Rehashes in steps of 100 buckets until done or `deadline` passes (Redis's
    /// activerehashing slice). Returns whether the resize still has work left.
    pub fn rehash_until(&mut self, deadline: std::time::Instant) -> bool {
        while self.rehash_step(100) {
            if std::time::Instant::now() >= deadline {
                return true;
            }
        }
        false
    }

    /// Calls `f` for every node of a chain.
    fn visit_chain(mut node: *mut Node<V>, f: &mut impl FnMut(&[u8], &V)) {
        while !node.is_null() {
            // SAFETY: chain nodes are live for the borrow of the table the caller holds.
            unsafe {
                f(node_key(node), &(*node).value);
                node = (*node).next.ptr();
            }
        }
    }

    /// Visits the chain of bucket `at` (under each array's mask) in each bucket array in use,
    /// both during a resize, as Redis's activeExpireCycle reads its expires table at a linear
    /// cursor. Returns the number of buckets looked at.
    pub fn visit_bucket(&self, at: u64, mut f: impl FnMut(&[u8], &V)) -> usize {
        let arrays = if self.rehash_idx.is_some() { 2 } else { 1 };
        let mut looked = 0;
        for t in &self.ht[..arrays] {
            if t.size() == 0 {
                continue;
            }
            looked += 1;
            Self::visit_chain(t.slots[(at & t.mask() as u64) as usize], &mut f);
        }
        looked
    }

    /// Visits some entries starting at `cursor` and returns the next cursor (0 when done). Every
    /// key present for the whole iteration is visited at least once (some may be visited twice
    /// if the table shrinks meanwhile).
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let mut v = cursor;
        if self.rehash_idx.is_none() {
            let t = &self.ht[0];
            let m0 = t.mask() as u64;
            Self::visit_chain(t.slots[(v & m0) as usize], &mut f);
            // Increment the masked bits from the top: set the unmasked ones so the carry of the
            // reversed increment runs through them.
            v |= !m0;
            return rev(rev(v).wrapping_add(1));
        }
        let (small, big) = if self.ht[0].size() <= self.ht[1].size() {
            (&self.ht[0], &self.ht[1])
        } else {
            (&self.ht[1], &self.ht[0])
        };
        let (m0, m1) = (small.mask() as u64, big.mask() as u64);
        Self::visit_chain(small.slots[(v & m0) as usize], &mut f);
        // Then every bucket of the big array that the small bucket expands into; the carry out of
        // the extra bits advances the small-array part of the cursor.
        loop {
            Self::visit_chain(big.slots[(v & m1) as usize], &mut f);
            v |= !m1;
            v = rev(rev(v).wrapping_add(1));
            if v & (m0 ^ m1) == 0 {
                return v;
            }
        }
    }

    /// The hash `key` is filed under (its bucket is the hash's low bits).
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        self.hash(key) as u64
    }

    /// The mask of the largest bucket array in use (0 when there is none): what a walk in
    /// bucket order (`visit_position`) takes as its fixed frame when it begins.
    pub fn walk_mask(&self) -> u64 {
        self.ht[0].size().max(self.ht[1].size()).saturating_sub(1) as u64
    }

    /// Visits every entry whose hash has a value in `from..to` under `mask` (a power of two less
    /// one, `to` at most `mask + 1`), by ascending value. Walking from 0 to `mask` with `mask` fixed meets every key present throughout exactly once,
    /// whatever the table's resizes meanwhile: an array at least that big holds them in buckets
    /// `at`, `at + mask + 1`, ...; a smaller one (the table shrank, or the small side of a
    /// resize) in bucket `at & its mask`, among others, told apart by their hash. In order of
    /// bucket index, so an unresized table is read sequentially (SCAN's reverse-binary order
    /// jumps across the bucket array: a cache miss per bucket, a walk of 1M keys three times as
    /// slow as reading them in order).
    pub fn visit_positions(&self, from: u64, to: u64, mask: u64, mut f: impl FnMut(&[u8], &V)) {
        // The common case, a table not resized since the walk began: a run of buckets.
        if self.rehash_idx.is_none() && self.ht[0].mask() as u64 == mask && self.ht[0].size() > 0 {
            for &head in &self.ht[0].slots[from as usize..to as usize] {
                Self::visit_chain(head, &mut f);
            }
            return;
        }
        for at in from..to {
            self.visit_position(at, mask, &mut f);
        }
    }

    fn visit_position(&self, at: u64, mask: u64, mut f: impl FnMut(&[u8], &V)) {
        let arrays = if self.rehash_idx.is_some() { 2 } else { 1 };
        for t in &self.ht[..arrays] {
            if t.size() == 0 {
                continue;
            }
            let tm = t.mask() as u64;
            if tm >= mask {
                let mut j = at;
                while j <= tm {
                    Self::visit_chain(t.slots[j as usize], &mut f);
                    j += mask + 1;
                }
            } else {
                Self::visit_chain(t.slots[(at & tm) as usize], &mut |k, v| {
                    if self.hash(k) as u64 & mask == at {
                        f(k, v)
                    }
                });
            }
        }
    }

    /// Up to `n` distinct entries from a random spot of the table, walking consecutive buckets
    /// (Redis's dictGetSomeKeys): cheap, not uniform; each with its access clock. The eviction
    /// pool samples with it.
    pub fn sample_entries(&self, n: usize, mut f: impl FnMut(&[u8], &V, u32)) {
        self.sample_nodes(n, |node| {
            // SAFETY: sampled nodes are live for the borrow of `self`.
            unsafe { f(node_key(node), &(*node).value, (*node).clock & CLOCK_MASK) }
        });
    }

    fn sample_nodes(&self, n: usize, mut f: impl FnMut(*mut Node<V>)) -> usize {
        let count = n.min(self.len());
        if count == 0 {
            return 0;
        }
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        let maxmask = self.ht[0].mask().max(if tables == 2 { self.ht[1].mask() } else { 0 });
        let rehash_idx = self.rehash_idx.unwrap_or(0);
        let mut i = fastrand::usize(..) & maxmask;
        // Nodes already reported: a walk may wrap around or jump onto buckets it already saw,
        // and each node must come out once. Samples are small, so a linear check is cheapest.
        let mut seen: Vec<*mut Node<V>> = Vec::with_capacity(count);
        let mut empty_run = 0;
        for _ in 0..count * 10 {
            for (t, b) in self.ht[..tables].iter().enumerate() {
                // Buckets of the old array below the rehash index are already moved; when the
                // new array is smaller too, skip ahead to the first unmoved bucket.
                if tables == 2 && t == 0 && i < rehash_idx {
                    if i >= self.ht[1].size() {
                        i = rehash_idx;
                    } else {
                        continue;
                    }
                }
                if i >= b.size() {
                    continue;
                }
                let mut node = b.slots[i];
                if node.is_null() {
                    empty_run += 1;
                    // Deletions after earlier samples leave long empty stretches: jump
                    // elsewhere rather than crawl through one (as dictGetSomeKeys does).
                    if empty_run >= 5 && empty_run > count {
                        i = fastrand::usize(..) & maxmask;
                        empty_run = 0;
                    }
                    continue;
                }
                empty_run = 0;
                while !node.is_null() && seen.len() < count {
                    if !seen.contains(&node) {
                        seen.push(node);
                        f(node);
                    }
                    // SAFETY: chain nodes are live for the borrow of `self`.
                    node = unsafe { (*node).next.ptr() };
                }
                if seen.len() == count {
                    return count;
                }
            }
            i = (i + 1) & maxmask;
        }
        seen.len()
    }

    /// A random entry, fair enough for RANDOMKEY: one picked uniformly from a sample of
    /// consecutive buckets (Redis's dictGetFairRandomKey), falling back to a random non-empty
    /// bucket.
    pub fn random(&self) -> Option<(&[u8], &V)> {
        if self.is_empty() {
            return None;
        }
        const SAMPLE: usize = 20;
        let mut picked = [ptr::null_mut(); SAMPLE];
        let mut n = 0;
        self.sample_nodes(SAMPLE, |node| {
            picked[n] = node;
            n += 1;
        });
        let node = if n > 0 { picked[fastrand::usize(..n)] } else { self.random_bucket_entry() };
        // SAFETY: both sources return live nodes of `self`.
        Some(unsafe { (node_key(node), &(*node).value) })
    }

    /// A random node from a random non-empty bucket. The table must not be empty.
    fn random_bucket_entry(&self) -> *mut Node<V> {
        let mut head;
        loop {
            head = match self.rehash_idx {
                None => self.ht[0].slots[fastrand::usize(..self.ht[0].size())],
                Some(r) => {
                    let (s0, s1) = (self.ht[0].size(), self.ht[1].size());
                    let i = fastrand::usize(r..s0 + s1);
                    if i >= s0 {
                        self.ht[1].slots[i - s0]
                    } else {
                        self.ht[0].slots[i]
                    }
                }
            };
            if !head.is_null() {
                break;
            }
        }
        let mut len = 0;
        let mut node = head;
        while !node.is_null() {
            len += 1;
            // SAFETY: chain nodes are live for the borrow of `self`.
            node = unsafe { (*node).next.ptr() };
        }
        node = head;
        for _ in 0..fastrand::usize(..len) {
            // SAFETY: as above; the walk stays within the chain's `len` nodes.
            node = unsafe { (*node).next.ptr() };
        }
        node
    }

    pub fn iter(&self) -> Iter<'_, V> {
        Iter { ht: [&self.ht[0].slots, &self.ht[1].slots], t: 0, idx: 0, node: ptr::null_mut(), left: self.len() }
    }

    /// Removes every entry and hands them back (so a big table can be dropped elsewhere).
    pub fn take(&mut self) -> Table<V, S> {
        std::mem::replace(self, Table::with_hasher(S::default()))
    }
}

/// Iterator over a table's entries in bucket order.
pub struct Iter<'a, V> {
    ht: [&'a [*mut Node<V>]; 2],
    t: usize,
    idx: usize,
    node: *mut Node<V>,
    left: usize,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a [u8], &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        while self.node.is_null() {
            if self.left == 0 {
                return None;
            }
            if self.idx >= self.ht[self.t].len() {
                if self.t == 1 {
                    return None;
                }
                self.t = 1;
                self.idx = 0;
                continue;
            }
            self.node = self.ht[self.t][self.idx];
            self.idx += 1;
        }
        let node = self.node;
        self.left -= 1;
        // SAFETY: the iterator borrows the table, so its nodes stay live for `'a`.
        unsafe {
            self.node = (*node).next.ptr();
            Some((node_key(node), &(*node).value))
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// Sizes for these tests: Miri interprets every pointer operation of the chains, so it
    /// runs them smaller (the same paths: growth, shrinking and rehashing in steps).
    const fn sized(normal: u64, miri: u64) -> u64 {
        if cfg!(miri) {
            miri
        } else {
            normal
        }
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key:{i:012}").into_bytes()
    }

    /// Asserts the internal invariants: counts match the chains, every node sits in the bucket
    /// its hash selects, and moved buckets of the old array are empty.
    fn check<V, S: BuildHasher + Default>(t: &Table<V, S>) {
        for (ti, b) in t.ht.iter().enumerate() {
            let mut n = 0;
            for (i, &head) in b.slots.iter().enumerate() {
                if ti == 0 && t.rehash_idx.is_some_and(|r| i < r) {
                    assert!(head.is_null());
                }
                let mut node = head;
                while !node.is_null() {
                    let k = unsafe { node_key(node) };
                    assert_eq!(t.hash(k) & b.mask(), i);
                    n += 1;
                    node = unsafe { (*node).next.ptr() };
                }
            }
            assert_eq!(n, b.used);
        }
        if t.rehash_idx.is_none() {
            assert_eq!(t.ht[1].size(), 0);
        }
    }

    #[test]
    fn node_is_48_bytes_for_16_byte_key_and_value() {
        assert_eq!(std::mem::size_of::<crate::types::Value>(), 16);
        assert_eq!(Table::<crate::types::Value>::entry_bytes(16), 48);
        assert_eq!(Table::<i64>::entry_bytes(16), 40);
    }

    /// An entry's tag survives clock stamps, value replacement and resizes, and never shows in
    /// the clock or breaks a chain (its high bits ride on the chain pointer).
    #[test]
    fn tags_are_kept_apart_from_clock_and_chains() {
        let n = sized(2000, 200);
        let mut t: Table<u64> = Table::new();
        let mut handles = Vec::new();
        for i in 0..n {
            let (_, h) = t.insert_entry(&key(i), i, 0x00ab_cdef);
            let tag = (i as u32 * 7919) & ((1 << TAG_BITS) - 1);
            unsafe { t.set_entry_tag(h, tag) };
            handles.push((h, tag));
            check(&t);
        }
        t.get_touch_with(&key(5), |old| old + 1);
        t.set_clock(&key(6), 0xffff_ffff);
        t.insert(&key(7), 70, 3);
        assert_eq!(t.clock(&key(5)), Some(0x00ab_cdf0));
        assert_eq!(t.clock(&key(6)), Some(0x00ff_ffff));
        assert_eq!(t.clock(&key(7)), Some(3));
        // Removing half the keys shrinks the table: chains relinked, tags kept.
        for i in (0..n).step_by(2) {
            let (v, h, tag) = t.remove_entry(&key(i)).unwrap();
            assert_eq!(v, i);
            assert_eq!((h, tag), handles[i as usize]);
            check(&t);
        }
        while t.rehash_step(100) {}
        for i in (1..n).step_by(2) {
            let (h, tag) = handles[i as usize];
            assert_eq!(t.entry(&key(i)), Some(h));
            assert_eq!(unsafe { t.entry_tag(h) }, tag);
        }
        check(&t);
    }

    #[test]
    fn basic_ops() {
        let mut t: Table<String> = Table::new();
        assert!(t.is_empty());
        assert_eq!(t.get(b"a"), None);
        assert_eq!(t.remove(b"a"), None);
        assert_eq!(t.insert(b"a", "1".into(), 5), None);
        assert_eq!(t.insert(b"", "empty".into(), 6), None);
        assert_eq!(t.insert(b"a", "2".into(), 7), Some("1".into()));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(b"a").map(String::as_str), Some("2"));
        assert_eq!(t.get(b"").map(String::as_str), Some("empty"));
        assert_eq!(t.clock(b"a"), Some(7));
        t.get_touch(b"a", 9).unwrap().push('x');
        assert_eq!(t.clock(b"a"), Some(9));
        assert_eq!(t.get(b"a").map(String::as_str), Some("2x"));
        assert_eq!(t.remove(b"a"), Some("2x".into()));
        assert_eq!(t.len(), 1);
        let old = t.take();
        assert!(t.is_empty());
        assert_eq!(old.len(), 1);
        check(&t);
    }

    #[test]
    fn values_are_dropped() {
        let rc = std::rc::Rc::new(());
        {
            let mut t = Table::new();
            for i in 0..1000 {
                t.insert(&key(i), rc.clone(), 0);
            }
            for i in 0..500 {
                t.remove(&key(i));
            }
            t.insert(&key(1), rc.clone(), 0);
            assert_eq!(std::rc::Rc::strong_count(&rc), 502);
        }
        assert_eq!(std::rc::Rc::strong_count(&rc), 1);
    }

    #[test]
    fn grows_and_shrinks_incrementally() {
        let n = sized(10_000, 600);
        let mut t = Table::new();
        let mut saw_rehash = false;
        for i in 0..n {
            t.insert(&key(i), i, 0);
            saw_rehash |= t.is_rehashing();
            if i % sized(997, 97) == 0 {
                check(&t);
            }
        }
        assert!(saw_rehash);
        while t.rehash_step(1) {}
        assert_eq!(t.buckets() as u64, n.next_power_of_two());
        for i in 0..n - 10 {
            assert_eq!(t.remove(&key(i)), Some(i));
            if i % sized(997, 97) == 0 {
                check(&t);
            }
        }
        while t.rehash_step(1) {}
        assert!(t.buckets() <= 64, "{}", t.buckets());
        for i in n - 10..n {
            assert_eq!(t.get(&key(i)), Some(&i));
        }
        check(&t);
    }

    /// Random operations against a std HashMap model, with a fixed seed.
    #[test]
    fn model_random_ops() {
        let mut rng = fastrand::Rng::with_seed(0xfe77_0d15);
        let mut t: Table<u64> = Table::new();
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        let (mut shrinks, mut grows, mut prev) = (0, 0, 0);
        let (rounds, keys) = (sized(240_000, 2_400), sized(10_000, 120));
        for round in 0..rounds {
            // Alternate insert-heavy and remove-heavy phases so the table grows and shrinks
            // several times.
            let growing = (round / (rounds / 4)) % 2 == 0;
            let k = key(rng.u64(..keys));
            let r = rng.u8(..100);
            let op = match r {
                _ if r < if growing { 50 } else { 5 } => 0,
                _ if r < 75 => 4,
                _ if r < 82 => 7,
                _ if r < 90 => 8,
                _ => 9,
            };
            match op {
                0 => assert_eq!(t.insert(&k, round, 0), model.insert(k, round)),
                4 => assert_eq!(t.remove(&k), model.remove(&k)),
                7 => assert_eq!(t.get(&k), model.get(&k)),
                8 => {
                    if let Some(v) = t.get_mut(&k) {
                        *v += 1;
                    }
                    if let Some(v) = model.get_mut(&k) {
                        *v += 1;
                    }
                }
                _ => {
                    if let Some((k, v)) = t.random() {
                        assert_eq!(model.get(k), Some(v));
                    }
                    let mut s: Vec<(Vec<u8>, u64)> = Vec::new();
                    t.sample_entries(5, |k, v, _| s.push((k.to_vec(), *v)));
                    // Like dictGetSomeKeys, a sparse spot may yield fewer than asked.
                    assert!(s.len() <= 5 && (s.is_empty() || !model.is_empty()));
                    if model.len() >= 5 && t.buckets() <= 32 {
                        assert_eq!(s.len(), 5);
                    }
                    let distinct: HashSet<&[u8]> = s.iter().map(|(k, _)| k.as_slice()).collect();
                    assert_eq!(distinct.len(), s.len());
                    for (k, v) in &s {
                        assert_eq!(model.get(k.as_slice()), Some(v));
                    }
                }
            }
            assert_eq!(t.len(), model.len());
            if !t.is_rehashing() {
                let b = t.buckets();
                shrinks += usize::from(b < prev);
                grows += usize::from(b > prev);
                prev = b;
            }
            if round % 10_007 == 0 {
                check(&t);
                let all: HashMap<Vec<u8>, u64> = t.iter().map(|(k, v)| (k.to_vec(), *v)).collect();
                assert_eq!(all, model);
            }
        }
        assert!(shrinks >= 2 && grows >= 6, "shrinks {shrinks} grows {grows}");
    }

    /// A full SCAN returns every key present throughout, while keys are added and removed between
    /// steps (so the table grows, shrinks or both mid-iteration).
    #[test]
    fn scan_guarantee_under_resizes() {
        let mut rng = fastrand::Rng::with_seed(7);
        for trial in 0..sized(24, 6) {
            let mut t: Table<u64> = Table::new();
            let stable: Vec<u64> = (0..rng.u64(1..sized(2000, 40))).collect();
            for &i in &stable {
                t.insert(&key(i), i, 0);
            }
            let base = 1_000_000u64;
            let mut extra = base;
            let mode = trial % 3;
            if mode == 1 {
                for _ in 0..sized(8_000, 600) {
                    t.insert(&key(extra), 0, 0);
                    extra += 1;
                }
            }
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let (mut grew, mut shrank) = (false, false);
            loop {
                cursor = t.scan(cursor, |k, _| {
                    seen.insert(k.to_vec());
                });
                let before = t.buckets();
                let add = match mode {
                    0 => true,
                    1 => false,
                    _ => rng.bool(),
                };
                for _ in 0..rng.usize(0..sized(300, 30) as usize) {
                    if add && extra < base + sized(8_000, 600) {
                        t.insert(&key(extra), 0, 0);
                        extra += 1;
                    } else if extra > base {
                        extra -= 1;
                        t.remove(&key(extra));
                    }
                }
                grew |= t.buckets() > before;
                shrank |= t.buckets() < before;
                if cursor == 0 {
                    break;
                }
            }
            for &i in &stable {
                assert!(seen.contains(&key(i)), "trial {trial}: key {i} missed");
            }
            assert!(grew || shrank, "trial {trial} never resized");
            check(&t);
        }
    }

    #[test]
    fn scan_without_changes_visits_each_key_once() {
        let mut t: Table<u64> = Table::new();
        // Stop midway through a resize so the two-array path is exercised too.
        let mut n = 0;
        while n < sized(5000, 300) || !t.is_rehashing() {
            t.insert(&key(n), n, 0);
            n += 1;
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = t.scan(cursor, |k, _| seen.push(k.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        seen.sort();
        let visits = seen.len();
        seen.dedup();
        assert_eq!(seen.len() as u64, n);
        assert_eq!(visits as u64, n);
    }

    #[test]
    fn random_reaches_every_key() {
        let mut t: Table<u64> = Table::new();
        for i in 0..50 {
            t.insert(&key(i), i, 0);
        }
        let mut seen = HashSet::new();
        for _ in 0..sized(20_000, 3_000) {
            seen.insert(*t.random().unwrap().1);
        }
        assert_eq!(seen.len(), 50);
        let mut t2: Table<u64> = Table::new();
        assert!(t2.random().is_none());
        t2.insert(b"only", 1, 0);
        assert_eq!(t2.random().map(|(k, _)| k), Some(&b"only"[..]));
    }

    #[test]
    fn swappable_hasher() {
        let mut t: Table<u64, foldhash::fast::FixedState> = Table::with_hasher(foldhash::fast::FixedState::default());
        for i in 0..1000 {
            t.insert(&key(i), i, 0);
        }
        assert_eq!(t.get(&key(500)), Some(&500));
        check(&t);
    }

    /// Worst single-insert latency while growing to 10M keys (release: `cargo test --release --lib
    /// table::tests::insert_latency -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn insert_latency_10m() {
        let n = 10_000_000u64;
        let mut t: Table<u64> = Table::new();
        let mut worst = std::time::Duration::ZERO;
        let mut worst_at = 0;
        let mut slow = Vec::new();
        // CPU time of this thread as well as wall time: on a shared machine the wall-clock worst
        // is dominated by preemption, which says nothing about the table.
        let thread_cpu = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes one timespec through a valid pointer.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
        };
        let (mut worst_cpu, mut worst_cpu_at) = (std::time::Duration::ZERO, 0);
        let start = std::time::Instant::now();
        let mut k = *b"key:000000000000";
        for i in 0..n {
            let mut x = i;
            for b in k[4..].iter_mut().rev() {
                *b = b'0' + (x % 10) as u8;
                x /= 10;
            }
            let t0 = std::time::Instant::now();
            let c0 = thread_cpu();
            t.insert(&k, i, 0);
            let d = t0.elapsed();
            let c = thread_cpu() - c0;
            if c > worst_cpu {
                worst_cpu = c;
                worst_cpu_at = i;
            }
            if d > std::time::Duration::from_millis(1) {
                slow.push((i, d));
            }
            if d > worst {
                worst = d;
                worst_at = i;
            }
        }
        println!(
            "inserted {n} keys in {:?}; worst single insert {:?} at key {worst_at}; buckets {}",
            start.elapsed(),
            worst,
            t.buckets()
        );
        println!("worst single insert in thread CPU time {worst_cpu:?} at key {worst_cpu_at}");
        println!("inserts over 1 ms wall: {} {:?}", slow.len(), &slow[..slow.len().min(20)]);
        if std::env::var_os("COMPARE_STD").is_none() {
            return;
        }
        let mut std_map: HashMap<Vec<u8>, u64> = HashMap::new();
        let (mut std_worst, mut std_worst_cpu) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        for i in 0..n {
            let t0 = std::time::Instant::now();
            let c0 = thread_cpu();
            std_map.insert(key(i), i);
            std_worst = std_worst.max(t0.elapsed());
            std_worst_cpu = std_worst_cpu.max(thread_cpu() - c0);
        }
        println!("std HashMap worst single insert {std_worst:?} wall, {std_worst_cpu:?} thread CPU");
    }
}
