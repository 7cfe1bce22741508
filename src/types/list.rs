//! The List value type: a deque of compact nodes, each one contiguous byte buffer of entries
//! (Redis's quicklist of listpacks). A small list is a single node, so it costs one buffer; a big
//! one is a chain of nodes bounded by the `list-max-listpack-size` fill (entries per node when
//! positive, a byte size class of 4/8/16/32/64 KB for -1..-5), which keeps pushes and pops at
//! either end O(1) amortized (the memmove inside a node is bounded by the node size).
//!
//! Redis 7.0 reports every list as `quicklist` (the `listpack` list encoding arrived in 7.2), so
//! node layout is invisible to clients and `encoding_name` always answers `quicklist`.
//!
//! Entry layout inside a node: a header, the payload, and a trailer mirroring the header, so a
//! node can be walked from either end. Strings under 128 bytes take one byte each way, longer
//! ones five (marker 0x80 plus a little-endian u32). A canonical decimal integer is stored in
//! binary in 1..=8 bytes (marker 0xC0 | width), as listpack does: a 6-digit number costs 5 bytes
//! instead of 8. LRANGE copies string payloads straight into the reply and formats integers with
//! itoa on the stack.

use std::sync::Arc;

use super::cow::CowVec;
use crate::util::alloc::usable_size;
use crate::util::listpack;
use std::collections::VecDeque;

/// Byte cap of a node for the negative fill levels -1..-5, in listpack bytes.
const SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Byte cap for a node under a positive (entry count) fill, as Redis's safety limit.
const SAFETY_LIMIT: usize = 8192;
/// The most listpack bytes a node of several elements grows to here: the largest fill class.
/// Redis lets LSET grow a node past it; a file's node beyond it is cut on load.
const MAX_NODE_BYTES: usize = SIZE_CLASSES[SIZE_CLASSES.len() - 1];
/// `Node::lp_bytes` of a plain node: one element, kept apart from every listpack.
const PLAIN: u32 = u32::MAX;
/// What Redis adds to an element's length to estimate its listpack entry when it decides
/// whether the element joins a node (SIZE_ESTIMATE_OVERHEAD).
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
const LONG: u8 = 0x80;

/// Elements at least this long sit in a node of their own (Redis's plain quicklist nodes, for
/// elements too big to share a listpack): 1 GB, as Redis's default; DEBUG
/// QUICKLIST-PACKED-THRESHOLD changes it process-wide, as in Redis.
pub const DEFAULT_PACKED_THRESHOLD: usize = 1 << 30;
static PACKED_THRESHOLD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(DEFAULT_PACKED_THRESHOLD);

/// Sets the plain-node threshold; 0 restores the default. Refuses (false) sizes from about 4 GB
/// up, as Redis's quicklistisSetPackedThreshold.
pub fn set_packed_threshold(bytes: u64) -> bool {
    if bytes > (1u64 << 32) - (1 << 20) {
        return false;
    }
    let bytes = if bytes == 0 { DEFAULT_PACKED_THRESHOLD } else { bytes as usize };
    PACKED_THRESHOLD.store(bytes, std::sync::atomic::Ordering::Relaxed);
    true
}

fn packed_threshold() -> usize {
    PACKED_THRESHOLD.load(std::sync::atomic::Ordering::Relaxed)
}

/// A Redis list.
#[derive(Debug, Clone, PartialEq)]
pub struct List {
    nodes: Nodes,
    /// The element count (low 48 bits) and the fill the list was made with (high 16 bits): a
    /// list keeps its list-max-listpack-size from its creation on, as Redis's quicklist does,
    /// and one word for both keeps a list's header at 48 bytes.
    len_fill: u64,
}

/// A new quicklist's fill before any configuration is applied (quicklistCreate's).
impl Default for List {
    fn default() -> List {
        List::new(-2)
    }
}

const LEN_BITS: u32 = 48;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;

/// A node: a run of entries that Redis 7.0 would keep in one listpack. Nodes are cut where
/// Redis's quicklist cuts them (its rule, on its listpack sizes), so a list's nodes are the ones
/// Redis would have: DUMP, the RDB file and DEBUG OBJECT show the same bytes and figures.
#[derive(Debug, Clone, PartialEq, Default)]
struct Node {
    /// Shared with reply snapshots while they last (see `types::cow`).
    buf: CowVec<u8>,
    /// Entries (at most a 64 KB listpack's worth, so 32 bits hold it).
    count: u32,
    /// The node's size as a listpack, frame included: Redis's `node->sz`, which its fill rule
    /// reads; PLAIN for a plain node.
    lp_bytes: u32,
}

/// The node chain. A list that fits one node (nearly every small list) keeps it inline, so it
/// costs no node array allocation; longer lists use a deque of nodes.
#[derive(Debug, Clone, PartialEq)]
enum Nodes {
    One(Node),
    Many(VecDeque<Node>),
}

impl Default for Nodes {
    fn default() -> Nodes {
        Nodes::Many(VecDeque::new())
    }
}

impl std::ops::Index<usize> for Nodes {
    type Output = Node;

    fn index(&self, i: usize) -> &Node {
        match self {
            Nodes::One(n) if i == 0 => n,
            Nodes::One(_) => panic!("node index {i} out of range"),
            Nodes::Many(v) => &v[i],
        }
    }
}

impl std::ops::IndexMut<usize> for Nodes {
    fn index_mut(&mut self, i: usize) -> &mut Node {
        match self {
            Nodes::One(n) if i == 0 => n,
            Nodes::One(_) => panic!("node index {i} out of range"),
            Nodes::Many(v) => &mut v[i],
        }
    }
}

