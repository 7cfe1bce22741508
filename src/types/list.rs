//! The List value type: a deque of compact nodes, each one contiguous byte buffer of entries
//! (Redis's quicklist of listpacks). A small list is a single node, so it costs one buffer; a big
//! one is a chain of nodes bounded by the `list-max-listpack-size` fill (entries per node when
//! positive, a byte size class of 4/8/16/32/64 KB for -1..-5), which keeps pushes and pops at
//! either end O(1) amortized (the memmove inside a node is bounded by the node size).
//!
//! Redis 7.0 reports every list as `quicklist` (the `listpack` list encoding arrived in 7.2), so
//! node layout is invisible to clients and `encoding_name` always answers `quicklist`.
//!
//! Entry layout inside a node: a forward length header, the bytes, and a backward length trailer,
//! so a node can be walked from either end. Lengths under 128 take one byte each way; longer ones
//! take five (marker 0x80 plus a little-endian u32). Values are kept as plain bytes: LRANGE then
//! copies them straight into the reply, which measured faster than re-formatting integers.

use std::collections::VecDeque;

/// Byte cap of a node for the negative fill levels -1..-5.
const SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Byte cap for a node under a positive (entry count) fill, as Redis's safety limit.
const SAFETY_LIMIT: usize = 8192;
const LONG: u8 = 0x80;

