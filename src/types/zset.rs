//! The ZSet value type: members ordered by (score, member bytes), with its two encodings, named as
//! Redis 7.0 names them for OBJECT ENCODING:
//!
//! - `listpack`: one contiguous boxed byte buffer of entries in order, each
//!   `[shared prefix length][rest length][rest of member][score]` (lengths LEB128, the member
//!   stored as the bytes it does not share with the previous member's prefix), the score being
//!   0x00..=0x7F (that integer), 0x80..=0xBF + 1 byte (integers up to 16383), 0xC0..=0xDF + 1
//!   byte (-1 down to -8192), 0xFE + zigzag LEB128 (other integers exactly representable) or 0xFF + 8 bytes of f64. Small integer
//!   scores (the common case) cost one or two bytes; there is no header, so a zset of ten short
//!   members like `member:0`..`member:9` fits in about fifty bytes. Each operation decodes the
//!   pack into one scratch buffer (and writes re-encode it): linear, as Redis's listpack is, and
//!   cheap below the conversion thresholds.
//! - `skiplist`: an order-statistics treap (arena of nodes with subtree sizes, split/merge) giving
//!   O(log n) insert, delete, rank, select and range boundaries, plus a hash index from member to
//!   node (`types::slot_index`, the set's: slots of a hash tag and a node number, no second copy
//!   of the member) for O(1) ZSCORE and for ZSCAN's cursor guarantee. A treap instead of Redis's
//!   span skiplist: same complexities, no raw pointers, and ranges are walked with an explicit
//!   stack in O(log n + k).
//!   The node arena is in chunks of 128 nodes that a reply snapshot shares (`types::cow::Chunks`):
//!   a big ZRANGE copies each chunk's pointer and the root (no allocation or atomic operation per
//!   chunk), and is walked off the executor while writers copy only the chunks they touch (a
//!   write touches about twice the tree's depth of nodes).
//!
//! Conversion listpack → skiplist happens when a member longer than `max_value` is added or the
//! length passes `max_entries` (callers pass `zset-max-listpack-*`); the reverse only for newly built
//! results (`from_pairs`), as Redis 7.0 does for ZRANGESTORE/ZUNIONSTORE destinations.
//!
//! Lex ranges compare member bytes only, assuming (as Redis does) that all scores are equal.

use crate::util::varint;
use std::cmp::Ordering;

use crate::types::cow::{Chunks, ChunksSnapshot};
use crate::types::slot_index::{self, SlotIndex};

/// Encoding thresholds (`zset-max-listpack-entries`, `zset-max-listpack-value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

/// One end of a lex range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`
    Min,
    /// `+`
    Max,
    /// `[member`
    Incl(Vec<u8>),
    /// `(member`
    Excl(Vec<u8>),
}

/// A ZSet. See the module header for its encodings.
pub struct ZSet {
    repr: Repr,
}

enum Repr {
    Pack(Box<[u8]>),
    Tree(Box<Big>),
}

struct Big {
    tree: Treap,
    /// Member → node number.
    index: SlotIndex,
}

/// The index's key for a location: the member of that treap node.
fn member_of<'a>(nodes: &'a Nodes) -> impl Fn(u64) -> &'a [u8] + 'a {
    move |loc| nodes.member(loc as u32)
}

impl Big {
    fn with_capacity(n: usize) -> Self {
        Big { tree: Treap::new(), index: SlotIndex::with_capacity(n) }
    }

    /// The node holding `member` (hashing to `hash`) and its slot in the index.
    fn find(&self, member: &[u8], hash: u64) -> Option<(u32, (usize, usize))> {
        let (t, i) = self.index.find(member, hash, &member_of(&self.tree.nodes))?;
        Some((slot_index::loc_of(self.index.slot(t, i)) as u32, (t, i)))
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        let (id, _) = self.find(member, self.index.hash(member))?;
        Some(self.tree.nodes[id as usize].score)
    }

    /// Adds a member known to be absent.
    fn insert_new(&mut self, member: &[u8], score: f64, hash: u64) {
        let id = self.tree.insert(score, member);
        self.index.insert(hash, u64::from(id), &member_of(&self.tree.nodes));
    }

    /// Sets `member`'s score, adding it if absent; returns the previous score.
    fn set_score(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.rehash_step();
        let hash = self.index.hash(member);
        let Some((id, (t, i))) = self.find(member, hash) else {
            self.insert_new(member, score, hash);
            return None;
        };
        let old = self.tree.nodes[id as usize].score;
        if old != score {
            let moved = self.tree.rescore(old, score, member);
            if moved != id {
                self.index.relocate(t, i, u64::from(moved));
            }
        }
        Some(old)
    }

    /// Removes `member`; returns its score.
    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (id, (t, i)) = self.find(member, self.index.hash(member))?;
        let score = self.tree.nodes[id as usize].score;
        self.index.remove_slot(t, i, &member_of(&self.tree.nodes));
        self.tree.remove(score, member);
        self.index.shrink_if_sparse();
        self.rehash_step();
        Some(score)
    }

    /// Removes ascending ranks `start..start + count`.
    fn remove_ranks(&mut self, start: usize, count: usize) {
        let Big { tree, index } = self;
        {
            let key_of = member_of(&tree.nodes);
            tree.walk(start, start + count - 1, false, &mut |m, _| {
                if let Some((t, i)) = index.find(m, index.hash(m), &key_of) {
                    index.remove_slot(t, i, &key_of);
                }
                true
            });
        }
        tree.remove_ranks(start, count);
        index.shrink_if_sparse();
    }

    fn rehash_step(&mut self) -> bool {
        self.index.rehash_step(1, &member_of(&self.tree.nodes))
    }
}

fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    match s1.partial_cmp(&s2) {
        Some(Ordering::Equal) | None => m1.cmp(m2),
        Some(o) => o,
    }
}

// ---------------------------------------------------------------------------------------------
// listpack-like buffer

const TAG_INT: u8 = 0xFE;
const TAG_F64: u8 = 0xFF;

