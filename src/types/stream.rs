//! The Stream value type: entries packed into append-only blocks indexed by their first ID
//! (Redis's rax of listpacks, here a `BTreeMap<StreamId, Node>`), plus consumer groups with their
//! pending-entries lists. No commands and no replies here.
//!
//! A node's buffer holds the master field names once, then each entry as: flags byte, varint
//! ms-delta and zigzag seq-delta from the node's first ID, then (unless its field names equal the
//! master's) a field count and the names, then the values. A string that is the canonical form
//! of a small integer is stored as the integer inside its length varint, so `12345` costs two
//! bytes. Deletion only flips the entry's flag, as Redis does; a node whose live count drops to
//! zero is removed. Each node also tracks the byte size the same entries would take in a Redis
//! listpack, so nodes split exactly where Redis splits them (stream-node-max-bytes), which keeps
//! XINFO's radix-tree-keys equal to Redis's.
//!
//! Measured (release, RSS growth, 3 fields per entry, values `v<i>`, `<i>`, `abcdefghij`):
//! 1M entries in one stream take 30.3 bytes/entry (redis-server 7.0.15: 36.9); 100k streams of
//! 10 entries take 959 bytes/stream (Redis: 4470, as it preallocates 4 KiB per new listpack).

use crate::util::varint;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A stream entry ID: milliseconds and sequence number, ordered as a 128-bit number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The next ID, or None at the very last one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            Some(StreamId { ms: self.ms + 1, seq: 0 })
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq + 1 })
        }
    }

    /// The previous ID, or None at 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            Some(StreamId { ms: self.ms - 1, seq: u64::MAX })
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq - 1 })
        }
    }

    /// `ms-seq` appended to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(b.format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(b.format(self.seq).as_bytes());
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        self.write(&mut v);
        v
    }
}

const FLAG_DELETED: u8 = 1;
const FLAG_SAMEFIELDS: u8 = 2;

/// One element of an entry as stored: bytes, or an integer that was given in canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// Appends the element's bytes.
    pub fn push_to(&self, out: &mut Vec<u8>) {
        match *self {
            Elem::Bytes(b) => out.extend_from_slice(b),
            Elem::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.push_to(&mut v);
        v
    }

    pub fn len(&self) -> usize {
        match *self {
            Elem::Bytes(b) => b.len(),
            Elem::Int(v) => itoa::Buffer::new().format(v).len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The canonical small integer a string spells, if it is one (it then round-trips exactly).
fn as_small_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let v = crate::util::num::parse_i64(s)?;
    if (-(1i64 << 61)..(1i64 << 61)).contains(&v) {
        Some(v)
    } else {
        None
    }
}

fn put_elem(out: &mut Vec<u8>, s: &[u8]) {
    match as_small_int(s) {
        Some(v) => varint::put(out, (zigzag(v) << 1) | 1),
        None => {
            varint::put(out, (s.len() as u64) << 1);
            out.extend_from_slice(s);
        }
    }
}

fn get_elem<'a>(buf: &'a [u8], pos: &mut usize) -> Elem<'a> {
    let h = varint::get(buf, pos);
    if h & 1 == 1 {
        Elem::Int(unzigzag(h >> 1))
    } else {
        let len = (h >> 1) as usize;
        let start = (*pos).min(buf.len());
        let end = (start + len).min(buf.len());
        *pos = end;
        Elem::Bytes(&buf[start..end])
    }
}

fn skip_elem(buf: &[u8], pos: &mut usize) {
    let h = varint::get(buf, pos);
    if h & 1 == 0 {
        *pos += (h >> 1) as usize;
    }
}

/// Size of an integer element in a Redis listpack (encoding plus one back-length byte).
fn lp_int_size(v: i64) -> u32 {
    let enc = if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8388608..=8388607).contains(&v) {
        4
    } else if (-2147483648..=2147483647).contains(&v) {
        5
    } else {
        9
    };
    enc + 1
}