/// A Redis list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List {
    nodes: Nodes,
    len: usize,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Node {
    buf: Vec<u8>,
    count: usize,
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

/// Bytes an entry of `len` data bytes takes in a node.
#[inline]
fn entry_size(len: usize) -> usize {
    if len < LONG as usize {
        len + 2
    } else {
        len + 10
    }
}

fn encode_entry(out: &mut Vec<u8>, data: &[u8]) {
    let n = data.len();
    if n < LONG as usize {
        out.push(n as u8);
        out.extend_from_slice(data);
        out.push(n as u8);
    } else {
        out.push(LONG);
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.push(LONG);
    }
}

/// The entry starting at `off`: (data start, data length, offset of the next entry).
#[inline]
fn read_fwd(buf: &[u8], off: usize) -> (usize, usize, usize) {
    let h = buf[off];
    if h < LONG {
        let n = h as usize;
        (off + 1, n, off + n + 2)
    } else {
        let n = u32::from_le_bytes([buf[off + 1], buf[off + 2], buf[off + 3], buf[off + 4]]) as usize;
        (off + 5, n, off + n + 10)
    }
}

/// The entry ending at `end`: (data start, data length, offset where the entry starts).
#[inline]
fn read_back(buf: &[u8], end: usize) -> (usize, usize, usize) {
    let t = buf[end - 1];
    if t < LONG {
        let n = t as usize;
        (end - 1 - n, n, end - n - 2)
    } else {
        let n = u32::from_le_bytes([buf[end - 5], buf[end - 4], buf[end - 3], buf[end - 2]]) as usize;
        (end - 5 - n, n, end - n - 10)
    }
}

/// Whether a node of `bytes` bytes and `count` entries is within the fill limit.
fn fits(bytes: usize, count: usize, fill: i64) -> bool {
    if fill < 0 {
        let class = ((-fill - 1) as usize).min(SIZE_CLASSES.len() - 1);
        bytes <= SIZE_CLASSES[class]
    } else {
        bytes <= SAFETY_LIMIT && count as i64 <= fill.max(1)
    }
}

impl Node {
    fn with_entry(data: &[u8]) -> Node {
        let mut buf = Vec::with_capacity(entry_size(data.len()));
        encode_entry(&mut buf, data);
        Node { buf, count: 1 }
    }

    /// Whether one more entry of `len` bytes may join this node.
    fn can_take(&self, len: usize, fill: i64) -> bool {
        fits(self.buf.len() + entry_size(len), self.count + 1, fill)
    }

    /// Byte offset of entry `i` (0-based; `i == count` gives the end), walking from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        if i <= self.count / 2 {
            let mut off = 0;
            for _ in 0..i {
                off = read_fwd(&self.buf, off).2;
            }
            off
        } else {
            let mut end = self.buf.len();
            for _ in i..self.count {
                end = read_back(&self.buf, end).2;
            }
            end
        }
    }

    /// Inserts an encoded entry at byte offset `off`.
    fn insert_at(&mut self, off: usize, data: &[u8]) {
        let size = entry_size(data.len());
        // Exact growth: jemalloc's size classes make repeated exact reallocs cheap, and the node
        // keeps no slack (memory is what small lists are about).
        self.buf.reserve_exact(size);
        let old = self.buf.len();
        self.buf.resize(old + size, 0);
        self.buf.copy_within(off..old, off + size);
        let n = data.len();
        let slot = &mut self.buf[off..off + size];
        if n < LONG as usize {
            slot[0] = n as u8;
            slot[1..1 + n].copy_from_slice(data);
            slot[1 + n] = n as u8;
        } else {
            let len = (n as u32).to_le_bytes();
            slot[0] = LONG;
            slot[1..5].copy_from_slice(&len);
            slot[5..5 + n].copy_from_slice(data);
            slot[5 + n..9 + n].copy_from_slice(&len);
            slot[9 + n] = LONG;
        }
        self.count += 1;
    }

    fn push_back(&mut self, data: &[u8]) {
        self.buf.reserve_exact(entry_size(data.len()));
        encode_entry(&mut self.buf, data);
        self.count += 1;
    }

    /// Splits the node in two halves by entry count; returns the second half.
    fn split(&mut self) -> Node {
        let keep = self.count / 2;
        let off = self.offset_of(keep);
        let tail = Node { buf: self.buf[off..].to_vec(), count: self.count - keep };
        self.buf.truncate(off);
        self.buf.shrink_to_fit();
        self.count = keep;
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
    type Item = (usize, &'a [u8]);

    /// Yields (entry start offset, data).
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.off >= self.buf.len() {
            return None;
        }
        let start = self.off;
        let (d, n, next) = read_fwd(self.buf, start);
        self.off = next;
        Some((start, &self.buf[d..d + n]))
    }
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    /// The name OBJECT ENCODING reports (Redis 7.0 has only quicklist lists).
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of nodes (for tests and memory reports).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes held by the list's buffers (approximate memory usage).
    pub fn allocated_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>() + self.nodes.spine_bytes()
    }

    pub fn push_back(&mut self, data: &[u8], fill: i64) {
        match self.nodes.back_mut() {
            Some(node) if node.can_take(data.len(), fill) => node.push_back(data),
            _ => {
                self.nodes.push_back(Node::with_entry(data));
            }
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, data: &[u8], fill: i64) {
        match self.nodes.front_mut() {
            Some(node) if node.can_take(data.len(), fill) => node.insert_at(0, data),
            _ => {
                self.nodes.push_front(Node::with_entry(data));
            }
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.front_mut()?;
        let (d, n, next) = read_fwd(&node.buf, 0);
        let out = node.buf[d..d + n].to_vec();
        node.buf.drain(..next);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.pop_front();
        }
        self.len -= 1;
        Some(out)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let node = self.nodes.back_mut()?;
        let (d, n, start) = read_back(&node.buf, node.buf.len());
        let out = node.buf[d..d + n].to_vec();
        node.buf.truncate(start);
        node.count -= 1;
        if node.count == 0 {
            self.nodes.pop_back();
        }
        self.len -= 1;
        Some(out)
    }

    /// (node index, entry index within it) of element `i` (< len), walking from the nearer end.
    fn locate(&self, mut i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            for (ni, node) in self.nodes.iter().enumerate() {
                if i < node.count {
                    return (ni, i);
                }
                i -= node.count;
            }
        } else {
            let mut from_end = self.len - 1 - i;
            for ni in (0..self.nodes.len()).rev() {
                let node = &self.nodes[ni];
                if from_end < node.count {
                    return (ni, node.count - 1 - from_end);
                }
                from_end -= node.count;
            }
        }
        (self.nodes.len(), 0)
    }

    /// Element `i` (0-based from the head), if it exists.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (ni, ei) = self.locate(i);
        let node = &self.nodes[ni];
        let (d, n, _) = read_fwd(&node.buf, node.offset_of(ei));
        Some(&node.buf[d..d + n])
    }

    /// Keeps node `ni` within the fill limit after a growth in the middle.
    fn rebalance(&mut self, ni: usize, fill: i64) {
        let node = &mut self.nodes[ni];
        if node.count > 1 && !fits(node.buf.len(), node.count, fill) {
            let tail = node.split();
            self.nodes.insert(ni + 1, tail);
            // A split half may still be oversized when entries are large; split again as needed.
            self.rebalance(ni + 1, fill);
            self.rebalance(ni, fill);
        }
    }

    /// Replaces element `i`. Returns false when `i` is out of range.
    pub fn set(&mut self, i: usize, data: &[u8], fill: i64) -> bool {
        if i >= self.len {
            return false;
        }
        let (ni, ei) = self.locate(i);
        let node = &mut self.nodes[ni];
        let off = node.offset_of(ei);
        let (_, _, next) = read_fwd(&node.buf, off);
        let mut enc = Vec::with_capacity(entry_size(data.len()));
        encode_entry(&mut enc, data);
        node.buf.splice(off..next, enc);
        self.rebalance(ni, fill);
        true
    }

    /// Inserts `data` so that it becomes element `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, data: &[u8], fill: i64) {
        if i == 0 {
            return self.push_front(data, fill);
        }
        if i >= self.len {
            return self.push_back(data, fill);
        }
        let (ni, ei) = self.locate(i);
        let node = &mut self.nodes[ni];
        let off = node.offset_of(ei);
        node.insert_at(off, data);
        self.len += 1;
        self.rebalance(ni, fill);
    }

    /// Index of the first element equal to `value`.
    pub fn position(&self, value: &[u8]) -> Option<usize> {
        self.iter().position(|e| e == value)
    }

    /// Removes the first `n` elements.
    pub fn remove_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else { break };
            if node.count <= n {
                n -= node.count;
                self.nodes.pop_front();
            } else {
                let off = node.offset_of(n);
                node.buf.drain(..off);
                node.count -= n;
                n = 0;
            }
        }
        self.nodes.settle();
    }

    /// Removes the last `n` elements.
    pub fn remove_back(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else { break };
            if node.count <= n {
                n -= node.count;
                self.nodes.pop_back();
            } else {
                let off = node.offset_of(node.count - n);
                node.buf.truncate(off);
                node.count -= n;
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
                node.entries().filter(|(_, d)| *d == value).map(|(s, d)| (s, s + entry_size(d.len()))).collect();
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
            node.buf = kept;
            node.count -= starts.len();
            removed += starts.len();
        }
        self.nodes.retain(|n| n.count > 0);
        self.len -= removed;
        removed
    }

    /// Forward iterator over all elements.
    pub fn iter(&self) -> Iter<'_> {
        Iter { nodes: &self.nodes, ni: 0, off: 0 }
    }

    /// Forward iterator starting at element `i`.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len {
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
    pub fn for_each_range(&self, start: usize, mut n: usize, mut f: impl FnMut(&[u8])) {
        if start >= self.len || n == 0 {
            return;
        }
        let (mut ni, ei) = self.locate(start);
        let mut off = self.nodes[ni].offset_of(ei);
        while n > 0 && ni < self.nodes.len() {
            let buf = &self.nodes[ni].buf[..];
            while n > 0 && off < buf.len() {
                let (d, len, next) = read_fwd(buf, off);
                f(&buf[d..d + len]);
                off = next;
                n -= 1;
            }
            ni += 1;
            off = 0;
        }
    }

    /// An estimate of the encoded bytes of `n` elements (to size reply buffers): `n` times the
    /// average entry size of the head node, which is O(1) however long the list is.
    pub fn approx_bytes(&self, n: usize) -> usize {
        match self.nodes.front() {
            Some(node) if node.count > 0 => node.buf.len() / node.count * n,
            _ => 0,
        }
    }
}