fn put_score(out: &mut Vec<u8>, score: f64) {
    // -0 becomes 0 here, as in Redis's listpack (it stores integral scores as integers).
    if score.fract() == 0.0 && score.abs() < 9_007_199_254_740_992.0 {
        let i = score as i64;
        if (0..0x80).contains(&i) {
            out.push(i as u8);
        } else if (0..0x4000).contains(&i) {
            out.extend_from_slice(&[0x80 | (i >> 8) as u8, i as u8]);
        } else if (-0x2000..0).contains(&i) {
            let n = -i - 1;
            out.extend_from_slice(&[0xC0 | (n >> 8) as u8, n as u8]);
        } else {
            out.push(TAG_INT);
            varint::put(out, ((i << 1) ^ (i >> 63)) as u64);
        }
    } else {
        out.push(TAG_F64);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

fn get_score(buf: &[u8], pos: &mut usize) -> f64 {
    let mut p = *pos;
    let tag = buf.get(p).copied().unwrap_or(0);
    p += 1;
    let score = match tag {
        TAG_F64 => {
            let mut b = [0u8; 8];
            let avail = buf.len().min(p + 8);
            b[..avail - p].copy_from_slice(&buf[p..avail]);
            p += 8;
            f64::from_le_bytes(b)
        }
        TAG_INT => {
            let z = varint::get(buf, &mut p);
            (((z >> 1) as i64) ^ -((z & 1) as i64)) as f64
        }
        t if t < 0x80 => t as f64,
        t if t < 0xC0 => {
            let lo = buf.get(p).copied().unwrap_or(0);
            p += 1;
            (((t & 0x3F) as i64) << 8 | lo as i64) as f64
        }
        t => {
            let lo = buf.get(p).copied().unwrap_or(0);
            p += 1;
            (-((((t & 0x1F) as i64) << 8 | lo as i64) + 1)) as f64
        }
    };
    *pos = p;
    score
}

/// Encodes entries already in order. Each member is stored as the length of the prefix it shares
/// with the previous member, then the rest: members of one zset often share a prefix
/// (`user:1000`, `user:1001`), which this drops.
fn encode<'a>(entries: impl Iterator<Item = (&'a [u8], f64)>) -> Box<[u8]> {
    let mut out = Vec::new();
    let mut prev: &[u8] = &[];
    for (m, s) in entries {
        let shared = prev.iter().zip(m).take_while(|(a, b)| a == b).count();
        varint::put(&mut out, shared as u64);
        varint::put(&mut out, (m.len() - shared) as u64);
        out.extend_from_slice(&m[shared..]);
        put_score(&mut out, s);
        prev = m;
    }
    out.into_boxed_slice()
}

/// A pack decoded for one operation: members laid out in one buffer, with their scores.
struct Decoded {
    bytes: Vec<u8>,
    items: Vec<(usize, usize, f64)>,
}

impl Decoded {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, i: usize) -> (&[u8], f64) {
        let (a, b, s) = self.items[i];
        (&self.bytes[a..b], s)
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.items.iter().map(|&(a, b, s)| (&self.bytes[a..b], s))
    }

    fn find(&self, member: &[u8]) -> Option<usize> {
        self.iter().position(|e| e.0 == member)
    }
}

fn decode(buf: &[u8]) -> Decoded {
    let mut bytes: Vec<u8> = Vec::with_capacity(buf.len() * 2);
    let mut items = Vec::new();
    let mut pos = 0;
    let mut prev = (0usize, 0usize);
    while pos < buf.len() {
        let shared = (varint::get(buf, &mut pos) as usize).min(prev.1 - prev.0);
        let rest = varint::get(buf, &mut pos) as usize;
        let start = bytes.len();
        bytes.extend_from_within(prev.0..prev.0 + shared);
        let end_rest = (pos + rest).min(buf.len());
        bytes.extend_from_slice(&buf[pos..end_rest]);
        pos = end_rest;
        let score = get_score(buf, &mut pos);
        prev = (start, bytes.len());
        items.push((start, bytes.len(), score));
    }
    Decoded { bytes, items }
}

/// The score of `member` in a pack, without rebuilding its members: each entry shares a prefix
/// with the one before, so it is enough to track how far the previous member agreed with
/// `member` (a ZADD of an existing member looks its score up first; decoding the pack for that
/// was a third of ZADD's instructions on a small zset).
fn pack_score(buf: &[u8], member: &[u8]) -> Option<f64> {
    let mut pos = 0;
    // Length of the previous member, and of its common prefix with `member`.
    let (mut prev_len, mut common) = (0usize, 0usize);
    while pos < buf.len() {
        let shared = (varint::get(buf, &mut pos) as usize).min(prev_len);
        let rest_len = varint::get(buf, &mut pos) as usize;
        let end = (pos + rest_len).min(buf.len());
        let rest = &buf[pos..end];
        pos = end;
        // With shared > common the entry differs from `member` where the previous one did.
        if shared <= common {
            let tail = member.get(shared..).unwrap_or_default();
            common = shared + rest.iter().zip(tail).take_while(|(a, b)| a == b).count();
        }
        let len = shared + rest.len();
        let score = get_score(buf, &mut pos);
        if common == len && len == member.len() {
            return Some(score);
        }
        prev_len = len;
    }
    None
}

/// Number of entries, without rebuilding members.
fn pack_len(buf: &[u8]) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while pos < buf.len() {
        varint::get(buf, &mut pos);
        let rest = varint::get(buf, &mut pos) as usize;
        pos = pos.saturating_add(rest);
        get_score(buf, &mut pos);
        n += 1;
    }
    n
}

// ---------------------------------------------------------------------------------------------
// order-statistics treap

const NIL: u32 = u32::MAX;

/// A treap node (public only as the element type of a snapshot's chunks). Its member lives
/// in a parallel arena (`Nodes::members`): a write reshapes the tree along a path of nodes but
/// never changes a member, so the first writes after a snapshot copy chunks of plain nodes
/// (3 KiB, no allocation) instead of cloning 128 member strings per chunk.
#[derive(Clone, Copy)]
pub struct Node {
    score: f64,
    l: u32,
    r: u32,
    size: u32,
    prio: u32,
}