/// Size of a string element in a Redis listpack (integers spelled canonically become integers).
fn lp_str_size(s: &[u8]) -> u32 {
    if s.len() <= 20 {
        if let Some(v) = crate::util::num::parse_i64(s) {
            return lp_int_size(v);
        }
    }
    let len = s.len() as u32;
    let enc = if len <= 63 {
        1 + len
    } else if len <= 4095 {
        2 + len
    } else {
        5 + len
    };
    let back = if enc <= 127 {
        1
    } else if enc < 16383 {
        2
    } else if enc < 2097151 {
        3
    } else if enc < 268435455 {
        4
    } else {
        5
    };
    enc + back
}

/// One block of entries.
#[derive(Debug, Clone, PartialEq)]
struct Node {
    /// Master field names, then the entries.
    buf: Vec<u8>,
    /// Where the first entry starts in `buf`.
    entries_at: u32,
    master_fields: u32,
    live: u32,
    deleted: u32,
    /// The size this node would have as a Redis listpack (for the node split rule).
    lp_bytes: u32,
    /// ID of the last entry written (deleted or not).
    last: StreamId,
}

/// An entry read from a node.
#[derive(Debug, Clone, Copy)]
pub struct EntryRef<'a> {
    pub id: StreamId,
    node: &'a Node,
    /// Position of the field count / first element.
    body: usize,
    same: bool,
}

impl<'a> EntryRef<'a> {
    pub fn num_fields(&self) -> usize {
        if self.same {
            self.node.master_fields as usize
        } else {
            let mut p = self.body;
            varint::get(&self.node.buf, &mut p) as usize
        }
    }

    /// Calls `f(field, value)` for every pair in order.
    pub fn for_each_pair(&self, mut f: impl FnMut(Elem<'a>, Elem<'a>)) {
        let buf: &'a [u8] = &self.node.buf;
        let mut p = self.body;
        if self.same {
            let mut mp = 0usize;
            for _ in 0..self.node.master_fields {
                let field = get_elem(buf, &mut mp);
                let value = get_elem(buf, &mut p);
                f(field, value);
            }
        } else {
            let n = varint::get(buf, &mut p);
            for _ in 0..n {
                let field = get_elem(buf, &mut p);
                let value = get_elem(buf, &mut p);
                f(field, value);
            }
        }
    }

    pub fn pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v = Vec::new();
        self.for_each_pair(|f, x| v.push((f.to_vec(), x.to_vec())));
        v
    }
}

impl Node {
    fn new(master: StreamId, fields: &[&[u8]]) -> Node {
        let mut buf = Vec::new();
        let mut lp = 7 + lp_int_size(1) + lp_int_size(0) + lp_int_size(fields.len() as i64) + lp_int_size(0);
        for f in fields {
            put_elem(&mut buf, f);
            lp += lp_str_size(f);
        }
        Node {
            entries_at: buf.len() as u32,
            buf,
            master_fields: fields.len() as u32,
            live: 0,
            deleted: 0,
            lp_bytes: lp - lp_int_size(1) + lp_int_size(0),
            last: master,
        }
    }

    /// Whether the entry's field names (every other element of `pairs`) equal the master's.
    fn same_fields(&self, pairs: &[&[u8]]) -> bool {
        if pairs.len() / 2 != self.master_fields as usize {
            return false;
        }
        let mut p = 0;
        for f in pairs.iter().step_by(2) {
            let eq = match get_elem(&self.buf, &mut p) {
                Elem::Bytes(b) => b == *f,
                Elem::Int(v) => as_small_int(f) == Some(v),
            };
            if !eq {
                return false;
            }
        }
        true
    }

    fn set_count(&mut self, live: u32, deleted: u32) {
        self.lp_bytes = self.lp_bytes - lp_int_size(self.live as i64) - lp_int_size(self.deleted as i64)
            + lp_int_size(live as i64)
            + lp_int_size(deleted as i64);
        self.live = live;
        self.deleted = deleted;
    }