impl Nodes {
    fn len(&self) -> usize {
        match self {
            Nodes::One(_) => 1,
            Nodes::Many(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> Option<&Node> {
        match self {
            Nodes::One(n) => (i == 0).then_some(n),
            Nodes::Many(v) => v.get(i),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Node> {
        let (a, b): (&[Node], &[Node]) = match self {
            Nodes::One(n) => (std::slice::from_ref(n), &[]),
            Nodes::Many(v) => v.as_slices(),
        };
        a.iter().chain(b.iter())
    }

    fn front(&self) -> Option<&Node> {
        self.get(0)
    }

    fn front_mut(&mut self) -> Option<&mut Node> {
        match self {
            Nodes::One(n) => Some(n),
            Nodes::Many(v) => v.front_mut(),
        }
    }

    fn back(&self) -> Option<&Node> {
        match self {
            Nodes::One(n) => Some(n),
            Nodes::Many(v) => v.back(),
        }
    }

    fn back_mut(&mut self) -> Option<&mut Node> {
        match self {
            Nodes::One(n) => Some(n),
            Nodes::Many(v) => v.back_mut(),
        }
    }

    /// Bytes of the node array itself (none while inline).
    fn spine_bytes(&self) -> usize {
        match self {
            Nodes::One(_) => 0,
            Nodes::Many(v) => v.capacity() * std::mem::size_of::<Node>(),
        }
    }

    /// The deque form, converting an inline node first.
    fn many(&mut self) -> &mut VecDeque<Node> {
        if let Nodes::One(n) = self {
            let n = std::mem::take(n);
            let mut v = VecDeque::with_capacity(4);
            v.push_back(n);
            *self = Nodes::Many(v);
        }
        match self {
            Nodes::Many(v) => v,
            Nodes::One(_) => unreachable!("converted above"),
        }
    }

    /// Back to the inline form when a single node is left. Bulk removals call this; single pops
    /// do not, so a list hovering at a node boundary does not reallocate the array each time.
    fn settle(&mut self) {
        if let Nodes::Many(v) = self {
            if v.len() == 1 {
                if let Some(n) = v.pop_front() {
                    *self = Nodes::One(n);
                }
            }
        }
    }

    fn push_back(&mut self, node: Node) {
        match self {
            Nodes::Many(v) if v.is_empty() => *self = Nodes::One(node),
            _ => self.many().push_back(node),
        }
    }

    fn push_front(&mut self, node: Node) {
        match self {
            Nodes::Many(v) if v.is_empty() => *self = Nodes::One(node),
            _ => self.many().push_front(node),
        }
    }

    fn insert(&mut self, i: usize, node: Node) {
        self.many().insert(i, node);
    }

    fn remove(&mut self, i: usize) {
        match self {
            Nodes::One(_) => *self = Nodes::default(),
            Nodes::Many(v) => {
                v.remove(i);
            }
        }
    }

    fn pop_front(&mut self) {
        match self {
            Nodes::One(_) => *self = Nodes::default(),
            Nodes::Many(v) => {
                v.pop_front();
            }
        }
    }

    fn pop_back(&mut self) {
        match self {
            Nodes::One(_) => *self = Nodes::default(),
            Nodes::Many(v) => {
                v.pop_back();
            }
        }
    }

    fn retain(&mut self, f: impl FnMut(&Node) -> bool) {
        match self {
            Nodes::One(n) => {
                let mut f = f;
                if !f(n) {
                    *self = Nodes::default();
                }
            }
            Nodes::Many(v) => {
                v.retain(f);
                self.settle();
            }
        }
    }
}

/// Header/trailer byte of an integer entry: `INT | k` for a k-byte (1..=8) little-endian value.
const INT: u8 = 0xC0;

/// One element as stored: its bytes, or an integer kept in binary (a canonical decimal string,
/// which reads back as the same bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// Calls `f` with the element's bytes (an integer is formatted on the stack).
    #[inline]
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            Elem::Bytes(b) => f(b),
            Elem::Int(v) => f(itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// Whether the element equals `value` byte for byte.
    pub fn eq_bytes(&self, value: &[u8]) -> bool {
        match *self {
            Elem::Bytes(b) => b == value,
            // Cheap rejections before formatting.
            Elem::Int(_) if value.is_empty() || value.len() > 20 => false,
            Elem::Int(_) => self.with_bytes(|b| b == value),
        }
    }
}

/// `data` as an integer when it is the canonical decimal form of an i64 (so it can be stored in
/// binary and read back unchanged).
#[inline]
fn as_int(data: &[u8]) -> Option<i64> {
    let first = *data.first()?;
    if data.len() > 20 || !(first.is_ascii_digit() || first == b'-') {
        return None;
    }
    let v = crate::util::num::parse_i64(data)?;
    (itoa::Buffer::new().format(v).as_bytes() == data).then_some(v)
}

/// Bytes a signed value needs (1..=8).
#[inline]
fn int_width(v: i64) -> usize {
    let bits = if v < 0 { 64 - (!v).leading_zeros() } else { 64 - v.leading_zeros() } + 1;
    (bits as usize).div_ceil(8).clamp(1, 8)
}

/// How an element will be stored: its entry size and integer form, if any.
#[inline]
fn plan(data: &[u8]) -> (usize, Option<i64>) {
    match as_int(data) {
        Some(v) => (int_width(v) + 2, Some(v)),
        None if data.len() < LONG as usize => (data.len() + 2, None),
        None => (data.len() + 10, None),
    }
}

/// Writes the entry for `data` (planned as `int`) into `slot`, which is exactly its size.
fn write_entry(slot: &mut [u8], data: &[u8], int: Option<i64>) {
    let size = slot.len();
    if let Some(v) = int {
        let k = size - 2;
        slot[0] = INT | k as u8;
        slot[1..1 + k].copy_from_slice(&v.to_le_bytes()[..k]);
        slot[1 + k] = INT | k as u8;
    } else if data.len() < LONG as usize {
        let n = data.len();
        slot[0] = n as u8;
        slot[1..1 + n].copy_from_slice(data);
        slot[1 + n] = n as u8;
    } else {
        let n = data.len();
        let len = (n as u32).to_le_bytes();
        slot[0] = LONG;
        slot[1..5].copy_from_slice(&len);
        slot[5..5 + n].copy_from_slice(data);
        slot[5 + n..9 + n].copy_from_slice(&len);
        slot[9 + n] = LONG;
    }
}

/// The encoded entry for `data`.
fn encode_vec(data: &[u8]) -> Vec<u8> {
    let (size, int) = plan(data);
    let mut v = vec![0; size];
    write_entry(&mut v, data, int);
    v
}

#[inline]
fn read_int(bytes: &[u8]) -> i64 {
    let k = bytes.len();
    let mut le = [0u8; 8];
    le[..k].copy_from_slice(bytes);
    // Sign-extend from the top byte stored.
    let shift = 64 - 8 * k as u32;
    (i64::from_le_bytes(le) << shift) >> shift
}

/// The entry starting at `off`: (element, offset of the next entry).
#[inline]
fn read_fwd(buf: &[u8], off: usize) -> (Elem<'_>, usize) {
    let h = buf[off];
    if h < LONG {
        let n = h as usize;
        (Elem::Bytes(&buf[off + 1..off + 1 + n]), off + n + 2)
    } else if h == LONG {
        let n = u32::from_le_bytes([buf[off + 1], buf[off + 2], buf[off + 3], buf[off + 4]]) as usize;
        (Elem::Bytes(&buf[off + 5..off + 5 + n]), off + n + 10)
    } else {
        let k = (h & 0x0F) as usize;
        (Elem::Int(read_int(&buf[off + 1..off + 1 + k])), off + k + 2)
    }
}

/// The entry ending at `end`: (element, offset where the entry starts).
#[inline]
fn read_back(buf: &[u8], end: usize) -> (Elem<'_>, usize) {
    let t = buf[end - 1];
    if t < LONG {
        let n = t as usize;
        (Elem::Bytes(&buf[end - 1 - n..end - 1]), end - n - 2)
    } else if t == LONG {
        let n = u32::from_le_bytes([buf[end - 5], buf[end - 4], buf[end - 3], buf[end - 2]]) as usize;
        (Elem::Bytes(&buf[end - 5 - n..end - 5]), end - n - 10)
    } else {
        let k = (t & 0x0F) as usize;
        (Elem::Int(read_int(&buf[end - 1 - k..end - 1])), end - k - 2)
    }
}

/// Whether a node of `lp_bytes` listpack bytes and `count` entries is within the fill limit
/// (Redis's quicklistNodeExceedsLimit, negated).
fn fits(lp_bytes: usize, count: usize, fill: i64) -> bool {
    if fill < 0 {
        let class = ((-fill - 1) as usize).min(SIZE_CLASSES.len() - 1);
        lp_bytes <= SIZE_CLASSES[class]
    } else {
        lp_bytes <= SAFETY_LIMIT && count as i64 <= fill.max(1)
    }
}

/// The listpack entry of an element as stored.
fn lp_elem_bytes(e: Elem<'_>) -> usize {
    match e {
        Elem::Int(v) => listpack::int_entry_bytes(v),
        Elem::Bytes(b) => listpack::string_entry_bytes(b.len()),
    }
}

/// The listpack entry of `data`, planned as `int`.
fn lp_entry_bytes(data: &[u8], int: Option<i64>) -> usize {
    match int {
        Some(v) => listpack::int_entry_bytes(v),
        None => listpack::string_entry_bytes(data.len()),
    }
}

/// Listpack bytes, frame included, of the entries in `buf`.
fn lp_bytes_of(buf: &[u8]) -> u32 {
    let entries: usize = NodeIter { buf, off: 0 }.map(|(_, _, e)| lp_elem_bytes(e)).sum();
    (listpack::FRAME + entries) as u32
}

/// Whether an element of `len` bytes gets a node of its own (Redis's plain nodes).
fn is_large_element(len: usize) -> bool {
    len >= packed_threshold()
}

impl Node {
    fn with_entry(data: &[u8], size: usize, int: Option<i64>) -> Node {
        let mut buf = vec![0; size];
        write_entry(&mut buf, data, int);
        let lp_bytes =
            if is_large_element(data.len()) { PLAIN } else { (listpack::FRAME + lp_entry_bytes(data, int)) as u32 };
        Node { buf: buf.into(), count: 1, lp_bytes }
    }

    /// A plain node holding `data`, whatever its length (one read from a file).
    fn plain(data: &[u8]) -> Node {
        let (size, int) = plan(data);
        Node { lp_bytes: PLAIN, ..Node::with_entry(data, size, int) }
    }

    fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether `data` may join this node: Redis's _quicklistNodeAllowInsert, which estimates the
    /// entry as the element's length plus SIZE_ESTIMATE_OVERHEAD. An element of the plain
    /// threshold's length or more, and a node already holding one alone, stay plain.
    fn can_take(&self, data: &[u8], fill: i64) -> bool {
        let stays_plain = is_large_element(data.len()) || self.is_plain();
        !stays_plain && fits(self.lp_bytes as usize + data.len() + SIZE_ESTIMATE_OVERHEAD, self.len() + 1, fill)
    }

    /// A node holding one element apart from every listpack: one of the plain threshold's
    /// length or more when it came, or a plain node of a file.
    fn is_plain(&self) -> bool {
        self.lp_bytes == PLAIN
    }

    /// Recounts `lp_bytes` after a change inside a packed node (the walk is bounded by the node).
    fn recount(&mut self) {
        if !self.is_plain() {
            self.lp_bytes = lp_bytes_of(&self.buf);
        }
    }

    /// Takes a removed entry of `entry_lp_bytes` off `lp_bytes`.
    fn forget(&mut self, entry_lp_bytes: usize) {
        if !self.is_plain() {
            self.lp_bytes -= entry_lp_bytes as u32;
        }
    }

    /// Byte offset of entry `i` (0-based; `i == count` gives the end), walking from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        if i <= self.len() / 2 {
            let mut off = 0;
            for _ in 0..i {
                off = read_fwd(&self.buf, off).1;
            }
            off
        } else {
            let mut end = self.buf.len();
            for _ in i..self.len() {
                end = read_back(&self.buf, end).1;
            }
            end
        }
    }

    /// Inserts the entry for `data` (planned as `size`, `int`) at byte offset `off`.
    fn insert_at(&mut self, off: usize, data: &[u8], size: usize, int: Option<i64>) {
        // Growth to the allocator's size class: no more memory than an exact request occupies,
        // and the pushes that fit in the class need no realloc call.
        let buf = self.buf.make_mut();
        let old = buf.len();
        if buf.capacity() < old + size {
            buf.reserve_exact(usable_size(old + size) - old);
        }
        buf.resize(old + size, 0);
        buf.copy_within(off..old, off + size);
        write_entry(&mut buf[off..off + size], data, int);
        self.count += 1;
        self.lp_bytes += lp_entry_bytes(data, int) as u32;
    }

    /// Keeps the first `keep` entries; returns a node of the others.
    fn split_off(&mut self, keep: usize) -> Node {
        let off = self.offset_of(keep);
        let mut tail = Node { buf: self.buf[off..].to_vec().into(), count: self.count - keep as u32, lp_bytes: 0 };
        tail.recount();
        let buf = self.buf.make_mut();
        buf.truncate(off);
        buf.shrink_to_fit();
        self.count = keep as u32;
        self.recount();
        tail
    }

    fn entries(&self) -> NodeIter<'_> {
        NodeIter { buf: &self.buf, off: 0 }
    }
}

struct NodeIter<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Iterator for NodeIter<'a> {
    type Item = (usize, usize, Elem<'a>);

    /// Yields (entry start offset, entry end offset, element).
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.off >= self.buf.len() {
            return None;
        }
        let start = self.off;
        let (e, next) = read_fwd(self.buf, start);
        self.off = next;
        Some((start, next, e))
    }
}

impl List {
    /// An empty list cutting its nodes by `fill` (list-max-listpack-size), bounded to -5 ..=
    /// 32767 as Redis's quicklistSetFill does.
    pub fn new(fill: i64) -> List {
        let fill = fill.clamp(-5, i16::MAX as i64) as i16;
        List { nodes: Nodes::default(), len_fill: u64::from(fill as u16) << LEN_BITS }
    }