/// log2 of the nodes per arena chunk: 128 nodes (3 KiB). A snapshot copies one pointer per
/// chunk, and a write while a snapshot holds a chunk copies it; a write touches about twice the tree's
/// depth of nodes, so the first writes after a snapshot copy a few dozen chunks each. Measured
/// on 1.5M members (`snapshot_cost` below, thread CPU time, a loaded 2-core machine), when a
/// snapshot took an `Arc` per chunk: snapshot 0.76 ms with 128 or 256 nodes a chunk; worst ZADD+ZREM while it is held 1.18 ms with 128,
/// 1.43 ms with 256 (mean 93 and 107 us; 20 us with no snapshot). Those copies cloned each
/// node's member too, until members moved to their own chunks (`Nodes::members`): at 2.6M
/// members the first ten ZADD+ZREM after a snapshot took 163-369 us, now 124-233 us (mean over
/// 2000 while it is held 109 -> 88 us; one run each on the same loaded machine).
const CHUNK_SHIFT: u32 = 7;
const CHUNK: usize = 1 << CHUNK_SHIFT;

/// log2 of the members per member chunk: 1024. A write changes one or two members (the one it
/// adds or removes), so a copied chunk costs one clone per member once; bigger chunks keep the
/// snapshot's pointers few (taking a snapshot copies one per chunk).
///
/// What taking a snapshot of 2M members costs the executor (`snapshot_cost`, thread CPU time,
/// jemalloc as in the server, a loaded 2-core machine), 15.6k node and 2k member chunks: when
/// each chunk moved behind an `Arc` of its own (`CowVec::share`), 0.83-1.14 ms the first time
/// after writes and 160-224 us with nothing written since (an atomic increment per chunk on a
/// cold cache line); copying each chunk's pointer (`Chunks::snapshot`), 66-73 us and 38-63 us.
/// ZADD+ZREM pairs while it is held: mean 40-65 us either way. With glibc malloc (plain lib
/// tests) the `Arc`s cost 1.57-2.09 ms, the pointers 0.21-0.58 ms.
const MEMBER_SHIFT: u32 = 10;
const MEMBER_CHUNK: usize = 1 << MEMBER_SHIFT;

/// The treap's node arena in chunks that a reply snapshot can share (`types::cow::Chunks`): a
/// node at index `i` is `chunks[i >> CHUNK_SHIFT][i % CHUNK]`. Writes go through `IndexMut`,
/// which copies a chunk first while a snapshot may still read it.
#[derive(Default)]
struct Nodes {
    chunks: Chunks<Node>,
    /// Node `i`'s member is `members[i >> MEMBER_SHIFT][i % MEMBER_CHUNK]` (empty for a free
    /// node).
    members: Chunks<Box<[u8]>>,
    len: usize,
}

impl Nodes {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, node: Node, member: Box<[u8]>) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push_chunk(CHUNK);
        }
        if self.len.is_multiple_of(MEMBER_CHUNK) {
            self.members.push_chunk(MEMBER_CHUNK);
        }
        if let (Some(last), Some(members)) = (self.chunks.last_mut(), self.members.last_mut()) {
            last.push(node);
            members.push(member);
        }
        self.len += 1;
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.members.clear();
        self.len = 0;
    }

    /// Replaces node `i`'s member, returning the one it had.
    fn replace_member(&mut self, i: usize, member: Box<[u8]>) -> Box<[u8]> {
        std::mem::replace(&mut self.members.get_mut(i >> MEMBER_SHIFT)[i & (MEMBER_CHUNK - 1)], member)
    }

    fn members(&self) -> impl Iterator<Item = &[u8]> {
        self.members.iter().flat_map(|c| c.iter()).map(|m| &m[..])
    }
}

impl std::ops::Index<usize> for Nodes {
    type Output = Node;
    fn index(&self, i: usize) -> &Node {
        &self.chunks.get(i >> CHUNK_SHIFT)[i & (CHUNK - 1)]
    }
}

impl std::ops::IndexMut<usize> for Nodes {
    fn index_mut(&mut self, i: usize) -> &mut Node {
        &mut self.chunks.get_mut(i >> CHUNK_SHIFT)[i & (CHUNK - 1)]
    }
}

/// Read access to a node arena: the live one or a snapshot's chunks.
trait NodeAt {
    fn node(&self, t: u32) -> &Node;
    fn member(&self, t: u32) -> &[u8];

    fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.node(t).size as usize
        }
    }
}

impl NodeAt for Nodes {
    fn node(&self, t: u32) -> &Node {
        &self[t as usize]
    }

    fn member(&self, t: u32) -> &[u8] {
        let i = t as usize;
        &self.members.get(i >> MEMBER_SHIFT)[i & (MEMBER_CHUNK - 1)]
    }
}

/// A snapshot's node and member chunks.
struct SnapNodes<'a>(&'a ChunksSnapshot<Node>, &'a ChunksSnapshot<Box<[u8]>>);

impl NodeAt for SnapNodes<'_> {
    fn node(&self, t: u32) -> &Node {
        let i = t as usize;
        &self.0[i >> CHUNK_SHIFT][i & (CHUNK - 1)]
    }

    fn member(&self, t: u32) -> &[u8] {
        let i = t as usize;
        &self.1[i >> MEMBER_SHIFT][i & (MEMBER_CHUNK - 1)]
    }
}

#[derive(Default)]
struct Treap {
    nodes: Nodes,
    free: Vec<u32>,
    root: u32,
}

impl Treap {
    fn new() -> Self {
        Treap { nodes: Nodes::default(), free: Vec::new(), root: NIL }
    }

    fn size(&self, t: u32) -> usize {
        self.nodes.size(t)
    }

    fn len(&self) -> usize {
        self.size(self.root)
    }