    fn append(&mut self, master: StreamId, id: StreamId, pairs: &[&[u8]]) {
        let n = pairs.len() / 2;
        let same = self.same_fields(pairs);
        let flags = if same { FLAG_SAMEFIELDS } else { 0 };
        let ms_delta = id.ms.wrapping_sub(master.ms);
        let seq_delta = id.seq.wrapping_sub(master.seq) as i64;
        // Reserve an upper bound exactly: the allocator's size classes absorb most of these
        // reallocations, and a node never carries a doubling's worth of slack.
        let bound = 1 + 10 + 10 + 10 + pairs.iter().map(|p| p.len() + 10).sum::<usize>();
        if self.buf.capacity() - self.buf.len() < bound {
            self.buf.reserve_exact(bound);
        }
        let buf = &mut self.buf;
        buf.push(flags);
        varint::put(buf, ms_delta);
        varint::put(buf, zigzag(seq_delta));
        let mut lp = lp_int_size(flags as i64) + lp_int_size(ms_delta as i64) + lp_int_size(seq_delta);
        let lp_count = if same { 3 + n } else { 3 + 2 * n + 1 };
        if same {
            for v in pairs.iter().skip(1).step_by(2) {
                put_elem(buf, v);
                lp += lp_str_size(v);
            }
        } else {
            varint::put(buf, n as u64);
            lp += lp_int_size(n as i64);
            for p in pairs {
                put_elem(buf, p);
                lp += lp_str_size(p);
            }
        }
        lp += lp_int_size(lp_count as i64);
        self.lp_bytes += lp;
        self.set_count(self.live + 1, self.deleted);
        self.last = id;
    }

    /// Decodes the entry at `pos`: (id, flags, body position, next position).
    fn decode(&self, master: StreamId, pos: usize) -> (StreamId, u8, usize, usize) {
        let buf = &self.buf;
        let mut p = pos;
        let flags = buf.get(p).copied().unwrap_or(0);
        p += 1;
        let ms = master.ms.wrapping_add(varint::get(buf, &mut p));
        let seq = master.seq.wrapping_add(unzigzag(varint::get(buf, &mut p)) as u64);
        let body = p;
        if flags & FLAG_SAMEFIELDS != 0 {
            for _ in 0..self.master_fields {
                skip_elem(buf, &mut p);
            }
        } else {
            let n = varint::get(buf, &mut p);
            for _ in 0..2 * n {
                skip_elem(buf, &mut p);
            }
        }
        (StreamId { ms, seq }, flags, body, p)
    }

    /// Positions of every entry (deleted included), in order.
    fn positions(&self, master: StreamId) -> Vec<u32> {
        let mut out = Vec::with_capacity((self.live + self.deleted) as usize);
        let mut p = self.entries_at as usize;
        while p < self.buf.len() {
            out.push(p as u32);
            p = self.decode(master, p).3;
        }
        out
    }

    fn entry_at(&self, master: StreamId, pos: usize) -> (EntryRef<'_>, bool) {
        let (id, flags, body, _) = self.decode(master, pos);
        (EntryRef { id, node: self, body, same: flags & FLAG_SAMEFIELDS != 0 }, flags & FLAG_DELETED != 0)
    }
}

/// A read-only view of one block, for the RDB writer (which re-encodes it as a Redis listpack).
#[derive(Clone, Copy)]
pub struct BlockView<'a> {
    /// The block's key: the ID every entry's delta is taken from.
    pub master: StreamId,
    node: &'a Node,
}

impl<'a> BlockView<'a> {
    /// Live entries in the block.
    pub fn live(&self) -> u32 {
        self.node.live
    }

    /// Deleted entries still present in the block.
    pub fn deleted(&self) -> u32 {
        self.node.deleted
    }