    /// The list-max-listpack-size the list was made with (DEBUG OBJECT's ql_listpack_max).
    pub fn fill(&self) -> i64 {
        (self.len_fill >> LEN_BITS) as u16 as i16 as i64
    }

    fn grow(&mut self, n: usize) {
        self.len_fill += n as u64;
    }

    fn shrink(&mut self, n: usize) {
        self.len_fill -= n as u64;
    }

    /// The name OBJECT ENCODING reports (Redis 7.0 has only quicklist lists).
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    pub fn len(&self) -> usize {
        (self.len_fill & LEN_MASK) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of nodes (for tests and memory reports).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes held by the list's buffers (approximate memory usage).
    pub fn allocated_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>() + self.nodes.spine_bytes()
    }

    /// The nodes' size as Redis counts it (DEBUG OBJECT's ql_uncompressed_size): a listpack's
    /// bytes for each packed node, the element's for a plain one.
    pub fn listpack_bytes(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| if n.is_plain() { read_fwd(&n.buf, 0).0.with_bytes(|b| b.len()) } else { n.lp_bytes as usize })
            .sum()
    }

    /// Calls `f` with each node's elements, head to tail: the nodes an RDB file stores.
    pub fn for_each_node(&self, mut f: impl FnMut(NodeElems<'_>)) {
        for n in self.nodes.iter() {
            f(NodeElems { buf: &n.buf, off: 0, left: n.len(), plain: n.is_plain() });
        }
    }

    pub fn push_back(&mut self, data: &[u8]) {
        let fill = self.fill();
        let (size, int) = plan(data);
        match self.nodes.back_mut() {
            Some(node) if node.can_take(data, fill) => node.insert_at(node.buf.len(), data, size, int),
            _ => {
                self.nodes.push_back(Node::with_entry(data, size, int));
            }
        }
        self.grow(1);
    }

    pub fn push_front(&mut self, data: &[u8]) {
        let fill = self.fill();
        let (size, int) = plan(data);
        match self.nodes.front_mut() {
            Some(node) if node.can_take(data, fill) => node.insert_at(0, data, size, int),
            _ => {
                self.nodes.push_front(Node::with_entry(data, size, int));
            }
        }
        self.grow(1);
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.front_mut()?;
        let (e, next) = read_fwd(&node.buf, 0);
        let out = e.to_vec();
        let gone = lp_elem_bytes(e);
        node.forget(gone);
        node.buf.make_mut().drain(..next);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.pop_front();
        }
        self.shrink(1);
        Some(out)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.back_mut()?;
        let (e, start) = read_back(&node.buf, node.buf.len());
        let out = e.to_vec();
        let gone = lp_elem_bytes(e);
        node.forget(gone);
        node.buf.make_mut().truncate(start);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.pop_back();
        }
        self.shrink(1);
        Some(out)
    }

    /// (node index, entry index within it) of element `i` (< len), walking from the nearer end.
    fn locate(&self, mut i: usize) -> (usize, usize) {
        if i < self.len() / 2 {
            for (ni, node) in self.nodes.iter().enumerate() {
                if i < node.len() {
                    return (ni, i);
                }
                i -= node.len();
            }
        } else {
            let mut from_end = self.len() - 1 - i;
            for ni in (0..self.nodes.len()).rev() {
                let node = &self.nodes[ni];
                if from_end < node.len() {
                    return (ni, node.len() - 1 - from_end);
                }
                from_end -= node.len();
            }
        }
        (self.nodes.len(), 0)
    }

    /// Element `i` (0-based from the head), if it exists.
    pub fn get(&self, i: usize) -> Option<Elem<'_>> {
        if i >= self.len() {
            return None;
        }
        let (ni, ei) = self.locate(i);
        let node = &self.nodes[ni];
        Some(read_fwd(&node.buf, node.offset_of(ei)).0)
    }

    /// Replaces element `i` as Redis 7.0's quicklistReplaceEntry does: in place when the node
    /// and the element are both packed or both plain (a node may so grow past the fill limit,
    /// as there); otherwise the new element is inserted after the old one, as LINSERT would
    /// place it, and the old one removed. One departure: a packed node is not grown past
    /// MAX_NODE_BYTES (Redis would let LSETs grow it without bound, and every later edit of the
    /// node move all of it); the new element is then placed as LINSERT would. Returns false
    /// when `i` is out of range.
    pub fn set(&mut self, i: usize, data: &[u8]) -> bool {
        if i >= self.len() {
            return false;
        }
        let (ni, ei) = self.locate(i);
        let node = &mut self.nodes[ni];
        let off = node.offset_of(ei);
        let (old, next) = read_fwd(&node.buf, off);
        // The node's listpack size after the replacement (a plain node has none).
        let grown = (!node.is_plain())
            .then(|| node.lp_bytes as usize - lp_elem_bytes(old) + lp_entry_bytes(data, plan(data).1));
        let in_place = match grown {
            None => is_large_element(data.len()),
            Some(grown) => !is_large_element(data.len()) && (grown <= MAX_NODE_BYTES || node.count == 1),
        };
        if in_place {
            node.buf.make_mut().splice(off..next, encode_vec(data));
            if let Some(grown) = grown {
                node.lp_bytes = grown as u32;
            }
        } else {
            self.insert_beside(i, true, data);
            self.remove_at(i);
        }
        true
    }

    /// Removes element `i` (< len), and its node if it was the node's last.
    fn remove_at(&mut self, i: usize) {
        let (ni, ei) = self.locate(i);
        let node = &mut self.nodes[ni];
        if node.count == 1 {
            self.nodes.remove(ni);
        } else {
            let off = node.offset_of(ei);
            let (e, next) = read_fwd(&node.buf, off);
            let gone = lp_elem_bytes(e);
            node.forget(gone);
            node.buf.make_mut().drain(off..next);
            node.count -= 1;
        }
        self.shrink(1);
    }

    /// Inserts `data` just after (or before) element `pivot` (< len), as LINSERT, placing it
    /// as Redis's quicklist does (_quicklistInsert): into the pivot's node when it has room, else
    /// at the near end of the neighbour node or in a node of its own when the pivot ends its
    /// node, else by splitting the node there and merging the pieces with their neighbours
    /// where they fit.
    pub fn insert_beside(&mut self, pivot: usize, after: bool, data: &[u8]) {
        let fill = self.fill();
        let (ni, ei) = self.locate(pivot);
        let (size, int) = plan(data);
        let node = &self.nodes[ni];
        let full = !node.can_take(data, fill);
        let at_tail = after && ei + 1 == node.len();
        let at_head = !after && ei == 0;
        let avail_next = at_tail && self.nodes.get(ni + 1).is_some_and(|n| n.can_take(data, fill));
        let avail_prev = at_head && ni > 0 && self.nodes[ni - 1].can_take(data, fill);
        // Where the pivot's node is cut when the element cannot go in or beside it.
        let cut = if after { ei + 1 } else { ei };
        let pivot_plain = node.is_plain();
        self.grow(1);
        if is_large_element(data.len()) {
            if pivot_plain || at_tail || at_head {
                self.nodes.insert(if after { ni + 1 } else { ni }, Node::with_entry(data, size, int));
            } else {
                let rest = self.nodes[ni].split_off(cut);
                self.nodes.insert(ni + 1, Node::with_entry(data, size, int));
                self.nodes.insert(ni + 2, rest);
            }
        } else if !full {
            let node = &mut self.nodes[ni];
            let off = node.offset_of(cut);
            node.insert_at(off, data, size, int);
        } else if avail_next {
            self.nodes[ni + 1].insert_at(0, data, size, int);
        } else if avail_prev {
            let prev = &mut self.nodes[ni - 1];
            prev.insert_at(prev.buf.len(), data, size, int);
        } else if at_tail || at_head {
            self.nodes.insert(if after { ni + 1 } else { ni }, Node::with_entry(data, size, int));
        } else {
            // The element joins the piece on its side of the cut, which becomes a node of its
            // own; then the pivot's node (the other piece) is merged around.
            let mut rest = self.nodes[ni].split_off(cut);
            let center = if after {
                rest.insert_at(0, data, size, int);
                self.nodes.insert(ni + 1, rest);
                ni
            } else {
                let mut head = std::mem::replace(&mut self.nodes[ni], rest);
                head.insert_at(head.buf.len(), data, size, int);
                self.nodes.insert(ni, head);
                ni + 1
            };
            self.merge_around(center, fill);
        }
    }

    /// Redis's _quicklistMergeNodes around node `center`: the two nodes before it, the two
    /// after it, then the center with the node before and the result with the node after, each
    /// pair only when it fits one node.
    fn merge_around(&mut self, mut center: usize, fill: i64) {
        if center >= 2 && self.can_merge(center - 2, fill) {
            self.merge_with_next(center - 2);
            center -= 1;
        }
        if center + 2 < self.nodes.len() && self.can_merge(center + 1, fill) {
            self.merge_with_next(center + 1);
        }
        let target = if center >= 1 && self.can_merge(center - 1, fill) {
            self.merge_with_next(center - 1);
            center - 1
        } else {
            center
        };
        if target + 1 < self.nodes.len() && self.can_merge(target, fill) {
            self.merge_with_next(target);
        }
    }

    /// Whether node `i` and the next would fit one node (_quicklistNodeAllowMerge). Redis 7.0
    /// still estimates the merged size by taking off a ziplist's frame (11 bytes), not a
    /// listpack's (7), so a merged node can be up to 4 bytes over the limit, as there.
    fn can_merge(&self, i: usize, fill: i64) -> bool {
        const MERGE_FRAME_ESTIMATE: usize = 11;
        let (a, b) = (&self.nodes[i], &self.nodes[i + 1]);
        !a.is_plain()
            && !b.is_plain()
            && fits(a.lp_bytes as usize + b.lp_bytes as usize - MERGE_FRAME_ESTIMATE, a.len() + b.len(), fill)
    }

    fn merge_with_next(&mut self, i: usize) {
        let next = self.nodes.many().remove(i + 1).expect("merge_with_next: a next node");
        let node = &mut self.nodes[i];
        node.buf.make_mut().extend_from_slice(&next.buf);
        node.count += next.count;
        node.lp_bytes += next.lp_bytes - listpack::FRAME as u32;
    }

    /// Index of the first element equal to `value`.
    pub fn position(&self, value: &[u8]) -> Option<usize> {
        self.iter().position(|e| e.eq_bytes(value))
    }

    /// Removes the first `n` elements.
    pub fn remove_front(&mut self, mut n: usize) {
        n = n.min(self.len());
        self.shrink(n);
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else { break };
            if node.len() <= n {
                n -= node.len();
                self.nodes.pop_front();
            } else {
                let off = node.offset_of(n);
                node.buf.make_mut().drain(..off);
                node.count -= n as u32;
                node.recount();
                n = 0;
            }
        }
        self.nodes.settle();
    }

    /// Removes the last `n` elements.
    pub fn remove_back(&mut self, mut n: usize) {
        n = n.min(self.len());
        self.shrink(n);
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else { break };
            if node.len() <= n {
                n -= node.len();
                self.nodes.pop_back();
            } else {
                let off = node.offset_of(node.len() - n);
                node.buf.make_mut().truncate(off);
                node.count -= n as u32;
                node.recount();
                n = 0;
            }
        }
        self.nodes.settle();
    }

    /// Removes elements equal to `value` (LREM): the first `count` from the head when positive,
    /// the last `-count` from the tail when negative, all when zero. Returns how many went.
    pub fn remove_matching(&mut self, value: &[u8], count: i64) -> usize {
        let limit = if count == 0 { usize::MAX } else { count.unsigned_abs().min(usize::MAX as u64) as usize };
        let mut removed = 0;
        let from_tail = count < 0;
        let order: Vec<usize> =
            if from_tail { (0..self.nodes.len()).rev().collect() } else { (0..self.nodes.len()).collect() };
        for ni in order {
            if removed == limit {
                break;
            }
            let node = &self.nodes[ni];
            let mut starts: Vec<(usize, usize)> =
                node.entries().filter(|(_, _, e)| e.eq_bytes(value)).map(|(s, e, _)| (s, e)).collect();
            if starts.is_empty() {
                continue;
            }
            let room = limit - removed;
            if starts.len() > room {
                if from_tail {
                    starts.drain(..starts.len() - room);
                } else {
                    starts.truncate(room);
                }
            }
            let node = &mut self.nodes[ni];
            let mut kept = Vec::with_capacity(node.buf.len());
            let mut prev = 0;
            for &(s, e) in &starts {
                kept.extend_from_slice(&node.buf[prev..s]);
                prev = e;
            }
            kept.extend_from_slice(&node.buf[prev..]);
            node.buf = kept.into();
            node.count -= starts.len() as u32;
            node.recount();
            removed += starts.len();
        }
        self.nodes.retain(|n| n.count > 0);
        self.shrink(removed);
        removed
    }

    /// Forward iterator over all elements.
    pub fn iter(&self) -> Iter<'_> {
        Iter { nodes: &self.nodes, ni: 0, off: 0 }
    }

    /// Forward iterator starting at element `i`.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len() {
            return Iter { nodes: &self.nodes, ni: self.nodes.len(), off: 0 };
        }
        let (ni, ei) = self.locate(i);
        Iter { nodes: &self.nodes, ni, off: self.nodes[ni].offset_of(ei) }
    }

    /// Backward iterator over all elements, tail first.
    pub fn iter_rev(&self) -> RevIter<'_> {
        let ni = self.nodes.len();
        let end = self.nodes.back().map_or(0, |n| n.buf.len());
        RevIter { nodes: &self.nodes, ni, end }
    }

    /// Calls `f` with `n` elements from element `start` on, head to tail. The tight loop LRANGE
    /// and the popping commands use to encode replies.
    pub fn for_each_range(&self, start: usize, mut n: usize, mut f: impl FnMut(Elem<'_>)) {
        if start >= self.len() || n == 0 {
            return;
        }
        let (mut ni, ei) = self.locate(start);
        let mut off = self.nodes[ni].offset_of(ei);
        while n > 0 && ni < self.nodes.len() {
            let buf = &self.nodes[ni].buf[..];
            while n > 0 && off < buf.len() {
                let (e, next) = read_fwd(buf, off);
                f(e);
                off = next;
                n -= 1;
            }
            ni += 1;
            off = 0;
        }
    }

    /// A snapshot of the `n` elements from `start` on (a range inside the list), sharing the
    /// nodes that hold them until a writer copies one (see `types::cow`): it owns what it
    /// reads, so a reply can be encoded from it on another thread while the list changes.
    pub fn snapshot_range(&mut self, start: usize, n: usize) -> ListSnapshot {
        let n = if start >= self.len() { 0 } else { n.min(self.len() - start) };
        let bytes = self.approx_bytes(n);
        if n == 0 {
            return ListSnapshot { bytes, ..ListSnapshot::default() };
        }
        let (ni, ei) = self.locate(start);
        let off = self.nodes[ni].offset_of(ei);
        let mut nodes = Vec::new();
        let mut counts = Vec::new();
        let mut plain_nodes = Vec::new();
        // Elements still to cover, counted from the first node's head.
        let mut left = n + ei;
        let mut i = ni;
        while left > 0 && i < self.nodes.len() {
            let node = &mut self.nodes[i];
            let skipped = if i == ni { ei } else { 0 };
            counts.push((node.len() - skipped).min(left - skipped) as u32);
            left = left.saturating_sub(node.len());
            if node.is_plain() {
                plain_nodes.push(nodes.len());
            }
            nodes.push(node.buf.share());
            i += 1;
        }
        ListSnapshot { nodes, counts, plain_nodes, off, n, bytes }
    }

    /// An estimate of the encoded bytes of `n` elements (to size reply buffers): `n` times the
    /// average entry size of the head node, which is O(1) however long the list is.
    pub fn approx_bytes(&self, n: usize) -> usize {
        match self.nodes.front() {
            Some(node) if node.count > 0 => node.buf.len() / node.len() * n,
            _ => 0,
        }
    }
}