    fn update(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.l) + self.size(n.r);
        self.nodes[t as usize].size = s as u32;
    }

    /// Splits off the first `k` nodes.
    fn split_at(&mut self, t: u32, k: usize) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let ls = self.size(self.nodes[t as usize].l);
        if k <= ls {
            let (a, b) = self.split_at(self.nodes[t as usize].l, k);
            self.nodes[t as usize].l = b;
            self.update(t);
            (a, t)
        } else {
            let (a, b) = self.split_at(self.nodes[t as usize].r, k - ls - 1);
            self.nodes[t as usize].r = a;
            self.update(t);
            (t, b)
        }
    }

    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].r, b);
            self.nodes[a as usize].r = r;
            self.update(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].l);
            self.nodes[b as usize].l = l;
            self.update(b);
            b
        }
    }

    /// How many nodes satisfy `before` (a predicate on a node, true on a prefix of the order).
    fn count_before(&self, before: impl Fn(&Treap, u32) -> bool) -> usize {
        let mut t = self.root;
        let mut n = 0;
        while t != NIL {
            let node = &self.nodes[t as usize];
            if before(self, t) {
                n += self.size(node.l) + 1;
                t = node.r;
            } else {
                t = node.l;
            }
        }
        n
    }

    /// How many nodes come before the entry (`score`, `member`).
    fn rank_of(&self, score: f64, member: &[u8]) -> usize {
        self.count_before(|tree, t| tree.cmp_key(score, member, t) == Ordering::Greater)
    }

    /// The member and score at rank `k`.
    fn select(&self, mut k: usize) -> Option<(&[u8], f64)> {
        let mut t = self.root;
        while t != NIL {
            let node = &self.nodes[t as usize];
            let ls = self.size(node.l);
            match k.cmp(&ls) {
                Ordering::Less => t = node.l,
                Ordering::Equal => return Some((self.nodes.member(t), node.score)),
                Ordering::Greater => {
                    k -= ls + 1;
                    t = node.r;
                }
            }
        }
        None
    }

    fn alloc(&mut self, score: f64, member: &[u8]) -> u32 {
        let node = Node { score, l: NIL, r: NIL, size: 1, prio: fastrand::u32(..) };
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            self.nodes.replace_member(i as usize, member.into());
            i
        } else {
            self.nodes.push(node, member.into());
            (self.nodes.len() - 1) as u32
        }
    }

    /// Adds an entry; returns its node.
    fn insert(&mut self, score: f64, member: &[u8]) -> u32 {
        let id = self.alloc(score, member);
        self.attach(id, score, member);
        id
    }

    /// Makes `child` the child of `parent` on the side given (the root when `parent` is NIL).
    fn link(&mut self, parent: u32, left: bool, child: u32) {
        if parent == NIL {
            self.root = child;
        } else if left {
            self.nodes[parent as usize].l = child;
        } else {
            self.nodes[parent as usize].r = child;
        }
    }

    /// Puts the lone node `id` (holding `score`, `member`) into the tree: down the path to
    /// where its priority places it (each node on the way gains it in its size), then the
    /// subtree there is split around it. A treap's insertion, one descent; splitting the whole
    /// tree and merging it back walked the tree's depth three times.
    fn attach(&mut self, id: u32, score: f64, member: &[u8]) {
        let prio = self.nodes[id as usize].prio;
        let (mut parent, mut left) = (NIL, false);
        let mut t = self.root;
        while t != NIL && self.nodes[t as usize].prio >= prio {
            let go_left = self.cmp_key(score, member, t) == Ordering::Less;
            let node = &mut self.nodes[t as usize];
            node.size += 1;
            (parent, left) = (t, go_left);
            t = if go_left { node.l } else { node.r };
        }
        let (l, r) = self.split_key(t, score, member);
        let node = &mut self.nodes[id as usize];
        node.l = l;
        node.r = r;
        self.update(id);
        self.link(parent, left, id);
    }

    /// How (`score`, `member`) compares with node `t`'s entry (`cmp_entry`'s order). The node's
    /// member, in another arena (another cache line), is read only when the scores tie.
    #[inline]
    fn cmp_key(&self, score: f64, member: &[u8], t: u32) -> Ordering {
        match score.partial_cmp(&self.nodes[t as usize].score) {
            Some(Ordering::Equal) | None => member.cmp(self.nodes.member(t)),
            Some(o) => o,
        }
    }

    /// Splits `t` at the entry (`score`, `member`): the nodes before it, and the rest.
    fn split_key(&mut self, t: u32, score: f64, member: &[u8]) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.cmp_key(score, member, t) == Ordering::Greater {
            let (a, b) = self.split_key(self.nodes[t as usize].r, score, member);
            self.nodes[t as usize].r = a;
            self.update(t);
            (t, b)
        } else {
            let (a, b) = self.split_key(self.nodes[t as usize].l, score, member);
            self.nodes[t as usize].l = b;
            self.update(t);
            (a, t)
        }
    }

    /// Takes the node holding (`score`, `member`) out of the tree, its children merged in its
    /// place, and returns it; NIL when it is not there. One descent, each node on the way
    /// losing it from its size (given back if it turns out missing, which callers rule out by
    /// asking the member table first).
    fn detach(&mut self, score: f64, member: &[u8]) -> u32 {
        let (mut parent, mut left) = (NIL, false);
        let mut t = self.root;
        while t != NIL {
            let ord = self.cmp_key(score, member, t);
            if ord == Ordering::Equal {
                let node = self.nodes[t as usize];
                let merged = self.merge(node.l, node.r);
                self.link(parent, left, merged);
                return t;
            }
            let node = &mut self.nodes[t as usize];
            node.size -= 1;
            (parent, left) = (t, ord == Ordering::Less);
            t = if left { node.l } else { node.r };
        }
        let mut t = self.root;
        while t != NIL {
            let go_left = self.cmp_key(score, member, t) == Ordering::Less;
            let node = &mut self.nodes[t as usize];
            node.size += 1;
            t = if go_left { node.l } else { node.r };
        }
        NIL
    }

    fn remove(&mut self, score: f64, member: &[u8]) {
        let id = self.detach(score, member);
        if id == NIL {
            return;
        }
        if self.root == NIL {
            self.nodes.clear();
            self.free.clear();
        } else {
            self.nodes.replace_member(id as usize, Box::default());
            self.free.push(id);
        }
    }

    /// Moves `member` from score `old` to `new`: its node is taken out and put back where the
    /// new score places it, keeping its member and priority (no allocation). Returns the node
    /// (a new one only if the entry was missing).
    fn rescore(&mut self, old: f64, new: f64, member: &[u8]) -> u32 {
        let id = self.detach(old, member);
        if id == NIL {
            return self.insert(new, member);
        }
        let n = &mut self.nodes[id as usize];
        n.score = new;
        n.l = NIL;
        n.r = NIL;
        n.size = 1;
        self.attach(id, new, member);
        id
    }

    /// Removes ranks `start..start + count`.
    fn remove_ranks(&mut self, start: usize, count: usize) {
        let (a, b) = self.split_at(self.root, start);
        let (m, c) = self.split_at(b, count);
        let mut stack = vec![m];
        while let Some(t) = stack.pop() {
            if t == NIL {
                continue;
            }
            let node = self.nodes[t as usize];
            stack.push(node.l);
            stack.push(node.r);
            self.nodes.replace_member(t as usize, Box::default());
            self.free.push(t);
        }
        self.root = self.merge(a, c);
        if self.root == NIL {
            self.nodes.clear();
            self.free.clear();
        }
    }

    /// Visits ranks `start..=end` (ascending) or, with `rev`, the same positions counted from the
    /// top (descending order), stopping when `f` returns false.
    fn walk(&self, start: usize, end: usize, rev: bool, f: &mut dyn FnMut(&[u8], f64) -> bool) {
        walk_nodes(&self.nodes, self.root, start, end, rev, f)
    }
}