    /// The master field names.
    pub fn master_fields(&self) -> Vec<Elem<'a>> {
        let buf: &'a [u8] = &self.node.buf;
        let mut p = 0usize;
        (0..self.node.master_fields).map(|_| get_elem(buf, &mut p)).collect()
    }

    /// Calls `f(entry, deleted, same_fields)` for every entry, deleted ones included, in order.
    pub fn for_each_entry(&self, mut f: impl FnMut(EntryRef<'a>, bool, bool)) {
        let node: &'a Node = self.node;
        let mut p = node.entries_at as usize;
        while p < node.buf.len() {
            let (id, flags, body, next) = node.decode(self.master, p);
            p = next;
            let same = flags & FLAG_SAMEFIELDS != 0;
            f(EntryRef { id, node, body, same }, flags & FLAG_DELETED != 0, same);
        }
    }
}

/// A pending entry: delivered to a consumer of a group and not acknowledged yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Nack {
    pub delivery_time: i64,
    pub delivery_count: u64,
    pub consumer: Vec<u8>,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Consumer {
    /// Last time the consumer was served (Redis 7.0's seen-time).
    pub seen_time: i64,
    /// Last time entries were delivered to or claimed by it (Redis 7.2's active-time), -1 never.
    /// Kept so that RDB files from 7.2+ keep it and XINFO STREAM FULL shows it.
    pub active_time: i64,
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical read counter; -1 when unknown.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

/// -1: a group's read counter is not known.
pub const INVALID_ENTRIES_READ: i64 = -1;

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// Creates `name` if absent; returns whether it was created.
    pub fn create_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(name.to_vec(), Consumer { seen_time: now_ms, active_time: -1, pel: BTreeSet::new() });
        true
    }

    /// Deletes a consumer and its pending entries; returns how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }
}

/// A Redis stream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    /// Behind an `Arc` (as small as a `Box`, so a B-tree leaf stays small) so a big XRANGE's
    /// snapshot shares the blocks it lists (`snapshot_range`): a write to a block a snapshot
    /// still holds copies that block first (`Arc::make_mut`), the others are not copied.
    nodes: BTreeMap<StreamId, Arc<Node>>,
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

/// A range of a stream as it was when taken (`Stream::snapshot_range`): its blocks, shared.
pub struct StreamSnapshot {
    /// In ascending order: the block that may hold the range's start, up to the last that may
    /// hold its end (a `Vec`, cheaper to build than a map of the same).
    nodes: Vec<(StreamId, Arc<Node>)>,
}

impl StreamSnapshot {
    /// As `Stream::range`, over the snapshot's blocks (`start` and `end` those it was taken for,
    /// or inside them).
    pub fn range<'a>(&'a self, start: StreamId, end: StreamId, rev: bool, f: impl FnMut(EntryRef<'a>) -> bool) {
        if start > end {
            return;
        }
        // From the block that may hold the first entry wanted: a reply encoded piece by piece
        // resumes the walk many times over.
        if rev {
            let to = self.nodes.partition_point(|(k, _)| *k <= end);
            walk_rev(self.nodes[..to].iter().map(|(k, n)| (k, n)).rev(), start, end, f)
        } else {
            let from = self.nodes.partition_point(|(k, _)| *k <= start).saturating_sub(1);
            walk_fwd(self.nodes[from..].iter().map(|(k, n)| (k, n)), start, end, f)
        }
    }
}

/// Visits live entries of `nodes` with `start <= id <= end` in order (reverse when `rev`); `f`
/// returns false to stop.
fn range_in<'a>(
    nodes: &'a BTreeMap<StreamId, Arc<Node>>,
    start: StreamId,
    end: StreamId,
    rev: bool,
    f: impl FnMut(EntryRef<'a>) -> bool,
) {
    if start > end {
        return;
    }
    if !rev {
        let from = nodes.range(..=start).next_back().map(|(k, _)| *k).unwrap_or(start);
        walk_fwd(nodes.range(from..=end), start, end, f)
    } else {
        walk_rev(nodes.range(..=end).rev(), start, end, f)
    }
}