/// Forward iterator over a list's elements.
pub struct Iter<'a> {
    nodes: &'a Nodes,
    ni: usize,
    off: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let node = self.nodes.get(self.ni)?;
            if self.off < node.buf.len() {
                let (d, n, next) = read_fwd(&node.buf, self.off);
                self.off = next;
                return Some(&node.buf[d..d + n]);
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
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if self.ni == 0 {
                return None;
            }
            let node = &self.nodes[self.ni - 1];
            if self.end > 0 {
                let (d, n, start) = read_back(&node.buf, self.end);
                self.end = start;
                return Some(&node.buf[d..d + n]);
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

    fn check(l: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(l.len(), model.len());
        let fwd: Vec<&[u8]> = l.iter().collect();
        let m: Vec<&[u8]> = model.iter().map(|v| &v[..]).collect();
        assert_eq!(fwd, m);
        let mut rev: Vec<&[u8]> = l.iter_rev().collect();
        rev.reverse();
        assert_eq!(rev, m);
        assert_eq!(l.nodes.iter().map(|n| n.count).sum::<usize>(), l.len());
        assert!(l.nodes.iter().all(|n| n.count > 0));
        for n in l.nodes.iter() {
            assert_eq!(n.entries().count(), n.count);
        }
    }

    fn value(rng: &mut fastrand::Rng) -> Vec<u8> {
        match rng.u8(..10) {
            0 => vec![b'x'; rng.usize(100..300)],
            1 => Vec::new(),
            2 => rng.i64(..).to_string().into_bytes(),
            _ => vec![b'a' + rng.u8(..4); rng.usize(1..4)],
        }
    }

    fn run_model(fill: i64, seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut l = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for _ in 0..4000 {
            let v = value(&mut rng);
            match rng.u8(..13) {
                0 | 1 => {
                    l.push_back(&v, fill);
                    m.push_back(v);
                }
                2 | 3 => {
                    l.push_front(&v, fill);
                    m.push_front(v);
                }
                4 => assert_eq!(l.pop_front(), m.pop_front()),
                5 => assert_eq!(l.pop_back(), m.pop_back()),
                6 if !m.is_empty() => {
                    let i = rng.usize(..m.len());
                    assert!(l.set(i, &v, fill));
                    m[i] = v;
                }
                7 => {
                    let i = rng.usize(..=m.len());
                    l.insert(i, &v, fill);
                    m.insert(i, v);
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
                    assert_eq!(l.get(i), Some(&m[i][..]));
                    let from: Vec<&[u8]> = l.iter_from(i).collect();
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
        assert!(fill >= 0 || l.nodes.iter().all(|n| n.count == 1 || fits(n.buf.len(), n.count, fill)));
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
        let mut l = List::new();
        let big = vec![7u8; 70000];
        l.push_back(b"a", -2);
        l.push_back(&big, -2);
        l.push_front(&big[..200], -2);
        assert_eq!(l.get(2), Some(&big[..]));
        assert_eq!(l.pop_back().as_deref(), Some(&big[..]));
        assert_eq!(l.pop_front().as_deref(), Some(&big[..200]));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn nodes_respect_fill() {
        let mut l = List::new();
        for i in 0..10 {
            l.push_back(i.to_string().as_bytes(), 3);
        }
        assert_eq!(l.node_count(), 4);
        let mut l = List::new();
        for _ in 0..1000 {
            l.push_front(b"0123456789", -1);
        }
        assert!(l.node_count() >= 3 && l.nodes.iter().all(|n| n.buf.len() <= 4096));
    }
}