/// `Treap::walk` over any node arena (the live tree's or a snapshot's) rooted at `root`.
fn walk_nodes<N: NodeAt + ?Sized>(
    nodes: &N,
    root: u32,
    start: usize,
    end: usize,
    rev: bool,
    f: &mut dyn FnMut(&[u8], f64) -> bool,
) {
    {
        let len = nodes.size(root);
        if start > end || start >= len {
            return;
        }
        let end = end.min(len - 1);
        // With rev, position k counts from the top: the node of ascending rank len-1-k; walking
        // descending from there is the mirror image (right and left swapped).
        let child = |n: &Node, first: bool| if first != rev { n.l } else { n.r };
        let mut stack: Vec<u32> = Vec::with_capacity(48);
        let mut t = root;
        let mut k = start;
        while t != NIL {
            let node = nodes.node(t);
            let ls = nodes.size(child(node, true));
            match k.cmp(&ls) {
                Ordering::Less => {
                    stack.push(t);
                    t = child(node, true);
                }
                Ordering::Equal => {
                    stack.push(t);
                    break;
                }
                Ordering::Greater => {
                    k -= ls + 1;
                    t = child(node, false);
                }
            }
        }
        let mut remaining = end - start + 1;
        while remaining > 0 {
            let Some(x) = stack.pop() else { break };
            let node = nodes.node(x);
            if !f(nodes.member(x), node.score) {
                return;
            }
            remaining -= 1;
            let mut t = child(node, false);
            while t != NIL {
                stack.push(t);
                t = child(nodes.node(t), true);
            }
        }
    }
}

/// A zset as it was when the snapshot was taken (`ZSet::snapshot`): the treap's node and member
/// chunks, shared with the zset until a write copies them, and its root then; or a listpack's
/// copy.
pub enum ZSetSnapshot {
    Pack(Box<[u8]>),
    Tree { chunks: ChunksSnapshot<Node>, members: ChunksSnapshot<Box<[u8]>>, root: u32 },
}

impl ZSetSnapshot {
    pub fn len(&self) -> usize {
        match self {
            ZSetSnapshot::Pack(b) => pack_len(b),
            ZSetSnapshot::Tree { chunks, members, root } => SnapNodes(chunks, members).size(*root),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `ZSet::walk` over the zset as it was.
    pub fn walk(&self, start: usize, end: usize, rev: bool, f: &mut dyn FnMut(&[u8], f64) -> bool) {
        match self {
            ZSetSnapshot::Pack(b) => ZSet { repr: Repr::Pack(b.clone()) }.walk(start, end, rev, f),
            ZSetSnapshot::Tree { chunks, members, root } => {
                walk_nodes(&SnapNodes(chunks, members), *root, start, end, rev, f)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new()
    }
}

impl Clone for ZSet {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Pack(b) => ZSet { repr: Repr::Pack(b.clone()) },
            Repr::Tree(_) => {
                let mut z = ZSet::new_tree_for(self.len());
                self.walk(0, usize::MAX, false, &mut |m, s| {
                    z.tree_insert(m, s);
                    true
                });
                z
            }
        }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.to_vec() == other.to_vec()
    }
}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZSet").field("encoding", &self.encoding_name()).field("len", &self.len()).finish()
    }
}

impl ZSet {
    /// An empty zset in the listpack encoding.
    pub fn new() -> Self {
        ZSet { repr: Repr::Pack(Box::default()) }
    }

    /// An empty skiplist zset with room in its index for `n` members.
    fn new_tree_for(n: usize) -> Self {
        ZSet { repr: Repr::Tree(Box::new(Big::with_capacity(n))) }
    }

    /// Builds a zset from distinct members, in the encoding Redis 7.0 gives a freshly stored
    /// result: listpack when it fits both limits, skiplist otherwise.
    pub fn from_pairs(mut pairs: Vec<(Vec<u8>, f64)>, limits: Limits) -> Self {
        pairs.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        let small = pairs.len() <= limits.max_entries && pairs.iter().all(|(m, _)| m.len() <= limits.max_value);
        if small {
            ZSet { repr: Repr::Pack(encode(pairs.iter().map(|(m, s)| (m.as_slice(), *s)))) }
        } else {
            let mut z = ZSet::new_tree_for(pairs.len());
            for (m, s) in &pairs {
                z.tree_insert(m, *s);
            }
            z
        }
    }