/// The forward half of `range_in`, over blocks in ascending order from the one that may hold
/// `start`.
fn walk_fwd<'a>(
    blocks: impl Iterator<Item = (&'a StreamId, &'a Arc<Node>)>,
    start: StreamId,
    end: StreamId,
    mut f: impl FnMut(EntryRef<'a>) -> bool,
) {
    for (&master, node) in blocks {
        if master > end {
            return;
        }
        if node.last < start {
            continue;
        }
        let mut p = node.entries_at as usize;
        while p < node.buf.len() {
            let (id, flags, body, next) = node.decode(master, p);
            p = next;
            if id > end {
                return;
            }
            if id < start || flags & FLAG_DELETED != 0 {
                continue;
            }
            if !f(EntryRef { id, node, body, same: flags & FLAG_SAMEFIELDS != 0 }) {
                return;
            }
        }
    }
}

/// The reverse half of `range_in`, over blocks in descending order from the last one that may
/// hold `end`.
fn walk_rev<'a>(
    blocks: impl Iterator<Item = (&'a StreamId, &'a Arc<Node>)>,
    start: StreamId,
    end: StreamId,
    mut f: impl FnMut(EntryRef<'a>) -> bool,
) {
    for (&master, node) in blocks {
        if master > end {
            continue;
        }
        if node.last < start {
            return;
        }
        for &pos in node.positions(master).iter().rev() {
            let (e, deleted) = node.entry_at(master, pos as usize);
            if e.id < start {
                return;
            }
            if e.id > end || deleted {
                continue;
            }
            if !f(e) {
                return;
            }
        }
    }
}