/// A range of a list as it was when the snapshot was taken (`List::snapshot_range`).
#[derive(Default)]
pub struct ListSnapshot {
    nodes: Vec<Arc<Vec<u8>>>,
    /// How many of the range's elements each of `nodes` holds.
    counts: Vec<u32>,
    /// Which of `nodes` are plain (ascending; nearly always none).
    plain_nodes: Vec<usize>,
    /// Where the range starts in the first node.
    off: usize,
    n: usize,
    bytes: usize,
}

impl ListSnapshot {
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// An estimate of the elements' encoded bytes (a capacity hint).
    pub fn approx_bytes(&self) -> usize {
        self.bytes
    }

    /// Calls `f` with each element of the range, head to tail.
    pub fn for_each(&self, mut f: impl FnMut(Elem<'_>)) {
        let mut n = self.n;
        let mut off = self.off;
        for buf in &self.nodes {
            while n > 0 && off < buf.len() {
                let (e, next) = read_fwd(buf, off);
                f(e);
                off = next;
                n -= 1;
            }
            off = 0;
        }
    }

    /// Calls `f` with the range's elements node by node, as the list held them when the
    /// snapshot was taken (a snapshot of the whole list gives the list's nodes).
    pub fn for_each_node(&self, mut f: impl FnMut(NodeElems<'_>)) {
        let mut off = self.off;
        for (i, (buf, &count)) in self.nodes.iter().zip(&self.counts).enumerate() {
            f(NodeElems { buf, off, left: count as usize, plain: self.plain_nodes.binary_search(&i).is_ok() });
            off = 0;
        }
    }

    /// Where `for_each_from` starts: the range's first element (node, offset, elements left).
    pub fn start(&self) -> (usize, usize, usize) {
        (0, self.off, self.n)
    }

    /// The elements from position `at` on (see `start`), head to tail, until `f` returns
    /// false: then where the next element is, or None once the range was visited (a reply
    /// encoded piece by piece resumes there).
    pub fn for_each_from(
        &self,
        at: (usize, usize, usize),
        mut f: impl FnMut(Elem<'_>) -> bool,
    ) -> Option<(usize, usize, usize)> {
        let (mut ni, mut off, mut n) = at;
        while n > 0 {
            let Some(buf) = self.nodes.get(ni) else { break };
            if off >= buf.len() {
                ni += 1;
                off = 0;
                continue;
            }
            let (e, next) = read_fwd(buf, off);
            off = next;
            n -= 1;
            if !f(e) {
                return (n > 0).then_some((ni, off, n));
            }
        }
        None
    }
}

/// Builds a list element by element with the nodes `push_back` would give, but growing each
/// node buffer amortized and trimming it once when the node is full (bulk loads: RDB, RESTORE),
/// instead of one exact reallocation per element. Between `begin_node` and `end_node` the
/// elements keep the node they had in a file, as Redis keeps a loaded listpack as one node.
pub struct ListBuilder {
    list: List,
    /// Inside a node read from a file.
    loaded_node: bool,
    /// The next element starts a node.
    fresh: bool,
}

impl ListBuilder {
    pub fn new(fill: i64) -> ListBuilder {
        ListBuilder { list: List::new(fill), loaded_node: false, fresh: false }
    }

    /// The next elements, up to `end_node`, are one node of a file: they start a node and share
    /// it. A node over MAX_NODE_BYTES (which Redis makes only by LSETs) is cut, so that no file
    /// can make a node whose edits cost more than that.
    pub fn begin_node(&mut self) {
        self.close_node();
        self.loaded_node = true;
    }

    pub fn end_node(&mut self) {
        self.loaded_node = false;
    }

    /// A plain node of a file: `data` alone in a node, as Redis keeps it.
    pub fn push_plain(&mut self, data: &[u8]) {
        self.close_node();
        self.list.nodes.push_back(Node::plain(data));
        self.list.grow(1);
    }

    fn close_node(&mut self) {
        if let Some(node) = self.list.nodes.back_mut() {
            if node.buf.capacity() > node.buf.len() {
                node.buf.make_mut().shrink_to_fit();
            }
        }
        self.fresh = true;
    }

    pub fn push(&mut self, data: &[u8]) {
        let (size, int) = plan(data);
        let fresh = std::mem::take(&mut self.fresh);
        let fill = self.list.fill();
        let joins = |node: &Node| {
            if fresh {
                false
            } else if self.loaded_node {
                !node.is_plain()
                    && !is_large_element(data.len())
                    && node.lp_bytes as usize + lp_entry_bytes(data, int) <= MAX_NODE_BYTES
            } else {
                node.can_take(data, fill)
            }
        };
        match self.list.nodes.back_mut() {
            Some(node) if joins(node) => {
                let old = node.buf.len();
                node.buf.make_mut().resize(old + size, 0);
                write_entry(&mut node.buf.make_mut()[old..], data, int);
                node.count += 1;
                node.lp_bytes += lp_entry_bytes(data, int) as u32;
            }
            _ => {
                self.close_node();
                self.fresh = false;
                self.list.nodes.push_back(Node::with_entry(data, size, int));
            }
        }
        self.list.grow(1);
    }

    pub fn finish(mut self) -> List {
        self.close_node();
        self.list
    }
}

/// One node's elements (`List::for_each_node`), head to tail.
#[derive(Clone)]
pub struct NodeElems<'a> {
    buf: &'a [u8],
    off: usize,
    left: usize,
    plain: bool,
}

impl NodeElems<'_> {
    /// A plain node: its one element is stored apart from any listpack.
    pub fn is_plain(&self) -> bool {
        self.plain
    }
}

impl<'a> Iterator for NodeElems<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let (e, next) = read_fwd(self.buf, self.off);
        self.off = next;
        self.left -= 1;
        Some(e)
    }
}