    /// `from_pairs` over borrowed members, so a bulk load (RDB, RESTORE) need not copy each
    /// member into its own allocation first. Members must be distinct.
    pub fn from_pair_refs(mut pairs: Vec<(&[u8], f64)>, limits: Limits) -> Self {
        pairs.sort_by(|a, b| cmp_entry(a.1, a.0, b.1, b.0));
        let small = pairs.len() <= limits.max_entries && pairs.iter().all(|(m, _)| m.len() <= limits.max_value);
        if small {
            ZSet { repr: Repr::Pack(encode(pairs.iter().copied())) }
        } else {
            let mut z = ZSet::new_tree_for(pairs.len());
            for (m, s) in &pairs {
                z.tree_insert(m, *s);
            }
            z
        }
    }

    /// The name OBJECT ENCODING reports.
    /// DEBUG HTSTATS-KEY's text: the skiplist encoding's member table, as Redis reports the
    /// zset's dict.
    pub fn table_stats(&self) -> Option<String> {
        match &self.repr {
            Repr::Tree(b) => Some(b.index.stats(&member_of(&b.tree.nodes))),
            Repr::Pack(_) => None,
        }
    }

    /// One rehash step of the member table, as Redis takes on each lookup of a resizing dict.
    pub fn rehash_step(&mut self) -> bool {
        match &mut self.repr {
            Repr::Tree(b) => b.rehash_step(),
            Repr::Pack(_) => false,
        }
    }

    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Tree(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(b) => pack_len(b),
            Repr::Tree(t) => t.tree.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Pack(b) => b.is_empty(),
            Repr::Tree(t) => t.tree.len() == 0,
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Pack(b) => pack_score(b, member),
            Repr::Tree(t) => t.score(member),
        }
    }

    fn tree_insert(&mut self, member: &[u8], score: f64) {
        if let Repr::Tree(t) = &mut self.repr {
            let hash = t.index.hash(member);
            t.insert_new(member, score, hash);
        }
    }

    fn convert_to_tree(&mut self) {
        if let Repr::Pack(b) = &self.repr {
            let d = decode(b);
            let mut z = ZSet::new_tree_for(d.len() + 1);
            for (m, s) in d.iter() {
                z.tree_insert(m, s);
            }
            *self = z;
        }
    }

    /// Sets `member`'s score, adding it if absent, converting to skiplist past the limits.
    /// Returns the previous score.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: Limits) -> Option<f64> {
        if let Repr::Pack(b) = &self.repr {
            let d = decode(b);
            if d.find(member).is_none() && (d.len() + 1 > limits.max_entries || member.len() > limits.max_value) {
                self.convert_to_tree();
            }
        }
        match &mut self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                let old = d.find(member);
                let old_score = old.map(|i| d.get(i).1);
                if old_score == Some(score) {
                    return old_score;
                }
                let mut v: Vec<(&[u8], f64)> =
                    d.iter().enumerate().filter(|(i, _)| Some(*i) != old).map(|(_, e)| e).collect();
                let pos =
                    v.iter().position(|e| cmp_entry(e.1, e.0, score, member) == Ordering::Greater).unwrap_or(v.len());
                v.insert(pos, (member, score));
                *b = encode(v.into_iter());
                old_score
            }
            Repr::Tree(t) => t.set_score(member, score),
        }
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                let i = d.find(member)?;
                *b = encode(d.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, e)| e));
                Some(d.get(i).1)
            }
            Repr::Tree(t) => t.remove(member),
        }
    }

    /// 0-based ascending rank of `member` and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                d.find(member).map(|i| (i, d.get(i).1))
            }
            Repr::Tree(t) => {
                let s = t.score(member)?;
                Some((t.tree.rank_of(s, member), s))
            }
        }
    }

    fn count_where(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Pack(b) => decode(b).iter().take_while(|e| before(e.1, e.0)).count(),
            Repr::Tree(t) => t.tree.count_before(|tree, n| before(tree.nodes[n as usize].score, tree.nodes.member(n))),
        }
    }

    /// How many members have a score below `score` (or at most `score` when `inclusive`).
    pub fn count_below_score(&self, score: f64, inclusive: bool) -> usize {
        self.count_where(|s, _| if inclusive { s <= score } else { s < score })
    }

    /// How many members sort before the bound: below it, or also equal to it when `inclusive`
    /// (`Min` counts nothing, `Max` counts all).
    pub fn count_below_lex(&self, bound: &LexBound, inclusive: bool) -> usize {
        match bound {
            LexBound::Min => 0,
            LexBound::Max => self.len(),
            LexBound::Incl(v) | LexBound::Excl(v) => self.count_where(|_, m| {
                let o = m.cmp(v.as_slice());
                o == Ordering::Less || (inclusive && o == Ordering::Equal)
            }),
        }
    }

    /// Visits ranks `start..=end` ascending, or with `rev` descending (rank 0 = highest), until
    /// `f` returns false.
    pub fn walk(&self, start: usize, end: usize, rev: bool, f: &mut dyn FnMut(&[u8], f64) -> bool) {
        if start > end {
            return;
        }
        match &self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                let take = end.saturating_sub(start).saturating_add(1);
                let it: Box<dyn Iterator<Item = (&[u8], f64)>> =
                    if rev { Box::new(d.iter().rev()) } else { Box::new(d.iter()) };
                for (m, s) in it.skip(start).take(take) {
                    if !f(m, s) {
                        return;
                    }
                }
            }
            Repr::Tree(t) => t.tree.walk(start, end, rev, f),
        }
    }

    /// A snapshot of the zset for a reply encoded elsewhere (see `types::cow::Chunks`): the
    /// skiplist's node and member chunks are shared (one pointer each), a listpack is copied (it is small unless the
    /// limits were raised, and then still one buffer).
    pub fn snapshot(&mut self) -> ZSetSnapshot {
        match &mut self.repr {
            Repr::Pack(b) => ZSetSnapshot::Pack(b.clone()),
            Repr::Tree(t) => ZSetSnapshot::Tree {
                chunks: t.tree.nodes.chunks.snapshot(),
                members: t.tree.nodes.members.snapshot(),
                root: t.tree.root,
            },
        }
    }

    /// The member at ascending rank `k`.
    pub fn at(&self, k: usize) -> Option<(Vec<u8>, f64)> {
        match &self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                (k < d.len()).then(|| (d.get(k).0.to_vec(), d.get(k).1))
            }
            Repr::Tree(t) => t.tree.select(k).map(|(m, s)| (m.to_vec(), s)),
        }
    }

    /// Every (member, score) in ascending order.
    pub fn to_vec(&self) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::with_capacity(self.len());
        self.walk(0, usize::MAX, false, &mut |m, s| {
            v.push((m.to_vec(), s));
            true
        });
        v
    }

    /// Removes ascending ranks `start..=end` (clamped); returns how many went.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let len = self.len();
        if start > end || start >= len {
            return 0;
        }
        let end = end.min(len - 1);
        let count = end - start + 1;
        match &mut self.repr {
            Repr::Pack(b) => {
                let d = decode(b);
                *b = encode(d.iter().enumerate().filter(|(i, _)| *i < start || *i > end).map(|(_, e)| e));
            }
            Repr::Tree(t) => t.remove_ranks(start, count),
        }
        count
    }

    /// Cursor iteration for ZSCAN: a listpack answers everything at once (cursor 0 back), a
    /// skiplist walks its member table with the keyspace's SCAN guarantee.
    pub fn scan(&self, cursor: u64, f: &mut dyn FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Pack(b) => {
                for (m, s) in decode(b).iter() {
                    f(m, s);
                }
                0
            }
            Repr::Tree(t) => {
                let nodes = &t.tree.nodes;
                let key_of = member_of(nodes);
                t.index.scan_step(cursor, &key_of, &mut |loc| f(key_of(loc), nodes[loc as usize].score))
            }
        }
    }

    /// Bytes used by the value (MEMORY USAGE's estimate).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Pack(b) => b.len(),
            Repr::Tree(t) => {
                t.tree.nodes.len() * (std::mem::size_of::<Node>() + std::mem::size_of::<Box<[u8]>>())
                    + t.index.heap_bytes()
                    + t.tree.nodes.members().map(|m| m.len()).sum::<usize>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `pack_score` finds what decoding finds, for members sharing prefixes in every way (equal
    /// to, a prefix of, extending, or diverging from their neighbours and from the target).
    #[test]
    fn pack_score_agrees_with_decoding() {
        let members: Vec<Vec<u8>> =
            ["", "a", "ab", "abc", "abd", "abda", "b", "ba", "bab", "user:1", "user:10", "user:2", "x"]
                .iter()
                .map(|m| m.as_bytes().to_vec())
                .collect();
        let mut rng = 7u64;
        for _ in 0..300 {
            let mut entries: Vec<(&[u8], f64)> = Vec::new();
            for m in &members {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if rng >> 62 != 0 {
                    entries.push((m, (rng >> 40) as f64 % 5.0));
                }
            }
            entries.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
            let pack = encode(entries.iter().copied());
            let decoded = decode(&pack);
            for target in members.iter().chain([b"user:".to_vec(), b"abdab".to_vec(), b"zz".to_vec()].iter()) {
                let expected = decoded.find(target).map(|i| decoded.get(i).1);
                assert_eq!(pack_score(&pack, target), expected, "{entries:?} {target:?}");
            }
        }
    }

    /// A snapshot walks the zset as it was: inserts, removals (freed nodes reused) and range
    /// removals after it copy the chunks they touch and leave the snapshot's alone.
    #[test]
    fn snapshot_is_the_zset_when_taken() {
        let lim = Limits { max_entries: 128, max_value: 64 };
        let mut z = ZSet::new();
        for i in 0..20_000 {
            z.insert(format!("m:{i}").as_bytes(), (i % 977) as f64, lim);
        }
        let before = z.to_vec();
        let snap = z.snapshot();
        for i in 0..5_000 {
            z.remove(format!("m:{}", i * 3).as_bytes());
            z.insert(format!("n:{i}").as_bytes(), -(i as f64), lim);
        }
        z.remove_ranks(100, 2_000);
        let mut seen = Vec::new();
        snap.walk(0, usize::MAX, false, &mut |m, s| {
            seen.push((m.to_vec(), s));
            true
        });
        assert_eq!(seen, before);
        assert_eq!(snap.len(), 20_000);
        let mut tail = Vec::new();
        snap.walk(0, 9, true, &mut |m, s| {
            tail.push((m.to_vec(), s));
            true
        });
        let want: Vec<_> = before.iter().rev().take(10).cloned().collect();
        assert_eq!(tail, want);
        // The live zset went on as it should.
        assert_eq!(z.len(), 20_000 - 5_000 + 5_000 - 1_901);
        drop(snap);
        z.insert(b"last", 1e9, lim);
        assert_eq!(z.at(z.len() - 1).map(|p| p.0), Some(b"last".to_vec()));
    }

    fn model_vec(m: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
        v.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        v
    }

    #[test]
    fn entry_encoding_roundtrips() {
        for s in [
            0.0,
            1.0,
            127.0,
            128.0,
            16383.0,
            16384.0,
            -8192.0,
            -8193.0,
            253.0,
            254.0,
            -1.0,
            1e15,
            -1e15,
            0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-7,
            9.1e18,
        ] {
            let b = encode([(&b"abc"[..], s), (&b"abd"[..], s)].into_iter());
            let d = decode(&b);
            assert_eq!(d.get(0), (&b"abc"[..], s));
            assert_eq!(d.get(1), (&b"abd"[..], s));
            assert_eq!(pack_len(&b), 2);
        }
    }

    #[test]
    fn size_is_small() {
        assert_eq!(std::mem::size_of::<ZSet>(), 16);
    }

    fn check(limits: Limits, seed: u64) {
        fastrand::seed(seed);
        let mut z = ZSet::new();
        let mut m: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for step in 0..3000 {
            let key = format!("m{}", fastrand::u32(..300)).into_bytes();
            let score = if fastrand::bool() { fastrand::i32(-5..5) as f64 } else { fastrand::f64() * 10.0 };
            match fastrand::u32(..10) {
                0..=4 => {
                    assert_eq!(z.insert(&key, score, limits), m.insert(key.clone(), score));
                }
                5 | 6 => {
                    assert_eq!(z.remove(&key), m.remove(&key));
                }
                7 => {
                    let v = model_vec(&m);
                    let a = fastrand::usize(..v.len() + 2);
                    let b = fastrand::usize(..v.len() + 2);
                    let n = z.remove_ranks(a, b);
                    let mut removed = 0;
                    if a <= b && a < v.len() {
                        for (k, _) in &v[a..=b.min(v.len() - 1)] {
                            m.remove(k);
                            removed += 1;
                        }
                    }
                    assert_eq!(n, removed);
                }
                _ => {
                    let v = model_vec(&m);
                    if let Some(r) = v.iter().position(|e| e.0 == key) {
                        assert_eq!(z.rank(&key), Some((r, v[r].1)));
                    } else {
                        assert_eq!(z.rank(&key), None);
                    }
                    assert_eq!(z.count_below_score(1.0, true), v.iter().filter(|e| e.1 <= 1.0).count());
                    assert_eq!(z.count_below_score(1.0, false), v.iter().filter(|e| e.1 < 1.0).count());
                    let a = fastrand::usize(..v.len() + 2);
                    let b = fastrand::usize(..v.len() + 2);
                    let mut got = Vec::new();
                    z.walk(a, b, step % 2 == 0, &mut |m, s| {
                        got.push((m.to_vec(), s));
                        true
                    });
                    let mut want: Vec<_> = v.clone();
                    if step % 2 == 0 {
                        want.reverse();
                    }
                    let want: Vec<_> =
                        if a <= b && a < want.len() { want[a..=b.min(want.len() - 1)].to_vec() } else { vec![] };
                    assert_eq!(got, want);
                }
            }
            assert_eq!(z.len(), m.len());
            assert_eq!(z.to_vec(), model_vec(&m));
            assert_eq!(z.score(&key), m.get(&key).copied());
            if let Repr::Tree(t) = &z.repr {
                assert_eq!(t.index.len(), m.len());
                if step % 7 == 0 {
                    t.index.check(&member_of(&t.tree.nodes));
                }
            }
        }
        let mut scanned = Vec::new();
        let mut c = 0;
        loop {
            c = z.scan(c, &mut |m, s| scanned.push((m.to_vec(), s)));
            if c == 0 {
                break;
            }
        }
        scanned.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        assert_eq!(scanned, model_vec(&m));
        assert_eq!(z.clone(), z);
    }

    #[test]
    fn model_listpack() {
        check(Limits { max_entries: 100_000, max_value: 64 }, 7);
    }

    #[test]
    fn model_skiplist() {
        for seed in 11..16 {
            check(Limits { max_entries: 0, max_value: 64 }, seed);
        }
    }

    #[test]
    fn conversion_points() {
        let l = Limits { max_entries: 2, max_value: 3 };
        let mut z = ZSet::new();
        z.insert(b"a", 1.0, l);
        z.insert(b"b", 1.0, l);
        assert_eq!(z.encoding_name(), "listpack");
        z.insert(b"c", 1.0, l);
        assert_eq!(z.encoding_name(), "skiplist");
        let mut z = ZSet::new();
        z.insert(b"abcd", 1.0, l);
        assert_eq!(z.encoding_name(), "skiplist");
        let z = ZSet::from_pairs(vec![(b"a".to_vec(), 1.0)], l);
        assert_eq!(z.encoding_name(), "listpack");
    }
}

/// What a big ZRANGE's snapshot costs the executor, in thread CPU time (no preemption): taking
/// it on a 1.5M-member zset after writes and again with none between, and the worst ZADD/ZREM
/// while it is held (the writes that copy the chunks they touch). Lib tests run on glibc malloc,
/// not the server's jemalloc: its first allocations after many frees can take tens of ms. `[ZSET_COST_N=2600000] cargo test --profile ci --lib zset_snapshot_cost -- --ignored --nocapture`.
#[cfg(test)]
mod snapshot_cost {
    use super::*;
    use std::time::Duration;

    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    #[test]
    #[ignore]
    fn zset_snapshot_cost() {
        let lim = Limits { max_entries: 128, max_value: 64 };
        // ZSET_COST_N members (1.5M by default).
        let n = std::env::var("ZSET_COST_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1_500_000);
        let mut z = ZSet::new();
        for i in 0..n {
            z.insert(format!("member:{i}").as_bytes(), (i % 100_000) as f64 + 0.5, lim);
        }
        for round in 0..3 {
            let c0 = thread_cpu();
            let snap = z.snapshot();
            let take = thread_cpu() - c0;
            // A second one with no write in between (another client's ZRANGE of the same key).
            let c0 = thread_cpu();
            let again = z.snapshot();
            let take_again = thread_cpu() - c0;
            assert_eq!(again.len(), snap.len());
            drop(again);
            let (mut worst, mut total) = (Duration::ZERO, Duration::ZERO);
            let mut first = Vec::new();
            for i in 0..2_000 {
                let c0 = thread_cpu();
                z.insert(format!("w:{round}:{i}").as_bytes(), (i % 7) as f64, lim);
                z.remove(format!("member:{}", (i * 7919 + round) % n).as_bytes());
                let c = thread_cpu() - c0;
                worst = worst.max(c);
                total += c;
                if i < 10 {
                    first.push(c.as_micros());
                }
            }
            println!(
                "round {round}: snapshot {take:?}, again {take_again:?}; 2000 ZADD+ZREM pairs while held: worst {worst:?}, mean {:?}; the first ten (us): {first:?}",
                total / 2_000
            );
            drop(snap);
        }
        let (mut worst, mut total) = (Duration::ZERO, Duration::ZERO);
        for i in 0..2_000 {
            let c0 = thread_cpu();
            z.insert(format!("x:{i}").as_bytes(), (i % 7) as f64, lim);
            z.remove(format!("member:{}", (i * 104_729 + 11) % n).as_bytes());
            let c = thread_cpu() - c0;
            worst = worst.max(c);
            total += c;
        }
        println!("no snapshot: worst {worst:?}, mean {:?}", total / 2_000);
    }
}