/// Why an append failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the stream's last ID.
    IdTooSmall,
    /// The elements are larger than a node may hold.
    TooLarge,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        "stream"
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Number of blocks (XINFO radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The node count of a radix tree holding the block keys as 16-byte big-endian strings, as
    /// Redis's rax builds it for keys added in order (XINFO radix-tree-nodes).
    pub fn radix_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|k| {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&k.ms.to_be_bytes());
                b[8..].copy_from_slice(&k.seq.to_be_bytes());
                b
            })
            .collect();
        if keys.is_empty() {
            return 1;
        }
        fn count(keys: &[[u8; 16]], depth: usize) -> usize {
            if depth == 16 {
                return 1;
            }
            // Longest common run from `depth`.
            let first = &keys[0];
            let last = &keys[keys.len() - 1];
            let mut d = depth;
            while d < 16 && first[d] == last[d] {
                d += 1;
            }
            if d > depth {
                return 1 + count(keys, d);
            }
            // Branch on byte `depth`.
            let mut total = 1;
            let mut i = 0;
            while i < keys.len() {
                let b = keys[i][depth];
                let mut j = i;
                while j < keys.len() && keys[j][depth] == b {
                    j += 1;
                }
                total += count(&keys[i..j], depth + 1);
                i = j;
            }
            total
        }
        count(&keys, 0)
    }

    /// Next automatic ID after the last one at time `now_ms`.
    pub fn next_auto_id(&self, now_ms: u64) -> Option<StreamId> {
        if now_ms > self.last_id.ms {
            Some(StreamId { ms: now_ms, seq: 0 })
        } else {
            self.last_id.incr()
        }
    }

    /// Appends an entry with `pairs` (field, value, field, value...) under `id`. The block limits
    /// are stream-node-max-bytes and stream-node-max-entries (0 = unlimited).
    pub fn append(
        &mut self,
        id: StreamId,
        pairs: &[&[u8]],
        node_max_bytes: usize,
        node_max_entries: usize,
    ) -> Result<(), AppendError> {
        if id <= self.last_id {
            return Err(AppendError::IdTooSmall);
        }
        let total: usize = pairs.iter().map(|p| p.len()).sum();
        const LP_MAX: usize = (1 << 30) - 1;
        if total > LP_MAX {
            return Err(AppendError::TooLarge);
        }
        let max_bytes = if node_max_bytes == 0 || node_max_bytes > LP_MAX { LP_MAX } else { node_max_bytes };
        let need_new = match self.nodes.last_key_value() {
            None => true,
            Some((_, n)) => {
                n.lp_bytes as usize + total >= max_bytes
                    || (node_max_entries > 0 && (n.live + n.deleted) as usize >= node_max_entries)
            }
        };
        if need_new {
            if let Some(mut e) = self.nodes.last_entry() {
                if e.get().buf.capacity() > e.get().buf.len() {
                    Arc::make_mut(e.get_mut()).buf.shrink_to_fit();
                }
            }
            let fields: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
            self.nodes.insert(id, Arc::new(Node::new(id, &fields)));
        }
        if let Some(mut e) = self.nodes.last_entry() {
            let master = *e.key();
            Arc::make_mut(e.get_mut()).append(master, id, pairs);
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(())
    }

    /// Visits live entries with `start <= id <= end` in order (reverse when `rev`); `f` returns
    /// false to stop.
    pub fn range<'a>(&'a self, start: StreamId, end: StreamId, rev: bool, f: impl FnMut(EntryRef<'a>) -> bool) {
        range_in(&self.nodes, start, end, rev, f)
    }

    /// The blocks holding the entries with `start <= id <= end`, shared (no entry is copied):
    /// the range as it is now, for a reply encoded on another thread while the stream is
    /// written. Costs one reference count per block (a block holds up to
    /// stream-node-max-entries entries, 100 by default).
    pub fn snapshot_range(&self, start: StreamId, end: StreamId) -> StreamSnapshot {
        if start > end {
            return StreamSnapshot { nodes: Vec::new() };
        }
        let from = self.nodes.range(..=start).next_back().map(|(k, _)| *k).unwrap_or(start);
        StreamSnapshot { nodes: self.nodes.range(from..=end).map(|(k, n)| (*k, n.clone())).collect() }
    }

    /// The live entry with this exact ID.
    pub fn get(&self, id: StreamId) -> Option<EntryRef<'_>> {
        let mut found = None;
        self.range(id, id, false, |e| {
            found = Some(e);
            false
        });
        found
    }

    /// First (or last) live entry ID; (MAX for first / MIN for last when empty, as Redis).
    pub fn edge_id(&self, first: bool) -> StreamId {
        let mut out = if first { StreamId::MAX } else { StreamId::MIN };
        self.range(StreamId::MIN, StreamId::MAX, !first, |e| {
            out = e.id;
            false
        });
        out
    }

    /// Marks the entry `id` deleted. Returns whether it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        if node.last < id {
            return false;
        }
        let mut p = node.entries_at as usize;
        while p < node.buf.len() {
            let (eid, flags, _, next) = node.decode(master, p);
            if eid == id {
                if flags & FLAG_DELETED != 0 {
                    return false;
                }
                let node = Arc::make_mut(node);
                node.buf[p] = flags | FLAG_DELETED;
                let (l, d) = (node.live - 1, node.deleted + 1);
                node.set_count(l, d);
                if l == 0 {
                    self.nodes.remove(&master);
                }
                self.length -= 1;
                return true;
            }
            if eid > id {
                return false;
            }
            p = next;
        }
        false
    }

    /// Refreshes `first_id` after deletions.
    pub fn refresh_first_id(&mut self) {
        self.first_id = if self.length == 0 { StreamId::MIN } else { self.edge_id(true) };
    }

    /// Trims by MAXLEN (`minid` None) or MINID, Redis's algorithm: whole blocks first; with
    /// `approx` it stops at the first block it cannot drop whole; `limit` (0 = none) caps the
    /// entries removed. Returns the number removed.
    pub fn trim(&mut self, maxlen: Option<u64>, minid: Option<StreamId>, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Some(m) = maxlen {
                if self.length <= m {
                    break;
                }
            }
            let Some(mut e) = self.nodes.first_entry() else { break };
            let master = *e.key();
            let entries = e.get().live as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove = match (maxlen, minid) {
                (Some(m), _) => self.length - entries >= m,
                (None, Some(id)) => e.get().last < id,
                _ => false,
            };
            if remove {
                e.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let node = Arc::make_mut(e.get_mut());
            let mut removed_here = 0u32;
            let mut p = node.entries_at as usize;
            while p < node.buf.len() {
                let (id, flags, _, next) = node.decode(master, p);
                let stop = match (maxlen, minid) {
                    (Some(m), _) => self.length <= m,
                    (None, Some(min)) => id >= min,
                    _ => true,
                };
                if stop {
                    break;
                }
                if flags & FLAG_DELETED == 0 {
                    node.buf[p] = flags | FLAG_DELETED;
                    removed_here += 1;
                    self.length -= 1;
                }
                p = next;
            }
            let (l, d) = (node.live - removed_here, node.deleted + removed_here);
            node.set_count(l, d);
            deleted += removed_here as u64;
            break;
        }
        self.refresh_first_id();
        deleted
    }

    /// Redis's estimate of how many entries precede and include `id` since the stream began;
    /// None when it cannot be known.
    pub fn distance_from_first_ever(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(self.entries_added),
            std::cmp::Ordering::Greater => return None,
            _ => {}
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return Some(self.entries_added - self.length),
                std::cmp::Ordering::Equal => return Some(self.entries_added - self.length + 1),
                _ => {}
            }
        }
        None
    }

    /// Whether `[start, end]` (None = open) may contain a deleted entry.
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        let s = start.unwrap_or(StreamId::MIN);
        let e = end.unwrap_or(StreamId::MAX);
        s <= self.max_deleted_id && self.max_deleted_id <= e
    }

    /// A group's lag (XINFO GROUPS), None when unknown.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.range_has_tombstones(Some(g.last_id), None) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        self.distance_from_first_ever(g.last_id).map(|r| self.entries_added as i64 - r as i64)
    }

    /// Every block in ID order (read-only; for the RDB writer).
    pub fn blocks(&self) -> impl Iterator<Item = BlockView<'_>> {
        self.nodes.iter().map(|(&master, node)| BlockView { master, node })
    }

    /// Bytes allocated for entries (MEMORY USAGE estimate).
    pub fn alloc_bytes(&self) -> usize {
        self.nodes.values().map(|n| n.buf.capacity() + 64).sum::<usize>() + 128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn append_range_delete_against_model() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut s = Stream::new();
        type Fields = Vec<(Vec<u8>, Vec<u8>)>;
        let mut model: BTreeMap<StreamId, Fields> = BTreeMap::new();
        let mut ms = 1;
        for i in 0..3000u64 {
            ms += rng.u64(0..3);
            let nid = s.next_auto_id(ms).unwrap();
            let nf = if rng.u8(0..4) == 0 { 1 + rng.usize(0..3) } else { 2 };
            let mut pairs: Vec<Vec<u8>> = Vec::new();
            for f in 0..nf {
                pairs.push(format!("f{f}").into_bytes());
                let v = match rng.u8(0..3) {
                    0 => i.to_string().into_bytes(),
                    1 => format!("-{i}").into_bytes(),
                    _ => vec![b'x'; rng.usize(0..80)],
                };
                pairs.push(v);
            }
            let refs: Vec<&[u8]> = pairs.iter().map(|p| &p[..]).collect();
            s.append(nid, &refs, 4096, 100).unwrap();
            model.insert(nid, pairs.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect());
            if rng.u8(0..5) == 0 {
                let keys: Vec<_> = model.keys().copied().collect();
                let k = keys[rng.usize(0..keys.len())];
                assert!(s.delete(k));
                assert!(!s.delete(k));
                model.remove(&k);
            }
        }
        assert_eq!(s.len() as usize, model.len());
        let mut got = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            got.push((e.id, e.pairs()));
            true
        });
        let want: Vec<_> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(got, want);
        let mut rev = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, true, |e| {
            rev.push(e.id);
            true
        });
        rev.reverse();
        assert_eq!(rev, model.keys().copied().collect::<Vec<_>>());
        // Sub-ranges.
        let keys: Vec<_> = model.keys().copied().collect();
        for _ in 0..200 {
            let a = keys[rng.usize(0..keys.len())];
            let b = keys[rng.usize(0..keys.len())];
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            let mut got = Vec::new();
            s.range(a, b, false, |e| {
                got.push(e.id);
                true
            });
            assert_eq!(got, model.range(a..=b).map(|(k, _)| *k).collect::<Vec<_>>());
        }
        // Trim exactly.
        let n = s.trim(Some(500), None, false, 0);
        assert_eq!(s.len(), 500);
        assert_eq!(n as usize, model.len() - 500);
        let first = s.edge_id(true);
        assert_eq!(first, *model.keys().nth(model.len() - 500).unwrap());
    }

    #[test]
    fn small_blocks_trim_against_model() {
        for (max_bytes, max_entries) in [(0usize, 3usize), (96, 0), (4096, 100)] {
            let mut rng = fastrand::Rng::with_seed(11);
            let mut s = Stream::new();
            let mut model: BTreeMap<StreamId, Vec<u8>> = BTreeMap::new();
            for i in 1..=2000u64 {
                let v = format!("v{}", rng.u32(..)).into_bytes();
                s.append(id(i, rng.u64(0..3)), &[b"f", &v], max_bytes, max_entries).unwrap();
                model.insert(s.last_id, v);
                match rng.u8(0..40) {
                    0 => {
                        let keep = rng.u64(0..model.len() as u64 + 1);
                        let approx = rng.bool();
                        let n = s.trim(Some(keep), None, approx, 0);
                        assert!(approx || s.len() == keep.min(model.len() as u64));
                        for _ in 0..n {
                            model.pop_first();
                        }
                    }
                    1 => {
                        let min = id(rng.u64(0..i + 1), 0);
                        let n = s.trim(None, Some(min), false, 0);
                        let before = model.len();
                        model.retain(|k, _| *k >= min);
                        assert_eq!(n as usize, before - model.len());
                    }
                    2..=6 => {
                        if let Some((&k, _)) = model.iter().nth(rng.usize(0..model.len())) {
                            assert!(s.delete(k));
                            model.remove(&k);
                        }
                    }
                    _ => {}
                }
                assert_eq!(s.len() as usize, model.len());
            }
            let mut got = Vec::new();
            s.range(StreamId::MIN, StreamId::MAX, false, |e| {
                let mut v = Vec::new();
                e.for_each_pair(|_, x| v = x.to_vec());
                got.push((e.id, v));
                true
            });
            assert_eq!(got, model.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn node_split_follows_listpack_size() {
        let mut s = Stream::new();
        for i in 1..=250 {
            s.append(id(i, 0), &[b"field", b"value"], 4096, 100).unwrap();
        }
        assert_eq!(s.node_count(), 3);
        assert_eq!(s.radix_nodes(), 8);
        let mut s = Stream::new();
        let big = vec![b'a'; 1000];
        for i in 1..=10 {
            s.append(id(i, 0), &[b"f", &big], 4096, 100).unwrap();
        }
        // Redis 7.0.15 reports 3 keys and 8 rax nodes for both.
        assert_eq!(s.node_count(), 3);
        assert_eq!(s.radix_nodes(), 8);
    }

    #[test]
    fn radix_nodes_small_cases() {
        let mut s = Stream::new();
        assert_eq!(s.radix_nodes(), 1);
        s.append(id(1, 0), &[b"a", b"b"], 4096, 100).unwrap();
        assert_eq!(s.radix_nodes(), 2);
    }

    #[test]
    fn ids_incr_decr() {
        assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
    }
}