pub struct Iter<'a> {
    nodes: &'a Nodes,
    ni: usize,
    off: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    #[inline]
    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            let node = self.nodes.get(self.ni)?;
            if self.off < node.buf.len() {
                let (e, next) = read_fwd(&node.buf, self.off);
                self.off = next;
                return Some(e);
            }
            self.ni += 1;
            self.off = 0;
        }
    }
}

/// Backward iterator over a list's elements.
pub struct RevIter<'a> {
    nodes: &'a Nodes,
    /// One past the node being read.
    ni: usize,
    end: usize,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    #[inline]
    fn next(&mut self) -> Option<Elem<'a>> {
        loop {
            if self.ni == 0 {
                return None;
            }
            let node = &self.nodes[self.ni - 1];
            if self.end > 0 {
                let (e, start) = read_back(&node.buf, self.end);
                self.end = start;
                return Some(e);
            }
            self.ni -= 1;
            if self.ni > 0 {
                self.end = self.nodes[self.ni - 1].buf.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range snapshot keeps its elements while the list is written at both ends and inside.
    #[test]
    fn snapshot_range_is_the_range_when_taken() {
        let mut l = List::new(-2);
        for i in 0..100_000 {
            l.push_back(format!("e:{i}").as_bytes());
        }
        let expect: Vec<Vec<u8>> = (10..90_010).map(|i| format!("e:{i}").into_bytes()).collect();
        let snap = l.snapshot_range(10, 90_000);
        for i in 0..5000 {
            l.pop_front();
            l.push_back(b"new");
            l.set(40_000 + i, b"changed");
        }
        let mut got = Vec::new();
        snap.for_each(|e| got.push(e.to_vec()));
        assert_eq!(got, expect);
        assert_eq!(snap.len(), 90_000);
        assert_eq!(l.len(), 100_000);
        assert_eq!(l.get(0).map(|e| e.to_vec()), Some(b"e:5000".to_vec()));
    }

    #[test]
    fn snapshot_nodes_hold_the_range() {
        let mut l = List::new(5);
        for i in 0..47 {
            l.push_back(format!("{i}").as_bytes());
        }
        for (start, n) in [(0, 47), (3, 10), (5, 5), (7, 1), (12, 35), (40, 100), (46, 1)] {
            let snap = l.snapshot_range(start, n);
            let (mut got, mut nodes) = (Vec::new(), 0);
            snap.for_each_node(|node| {
                nodes += 1;
                got.extend(node.map(|e| e.to_vec()));
            });
            let expect: Vec<Vec<u8>> = (start..47.min(start + n)).map(|i| format!("{i}").into_bytes()).collect();
            assert_eq!(got, expect, "range {start}+{n}");
            assert_eq!(nodes, (start + expect.len()).div_ceil(5) - start / 5, "range {start}+{n}");
        }
    }

    #[test]
    fn builder_matches_push_back() {
        for fill in [-2i64, -1, 3, 128] {
            let mut pushed = List::new(fill);
            let mut b = ListBuilder::new(fill);
            for i in 0..2000usize {
                let e = if i % 3 == 0 { i.to_string().into_bytes() } else { vec![b'x'; i % 300] };
                pushed.push_back(&e);
                b.push(&e);
            }
            let built = b.finish();
            assert_eq!(built, pushed);
            assert_eq!(built.node_count(), pushed.node_count());
        }
    }

    fn check(l: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(l.len(), model.len());
        let fwd: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
        let m: Vec<Vec<u8>> = model.iter().cloned().collect();
        assert_eq!(fwd, m);
        let mut rev: Vec<Vec<u8>> = l.iter_rev().map(|e| e.to_vec()).collect();
        rev.reverse();
        assert_eq!(rev, m);
        assert_eq!(l.nodes.iter().map(|n| n.len()).sum::<usize>(), l.len());
        assert!(l.nodes.iter().all(|n| n.count > 0));
        for n in l.nodes.iter() {
            assert_eq!(n.entries().count(), n.len());
        }
    }

    fn value(rng: &mut fastrand::Rng) -> Vec<u8> {
        match rng.u8(..14) {
            0 => vec![b'x'; rng.usize(100..300)],
            1 => Vec::new(),
            2 => rng.i64(..).to_string().into_bytes(),
            3 => rng.i64(-300..300).to_string().into_bytes(),
            4 => ["01", "-0", "+1", "-", "1a", "18446744073709551616", "-9223372036854775808"][rng.usize(..7)]
                .as_bytes()
                .to_vec(),
            5 => (rng.i64(..) >> rng.u32(0..63)).to_string().into_bytes(),
            _ => vec![b'a' + rng.u8(..4); rng.usize(1..4)],
        }
    }

    fn run_model(fill: i64, seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut l = List::new(fill);
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for _ in 0..4000 {
            let v = value(&mut rng);
            match rng.u8(..13) {
                0 | 1 => {
                    l.push_back(&v);
                    m.push_back(v);
                }
                2 | 3 => {
                    l.push_front(&v);
                    m.push_front(v);
                }
                4 => assert_eq!(l.pop_front(), m.pop_front()),
                5 => assert_eq!(l.pop_back(), m.pop_back()),
                6 if !m.is_empty() => {
                    let i = rng.usize(..m.len());
                    assert!(l.set(i, &v));
                    m[i] = v;
                }
                7 if !m.is_empty() => {
                    let i = rng.usize(..m.len());
                    let after = rng.bool();
                    l.insert_beside(i, after, &v);
                    m.insert(i + after as usize, v);
                }
                8 => {
                    let c = rng.i64(-3..=3);
                    let mut expect = 0;
                    let limit = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                    if c >= 0 {
                        let mut i = 0;
                        while i < m.len() {
                            if expect < limit && m[i] == v {
                                m.remove(i);
                                expect += 1;
                            } else {
                                i += 1;
                            }
                        }
                    } else {
                        let mut i = m.len();
                        while i > 0 {
                            i -= 1;
                            if expect < limit && m[i] == v {
                                m.remove(i);
                                expect += 1;
                            }
                        }
                    }
                    assert_eq!(l.remove_matching(&v, c), expect);
                }
                9 => {
                    let n = rng.usize(..5);
                    l.remove_front(n);
                    for _ in 0..n.min(m.len()) {
                        m.pop_front();
                    }
                }
                10 => {
                    let n = rng.usize(..5);
                    l.remove_back(n);
                    for _ in 0..n.min(m.len()) {
                        m.pop_back();
                    }
                }
                11 if !m.is_empty() => {
                    let i = rng.usize(..m.len());
                    assert_eq!(l.get(i).map(|e| e.to_vec()), Some(m[i].clone()));
                    let from: Vec<Elem> = l.iter_from(i).collect();
                    assert_eq!(from.len(), m.len() - i);
                    let mut got = Vec::new();
                    l.for_each_range(i, 3, |e| got.push(e.to_vec()));
                    let want: Vec<Vec<u8>> = m.iter().skip(i).take(3).cloned().collect();
                    assert_eq!(got, want);
                }
                _ => assert_eq!(l.position(&v), m.iter().position(|e| *e == v)),
            }
            check(&l, &m);
        }
        assert!(fill >= 0 || l.nodes.iter().all(|n| n.count == 1 || fits(n.lp_bytes as usize, n.len(), fill)));
        assert!(l.nodes.iter().all(|n| n.lp_bytes == lp_bytes_of(&n.buf)));
    }

    #[test]
    fn model_small_nodes() {
        run_model(2, 7);
        run_model(1, 8);
        run_model(0, 9);
    }

    #[test]
    fn model_size_classes() {
        run_model(-1, 11);
        run_model(-2, 12);
        run_model(-5, 13);
        run_model(128, 14);
    }

    #[test]
    fn long_entries_round_trip() {
        let mut l = List::new(-2);
        let big = vec![7u8; 70000];
        l.push_back(b"a");
        l.push_back(&big);
        l.push_front(&big[..200]);
        assert_eq!(l.get(2), Some(Elem::Bytes(&big[..])));
        assert_eq!(l.pop_back().as_deref(), Some(&big[..]));
        assert_eq!(l.pop_front().as_deref(), Some(&big[..200]));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn integers_are_stored_in_binary() {
        for v in [0i64, 1, -1, 127, 128, -128, -129, 32767, 1 << 23, -(1 << 40), i64::MAX, i64::MIN] {
            let text = v.to_string();
            let (size, int) = plan(text.as_bytes());
            assert_eq!(int, Some(v));
            assert_eq!(size, int_width(v) + 2);
            let enc = encode_vec(text.as_bytes());
            assert_eq!(read_fwd(&enc, 0), (Elem::Int(v), enc.len()));
            assert_eq!(read_back(&enc, enc.len()), (Elem::Int(v), 0));
        }
        for s in ["01", "-0", "+1", " 1", "1 ", "", "-", "99999999999999999999"] {
            assert_eq!(plan(s.as_bytes()).1, None, "{s}");
        }
        assert_eq!(int_width(999_999), 3);
        assert!(Elem::Int(-12).eq_bytes(b"-12"));
        assert!(!Elem::Int(12).eq_bytes(b"012"));
    }

    /// LSET grows a node in place, as Redis does, but not past MAX_NODE_BYTES: then the new
    /// element is placed as LINSERT would place it, and the list reads the same.
    #[test]
    fn lset_grows_a_node_only_up_to_the_cap() {
        let mut l = List::new(-2);
        let mut model: Vec<Vec<u8>> = (0..1000).map(|i| format!("e{i}").into_bytes()).collect();
        for e in &model {
            l.push_back(e);
        }
        let big = vec![b'z'; 5000];
        for i in (300..700).step_by(7) {
            assert!(l.set(i, &big));
            model[i] = big.clone();
        }
        let got: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
        assert_eq!(got, model);
        let most = MAX_NODE_BYTES + listpack::string_entry_bytes(big.len());
        assert!(l.nodes.iter().all(|n| n.lp_bytes as usize <= most), "a node grew past the cap");
        assert!(l.nodes.iter().any(|n| n.lp_bytes as usize > SIZE_CLASSES[1]), "no node grew in place");
        assert!(l.nodes.iter().all(|n| n.lp_bytes == lp_bytes_of(&n.buf)));
    }

    #[test]
    fn nodes_respect_fill() {
        let mut l = List::new(3);
        for i in 0..10 {
            l.push_back(i.to_string().as_bytes());
        }
        assert_eq!(l.node_count(), 4);
        let mut l = List::new(-1);
        for _ in 0..1000 {
            l.push_front(b"0123456789");
        }
        assert!(l.node_count() >= 3 && l.nodes.iter().all(|n| n.buf.len() <= 4096));
    }
}
