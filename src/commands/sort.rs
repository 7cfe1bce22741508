//! SORT and SORT_RO over lists, sets and sorted sets, as redis-server 7.0 answers them: numeric or
//! ALPHA ordering, BY weights read from string keys or `->field` hash fields, BY without `*`
//! (no sorting: native order, sets too unless the result is stored), GET patterns and `#`, LIMIT
//! clamping, and STORE into a list (deleting the destination when the result is empty).
//!
//! Ordering follows Redis's comparator: numeric weights with ties broken by a binary compare of the
//! elements; ALPHA compares as `strcoll` under the C/C.UTF-8 locale does (bytes up to the first
//! NUL) when replying and as a binary compare when storing. Equal ALPHA BY weights are the only
//! ties whose order shows; to place them as Redis does, a full sort is stable (glibc's qsort is a
//! merge sort) and a LIMITed BY sort replays Redis's partial quicksort. Weights are parsed with the
//! C library's `strtod`, which is what decides Redis's "can't be converted" error (Redis does not
//! clear errno first, so after an ERANGE its later numeric sorts may fail spuriously: not copied).
//! Like Redis, sorting a listpack zset converts it to a skiplist (SORT_RO included).
//!
//! A SORT of `DEFER_MIN_ELEMENTS` or more elements whose cost is all its own (no BY key lookups,
//! no GET, no STORE) takes a snapshot of the collection (`types::cow`) and loads, sorts and
//! encodes off the executor (`Reply::Deferred`): other clients do not wait behind the sort. It
//! loads the most compact keys that sort as Redis's comparator does (`Keys`: integers as i32 or
//! i64, short ALPHA strings packed in a u64, else bytes in one buffer) and streams the range in
//! pieces. Its working set is O(n) by nature: 4 bytes an element for small integers, against a
//! listpack's 2-5 (a 1M small-integer list of 6.3 MiB sorts at +9 MiB over steady state, Redis
//! +59 MiB), so "at most the collection's size" holds for sets and zsets (+10 MiB for 34 and 93
//! MiB) but not for the densest lists.
//!
//! A big SORT with BY key lookups or GET patterns cannot be a snapshot alone: its lookups read
//! other keys, as many as there are elements. It becomes a walk (`executor::sort_walk`): the same
//! snapshot, loaded and sorted on a thread, with its lookups a step at a time on the executor,
//! kept at the command's time by the database recording a key's old lookup before any write
//! changes it (`db::sort_watch`). STORE, small inputs, MULTI and scripts stay synchronous here.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::sort::{compare, cstr, strtod, Item, Objs, SortSource, LOOKUPS_AHEAD, NOT_A_DOUBLE, NO_WEIGHT};
use crate::types::zset::Limits;
use crate::types::{List, RStr, Value, ZSet};

pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "sort",
        -2,
        WRITE | DENYOOM | MOVABLEKEYS,
        keys(1, 1, 1),
        acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS,
        sort,
    ),
    spec(
        "sort_ro",
        -2,
        READONLY | MOVABLEKEYS,
        keys(1, 1, 1),
        acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS,
        sort_ro,
    ),
];

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC|DESC] [ALPHA] [STORE destination]
///
/// Sorts the elements of a list, set or sorted set numerically (or lexicographically with ALPHA),
/// optionally by weights looked up through a key pattern, and replies the requested range of
/// elements (or of GET lookups), or stores it as a list under `destination` and replies its length.
pub fn sort(ctx: &mut Ctx, args: &Args) -> CmdResult {
    sort_generic(ctx, args, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC|DESC] [ALPHA]
///
/// The read-only SORT: the same options except STORE, which is a syntax error here.
pub fn sort_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    sort_generic(ctx, args, true)
}

struct Options<'a> {
    desc: bool,
    alpha: bool,
    dontsort: bool,
    limit_start: i64,
    limit_count: i64,
    sortby: Option<&'a [u8]>,
    store: Option<&'a [u8]>,
    gets: Vec<&'a [u8]>,
}

/// `full_key_access`: the client's ACL user may read any key with this command; BY with a
/// pattern and GET look up keys the command's arguments do not name, so Redis refuses them
/// otherwise.
fn parse_options(args: &Args, readonly: bool, full_key_access: bool) -> Result<Options<'_>, CmdError> {
    let mut o = Options {
        desc: false,
        alpha: false,
        dontsort: false,
        limit_start: 0,
        limit_count: -1,
        sortby: None,
        store: None,
        gets: Vec::new(),
    };
    let argc = args.len();
    let mut j = 2;
    while j < argc {
        let left = argc - j - 1;
        if args.is(j, "asc") {
            o.desc = false;
        } else if args.is(j, "desc") {
            o.desc = true;
        } else if args.is(j, "alpha") {
            o.alpha = true;
        } else if args.is(j, "limit") && left >= 2 {
            o.limit_start = args.i64(j + 1)?;
            o.limit_count = args.i64(j + 2)?;
            j += 2;
        } else if args.is(j, "store") && left >= 1 && !readonly {
            o.store = Some(args.get(j + 1));
            j += 1;
        } else if args.is(j, "by") && left >= 1 {
            let pattern = args.get(j + 1);
            o.sortby = Some(pattern);
            // A BY pattern without `*` (searched as a C string) names no per-element key.
            o.dontsort = !cstr(pattern).contains(&b'*');
            if !o.dontsort && !full_key_access {
                return Err(CmdError::err("BY option of SORT denied due to insufficient ACL permissions."));
            }
            j += 1;
        } else if args.is(j, "get") && left >= 1 {
            if !full_key_access {
                return Err(CmdError::err("GET option of SORT denied due to insufficient ACL permissions."));
            }
            o.gets.push(args.get(j + 1));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

fn sort_generic(ctx: &mut Ctx, args: &Args, readonly: bool) -> CmdResult {
    let full_key_access = ctx.user_reads_any_key(&args.argv);
    let mut o = parse_options(args, readonly, full_key_access)?;
    let key = args.key(1);

    let kind = {
        match ctx.lookup_read(key) {
            None => None,
            Some(Value::List(_)) => Some(Kind::List),
            Some(Value::Set(_)) => Some(Kind::Set),
            Some(Value::ZSet(_)) => Some(Kind::ZSet),
            Some(_) => return Err(CmdError::WrongType),
        }
    };

    // A set has no native order to keep: when the result is stored, or returned to a script, it
    // is sorted anyway (ALPHA), so replicas and AOF replays get the same list.
    let in_script = ctx.script_caller();
    if o.dontsort && kind == Some(Kind::Set) && (o.store.is_some() || in_script) {
        o.dontsort = false;
        o.alpha = true;
        o.sortby = None;
    }

    // Redis sorts zsets through their skiplist form, converting a listpack one on the way.
    // (The later probes of `key` do not stamp its access time: the read above did, once, as
    // Redis's one lookup does.)
    if kind == Some(Kind::ZSet) {
        if let Some(Value::ZSet(z)) = ctx.db().get_ref_mut(key) {
            if z.encoding_name() == "listpack" {
                **z = ZSet::from_pairs(z.to_vec(), Limits { max_entries: 0, max_value: 0 });
            }
        }
    }

    let total = match kind.and_then(|_| ctx.db().get_ref_mut(key)) {
        Some(Value::List(l)) => l.len(),
        Some(Value::Set(s)) => s.len(),
        Some(Value::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;

    let mut start = o.limit_start.max(0);
    let mut end = if o.limit_count < 0 { total - 1 } else { start.saturating_add(o.limit_count - 1) };
    if start >= total {
        start = total - 1;
        end = total - 2;
    }
    if end >= total {
        end = total - 1;
    }

    let mut vectorlen = total;
    if matches!(kind, Some(Kind::List) | Some(Kind::ZSet)) && o.dontsort && (start != 0 || end != total - 1) {
        vectorlen = end - start + 1;
    }
    let vectorlen = vectorlen.max(0) as usize;

    // A big SORT whose cost is the sort and the reply (no BY key lookups, no GET, no STORE):
    // a snapshot of the collection, sorted and encoded off the executor.
    let plain = o.gets.is_empty() && o.store.is_none() && (o.dontsort || o.sortby.is_none());
    if plain && end >= start && start >= 0 && total as usize >= super::DEFER_MIN_ELEMENTS {
        let (s, n) = (start as usize, vectorlen);
        let source = match ctx.db().get_ref_mut(key) {
            Some(Value::List(l)) if o.dontsort => {
                let first = if o.desc { l.len() - s - n } else { s };
                Some(SortSource::List(l.snapshot_range(first, n)))
            }
            Some(Value::List(l)) => {
                let len = l.len();
                Some(SortSource::List(l.snapshot_range(0, len)))
            }
            Some(Value::Set(set)) => set.snapshot().map(SortSource::Set),
            Some(Value::ZSet(z)) => Some(SortSource::ZSet(z.snapshot())),
            _ => None,
        };
        if let Some(source) = source {
            let (alpha, desc, dontsort) = (o.alpha, o.desc, o.dontsort);
            let sorted = Default::default();
            return Ok(Reply::Deferred(Deferred::new(SortReply {
                source,
                alpha,
                desc,
                dontsort,
                start,
                end,
                n,
                sorted,
            })));
        }
    }

    // A big SORT with BY key lookups or GET patterns: loaded and sorted on a thread, its
    // lookups made a step at a time between other clients' commands, all as of this moment
    // (see `executor::sort_walk`), wherever the reply may come later: not inside MULTI or a
    // script, whose replies are immediate. Nor when `keymiss` events are on: the walk's
    // lookups raise none.
    let by_keys = !o.dontsort && o.sortby.is_some();
    if o.store.is_none()
        && (by_keys || !o.gets.is_empty())
        && total as usize >= super::DEFER_MIN_ELEMENTS
        && ctx.client().defers_reply()
        && !ctx.config().notify_keyspace_events.contains('m')
    {
        if let Some(reply) = start_walk(ctx, key, &o, by_keys, start, end, vectorlen) {
            return Ok(reply);
        }
    }

    let mut items: Vec<Item> = Vec::with_capacity(vectorlen);
    let mut objs = Objs(Vec::new());
    match kind.and_then(|_| ctx.db().get_ref_mut(key)) {
        Some(Value::List(l)) if o.dontsort && end >= start => {
            let s = start as usize;
            if o.desc {
                for e in l.iter_rev().skip(s).take(vectorlen) {
                    e.with_bytes(|b| objs.push(&mut items, b));
                }
            } else {
                for e in l.iter_from(s).take(vectorlen) {
                    e.with_bytes(|b| objs.push(&mut items, b));
                }
            }
            end -= start;
            start = 0;
        }
        // An empty range of an unsorted list loads nothing.
        Some(Value::List(_)) if o.dontsort => {}
        Some(Value::List(l)) => {
            for e in l.iter() {
                e.with_bytes(|b| objs.push(&mut items, b));
            }
        }
        Some(Value::Set(s)) => s.for_each(|e| e.with_bytes(|b| objs.push(&mut items, b))),
        Some(Value::ZSet(z)) if o.dontsort => {
            if vectorlen > 0 {
                let s = start as usize;
                z.walk(s, s + vectorlen - 1, o.desc, &mut |m, _| {
                    objs.push(&mut items, m);
                    true
                });
            }
            end -= start;
            start = 0;
        }
        Some(Value::ZSet(z)) => z.walk(0, usize::MAX, false, &mut |m, _| {
            objs.push(&mut items, m);
            true
        }),
        _ => {}
    }

    let mut conversion_error = false;
    if !o.dontsort {
        let by = o.sortby.map(Pattern::parse);
        let mut keys: [Vec<u8>; LOOKUPS_AHEAD] = Default::default();
        let mut alpha_weight = Vec::new();
        for chunk in items.chunks_mut(LOOKUPS_AHEAD) {
            if let Some(pattern) = &by {
                pattern.name_keys(ctx, chunk.iter().map(|it| objs.of(it)), &mut keys);
            }
            for (it, k) in chunk.iter_mut().zip(keys.iter()) {
                let weight = match &by {
                    Some(pattern) => {
                        let Some(found) = pattern.lookup(ctx, objs.of(it), k) else {
                            if o.alpha {
                                it.w = NO_WEIGHT;
                            }
                            continue;
                        };
                        if o.alpha {
                            alpha_weight.clear();
                            found.with_bytes(|b| alpha_weight.extend_from_slice(b));
                            it.w = objs.append(&alpha_weight) as u64;
                            continue;
                        }
                        found.weight()
                    }
                    None if o.alpha => continue,
                    None => strtod(objs.of(it)),
                };
                match weight {
                    Some(d) => it.w = d.to_bits(),
                    None => conversion_error = true,
                }
            }
        }
        // A NaN-free comparator is a total order; with a conversion error nothing is sent or
        // stored, so there is no point (and some risk) in sorting.
        if !conversion_error {
            let (alpha, by, store, desc) = (o.alpha, o.sortby.is_some(), o.store.is_some(), o.desc);
            let cmp = |a: &Item, b: &Item| {
                let c = compare(a, b, &objs, alpha, by, store);
                if desc {
                    c.reverse()
                } else {
                    c
                }
            };
            // Redis sorts a LIMITed BY range with its partial quicksort and everything else with
            // glibc's qsort (a merge sort, hence stable); the two differ only in how ties land.
            if by && (start != 0 || end != items.len() as i64 - 1) && end >= start {
                let n = items.len();
                crate::util::pqsort::pqsort(&mut items, 0, n, &cmp, start as usize, end as usize);
            } else {
                items.sort_by(cmp);
            }
        }
    }

    if conversion_error {
        return Err(CmdError::err("One or more scores can't be converted into double"));
    }

    let range: &[Item] = if end >= start && start >= 0 {
        let (s, e) = (start as usize, (end as usize).min(items.len().saturating_sub(1)));
        if s < items.len() {
            &items[s..=e]
        } else {
            &[]
        }
    } else {
        &[]
    };

    match o.store {
        None => {
            // Encoded as it is built, as Redis appends each element to the reply: a `Reply`
            // an element held some 40 bytes and an allocation each until the whole was written.
            let proto = ctx.proto();
            // At least each element's bulk-string framing (and its bytes when it is sent).
            let framing = range.len() * o.gets.len().max(1) * 6;
            let mut out = Vec::with_capacity(16 + framing + if o.gets.is_empty() { objs.0.len() } else { 0 });
            int_line(&mut out, b'*', (range.len() * o.gets.len().max(1)) as i64);
            Gets::new(&o.gets).for_each(ctx, range, &objs, |found| match found {
                Some(b) => bulk(&mut out, b),
                None => out.extend_from_slice(if proto >= 3 { b"_\r\n" } else { b"$-1\r\n" }),
            });
            Ok(Reply::Raw(out))
        }
        Some(dst) => {
            let fill = ctx.config().list_max_listpack_size as i64;
            let mut list = List::new(fill);
            Gets::new(&o.gets).for_each(ctx, range, &objs, |found| list.push_back(found.unwrap_or_default()));
            let n = list.len() as i64;
            let now = ctx.now_ms();
            if n > 0 {
                let existed = ctx.lookup_write(dst).is_some();
                ctx.db().overwrite(dst, Value::List(Box::new(list)), now);
                if !existed {
                    ctx.notify(ev::NEW, "new", dst);
                }
                ctx.notify(ev::LIST, "sortstore", dst);
                ctx.modified(dst, n as u64);
            } else if ctx.db().remove(dst, now).is_some() {
                ctx.modified(dst, 1);
                ctx.notify(ev::GENERIC, "del", dst);
            }
            Ok(Reply::Int(n))
        }
    }
}

/// Starts a SORT walk over `key` (see `sort_generic`); None when its collection has no
/// snapshot to take (the synchronous path then runs).
#[allow(clippy::too_many_arguments)]
fn start_walk(
    ctx: &mut Ctx,
    key: &[u8],
    o: &Options<'_>,
    by_keys: bool,
    start: i64,
    end: i64,
    n: usize,
) -> Option<Reply> {
    use crate::db::sort_watch::{KeyPart, SortWatch};
    use crate::executor::sort_walk::{Get, SortSpec};
    let source = match ctx.db().get_ref_mut(key) {
        Some(Value::List(l)) if o.dontsort => {
            let s = start.max(0) as usize;
            let first = if o.desc { l.len() - s - n } else { s };
            SortSource::List(l.snapshot_range(first, n))
        }
        Some(Value::List(l)) => {
            let len = l.len();
            SortSource::List(l.snapshot_range(0, len))
        }
        Some(Value::Set(set)) => SortSource::Set(set.snapshot()?),
        Some(Value::ZSet(z)) => SortSource::ZSet(z.snapshot()),
        _ => return None,
    };
    let mut parts = Vec::new();
    let mut part_of = |p: &[u8]| match Pattern::parse(p) {
        Pattern::Element => Get::Element,
        Pattern::Nothing => Get::Nothing,
        Pattern::Key { prefix, postfix, field } => {
            parts.push(KeyPart { prefix: prefix.into(), postfix: postfix.into(), field: field.map(Into::into) });
            Get::Part(parts.len() - 1)
        }
    };
    let by = match o.sortby {
        Some(p) if by_keys => match part_of(p) {
            Get::Part(i) => Some(i),
            _ => None,
        },
        _ => None,
    };
    let gets: Vec<Get> = o.gets.iter().map(|p| part_of(p)).collect();
    let spec = SortSpec {
        source,
        alpha: o.alpha,
        desc: o.desc,
        dontsort: o.dontsort,
        start,
        end,
        n,
        by,
        gets,
        proto: ctx.proto(),
    };
    let (now, client, touch) = (ctx.now_ms(), ctx.client().id, !ctx.client().no_touch);
    let id = crate::executor::walks::next_id(ctx.admin());
    ctx.db().watch_sort(SortWatch::new(id, now, parts, touch));
    Some(crate::executor::walks::start_sort(ctx.admin(), id, client, spec))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// SORT of a big list, set or zset without BY key lookups, GET or STORE, done wherever the
/// reply is written by the same steps as `sort_generic`: load, score (unless ALPHA), sort, take
/// the LIMIT range. A member that is not a number makes the reply Redis's conversion error
/// (`encode_checked` tells it, for INFO's errorstats and failed_calls). The first piece loads
/// and sorts (kept in `sorted` for the pieces after it); the range is then streamed in pieces.
struct SortReply {
    source: SortSource,
    alpha: bool,
    desc: bool,
    dontsort: bool,
    start: i64,
    end: i64,
    /// Elements a list or zset read unsorted loads (the range's length).
    n: usize,
    /// The loaded, sorted elements and the range to send, or the conversion error.
    sorted: std::sync::OnceLock<Option<Sorted>>,
}

/// SORT's loaded elements, compactly: every element's bytes in one buffer and, per element, its
/// score and where its bytes are (24 bytes an element, against an `Item`'s 56 plus one
/// allocation per element: sorting 1.5M list elements peaked at +138 MiB over steady state, for
/// a 7.5 MB list, with an `Item` each).
struct Loaded {
    bytes: Vec<u8>,
    /// (score, start in `bytes`, length).
    items: Vec<(f64, usize, usize)>,
}

/// The elements as sorted, in the smallest form that sorts as Redis's comparator does. Equal
/// keys are equal elements in the compact forms, so an unstable sort (no scratch memory) gives
/// Redis's order; 1M small integers take 4 MB instead of `Loaded`'s 24 MB and its byte copy.
enum Keys {
    /// Numeric (or unsorted) over canonical integers (`parse_i64`) within 32 bits: their values.
    /// Numeric order is Redis's (score, then bytes) order: distinct integers of at most 2^53
    /// have distinct scores.
    Int32(Vec<i32>),
    /// The same within 2^53 (or any canonical integer when unsorted).
    Int64(Vec<i64>),
    /// ALPHA (or unsorted) over elements of at most 8 bytes without a NUL: the bytes big-endian
    /// in a u64, zero-padded, which compares as Redis's strcoll under the C locale (a prefix first).
    Short(Vec<u64>),
    /// Anything else.
    Bytes(Loaded),
}

/// What the first piece worked out: the sorted elements and the range `from..to` to send.
struct Sorted {
    keys: Keys,
    from: usize,
    to: usize,
}

/// 2^53: integers up to this magnitude are exact as doubles.
const EXACT_INT: i64 = 1 << 53;

fn short_key(b: &[u8]) -> Option<u64> {
    if b.len() > 8 || b.contains(&0) {
        return None;
    }
    let mut k = [0u8; 8];
    k[..b.len()].copy_from_slice(b);
    Some(u64::from_be_bytes(k))
}

fn short_bytes(k: &u64) -> ([u8; 8], usize) {
    let b = k.to_be_bytes();
    let len = b.iter().position(|&c| c == 0).unwrap_or(8);
    (b, len)
}

impl SortReply {
    /// Calls `f` with each element loaded, in load order (before any DESC reversal).
    fn visit(&self, f: &mut dyn FnMut(&[u8], Option<i64>)) {
        match &self.source {
            SortSource::List(list) => list.for_each(|e| match e {
                crate::types::list::Elem::Int(v) => f(itoa::Buffer::new().format(v).as_bytes(), Some(v)),
                crate::types::list::Elem::Bytes(b) => f(b, None),
            }),
            SortSource::Set(s) => s.for_each(|m| f(m, None)),
            SortSource::ZSet(z) if self.dontsort => {
                if self.n > 0 {
                    let s = self.start as usize;
                    z.walk(s, s + self.n - 1, self.desc, &mut |m, _| {
                        f(m, None);
                        true
                    });
                }
            }
            SortSource::ZSet(z) => z.walk(0, usize::MAX, false, &mut |m, _| {
                f(m, None);
                true
            }),
        }
    }

    /// Loads the elements in the most compact form their sort allows (one pass to choose it,
    /// one to load).
    fn load(&self) -> Keys {
        let numeric = self.dontsort || !self.alpha;
        let short = self.dontsort || self.alpha;
        let (mut ints, mut narrow, mut shorts, mut count, mut bytes) = (numeric, true, short, 0, 0);
        self.visit(&mut |b, int| {
            count += 1;
            bytes += b.len();
            if ints {
                match int.or_else(|| crate::util::num::parse_i64(b)) {
                    Some(v) if self.dontsort || (-EXACT_INT..=EXACT_INT).contains(&v) => {
                        narrow &= i32::try_from(v).is_ok();
                    }
                    _ => ints = false,
                }
            }
            if shorts && short_key(b).is_none() {
                shorts = false;
            }
        });
        let int_of = |b: &[u8], int: Option<i64>| int.or_else(|| crate::util::num::parse_i64(b)).unwrap_or(0);
        // Sized by the first pass: a vector grown by doubling held up to three times the keys
        // while it moved.
        let mut keys = if ints && narrow {
            let mut v = Vec::with_capacity(count);
            self.visit(&mut |b, int| v.push(int_of(b, int) as i32));
            Keys::Int32(v)
        } else if ints {
            let mut v = Vec::with_capacity(count);
            self.visit(&mut |b, int| v.push(int_of(b, int)));
            Keys::Int64(v)
        } else if shorts {
            let mut v = Vec::with_capacity(count);
            self.visit(&mut |b, _| v.push(short_key(b).unwrap_or(0)));
            Keys::Short(v)
        } else {
            let mut l = Loaded { bytes: Vec::with_capacity(bytes), items: Vec::with_capacity(count) };
            self.visit(&mut |b, _| {
                l.items.push((0.0, l.bytes.len(), b.len()));
                l.bytes.extend_from_slice(b);
            });
            Keys::Bytes(l)
        };
        if self.dontsort && self.desc && matches!(self.source, SortSource::List(_)) {
            match &mut keys {
                Keys::Int32(v) => v.reverse(),
                Keys::Int64(v) => v.reverse(),
                Keys::Short(v) => v.reverse(),
                Keys::Bytes(l) => l.items.reverse(),
            }
        }
        keys
    }

    /// Loads, scores and sorts; None when an element is not a number (numeric sort).
    fn sort(&self) -> Option<Sorted> {
        let mut keys = self.load();
        let (mut start, mut end) = (self.start, self.end);
        if self.dontsort && !matches!(self.source, SortSource::Set(_)) {
            end -= start;
            start = 0;
        }
        if !self.dontsort {
            let desc = self.desc;
            match &mut keys {
                Keys::Int32(v) if desc => v.sort_unstable_by(|a, b| b.cmp(a)),
                Keys::Int32(v) => v.sort_unstable(),
                Keys::Int64(v) if desc => v.sort_unstable_by(|a, b| b.cmp(a)),
                Keys::Int64(v) => v.sort_unstable(),
                Keys::Short(v) if desc => v.sort_unstable_by(|a, b| b.cmp(a)),
                Keys::Short(v) => v.sort_unstable(),
                Keys::Bytes(Loaded { bytes, items }) => {
                    if !self.alpha {
                        for it in items.iter_mut() {
                            it.0 = strtod(&bytes[it.1..it.1 + it.2])?;
                        }
                    }
                    // `compare` without BY or STORE: by score then bytes, or ALPHA by the C
                    // string. Stable: ALPHA ties (bytes equal up to a NUL) keep Redis's order.
                    let alpha = self.alpha;
                    let obj = |it: &(f64, usize, usize)| &bytes[it.1..it.1 + it.2];
                    items.sort_by(|a, b| {
                        use std::cmp::Ordering;
                        let c = if alpha {
                            cstr(obj(a)).cmp(cstr(obj(b)))
                        } else if a.0 > b.0 {
                            Ordering::Greater
                        } else if a.0 < b.0 {
                            Ordering::Less
                        } else {
                            obj(a).cmp(obj(b))
                        };
                        if desc {
                            c.reverse()
                        } else {
                            c
                        }
                    });
                }
            }
        }
        let len = match &keys {
            Keys::Int32(v) => v.len(),
            Keys::Int64(v) => v.len(),
            Keys::Short(v) => v.len(),
            Keys::Bytes(l) => l.items.len(),
        };
        let s = start.max(0) as usize;
        let (from, to) = if end >= start && s < len { (s, (end.max(0) as usize).min(len - 1) + 1) } else { (0, 0) };
        Some(Sorted { keys, from, to })
    }
}

impl Encode for SortReply {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        let _ = self.encode_checked(proto, out);
    }

    fn may_fail(&self) -> bool {
        !self.dontsort && !self.alpha
    }

    fn encode_checked(&self, proto: u8, out: &mut Vec<u8>) -> Option<&'static str> {
        let mut cursor = Cursor::default();
        loop {
            match self.encode_piece(proto, &mut cursor, out) {
                Piece::More => {}
                Piece::Done(e) => return e,
            }
        }
    }

    fn streams(&self) -> bool {
        true
    }

    /// The first piece sorts (or is the whole error reply); `cursor.a` is the next position of
    /// the range to send.
    fn encode_piece(&self, _proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let Some(sorted) = self.sorted.get_or_init(|| self.sort()) else {
            out.push(b'-');
            out.extend_from_slice(NOT_A_DOUBLE.as_bytes());
            out.extend_from_slice(b"\r\n");
            return Piece::Done(Some(NOT_A_DOUBLE));
        };
        let base = out.len();
        if !cur.started {
            cur.started = true;
            cur.a = sorted.from;
            int_line(out, b'*', (sorted.to - sorted.from) as i64);
        }
        while cur.a < sorted.to && out.len() - base < PIECE_BYTES {
            let i = cur.a;
            match &sorted.keys {
                Keys::Int32(v) => bulk(out, itoa::Buffer::new().format(v[i]).as_bytes()),
                Keys::Int64(v) => bulk(out, itoa::Buffer::new().format(v[i]).as_bytes()),
                Keys::Short(v) => {
                    let (b, len) = short_bytes(&v[i]);
                    bulk(out, &b[..len]);
                }
                Keys::Bytes(l) => {
                    let it = &l.items[i];
                    bulk(out, &l.bytes[it.1..it.1 + it.2]);
                }
            }
            cur.a += 1;
        }
        if cur.a < sorted.to {
            Piece::More
        } else {
            Piece::Done(None)
        }
    }

    fn size_hint(&self) -> usize {
        16 + (self.end - self.start + 1).max(0) as usize * 24
    }

    fn min_size(&self) -> usize {
        (self.end - self.start + 1).max(0) as usize * 6
    }
}

/// A BY or GET pattern taken apart once (Redis's lookupKeyByPattern parses it per element): `#`
/// is the element itself; otherwise the first `*` is replaced by the element and the key read
/// as a string, or, with a non-empty `->field` after the `*`, as that field of a hash. A pattern
/// without `*` names nothing.
enum Pattern<'p> {
    Element,
    Key { prefix: &'p [u8], postfix: &'p [u8], field: Option<&'p [u8]> },
    Nothing,
}

/// What a pattern found for an element, borrowed from the keyspace (or the element itself).
enum Looked<'a> {
    Str(&'a RStr),
    Bytes(&'a [u8]),
}

impl Looked<'_> {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Looked::Str(s) => s.with_bytes(f),
            Looked::Bytes(b) => f(b),
        }
    }

    /// The weight Redis's strtod reads; an integer-encoded string converts without being
    /// formatted first (its decimal form parses to the same, correctly rounded, double).
    fn weight(&self) -> Option<f64> {
        match self {
            Looked::Str(RStr::Int(n)) => Some(*n as f64),
            _ => self.with_bytes(strtod),
        }
    }
}

/// SORT's GET patterns, with the keys they name for a chunk of elements.
struct Gets<'p> {
    patterns: Vec<Pattern<'p>>,
    keys: Vec<[Vec<u8>; LOOKUPS_AHEAD]>,
}

impl<'p> Gets<'p> {
    fn new(patterns: &[&'p [u8]]) -> Gets<'p> {
        Gets {
            patterns: patterns.iter().map(|p| Pattern::parse(p)).collect(),
            keys: patterns.iter().map(|_| Default::default()).collect(),
        }
    }

    /// Hands `emit` what SORT outputs for each element of `range`, in order: the element itself
    /// without GET patterns, else each pattern's lookup (None: nothing found).
    fn for_each(&mut self, ctx: &mut Ctx, range: &[Item], objs: &Objs, mut emit: impl FnMut(Option<&[u8]>)) {
        for chunk in range.chunks(LOOKUPS_AHEAD) {
            for (pattern, keys) in self.patterns.iter().zip(self.keys.iter_mut()) {
                pattern.name_keys(ctx, chunk.iter().map(|it| objs.of(it)), keys);
            }
            for (j, it) in chunk.iter().enumerate() {
                if self.patterns.is_empty() {
                    emit(Some(objs.of(it)));
                }
                for (pattern, keys) in self.patterns.iter().zip(&self.keys) {
                    match pattern.lookup(ctx, objs.of(it), &keys[j]) {
                        Some(v) => v.with_bytes(|b| emit(Some(b))),
                        None => emit(None),
                    }
                }
            }
        }
    }
}

impl<'p> Pattern<'p> {
    fn parse(pattern: &'p [u8]) -> Pattern<'p> {
        let spat = cstr(pattern);
        if spat == b"#" {
            return Pattern::Element;
        }
        let Some(p) = memchr::memchr(b'*', spat) else { return Pattern::Nothing };
        let field = memchr::memmem::find(&spat[p + 1..], b"->")
            .map(|f| p + 1 + f)
            .filter(|&f| f + 2 < spat.len())
            .map(|f| &pattern[f + 2..]);
        let fieldlen = field.map_or(0, |f| f.len() + 2);
        Pattern::Key { prefix: &pattern[..p], postfix: &pattern[p + 1..pattern.len() - fieldlen], field }
    }

    /// The key the pattern names for `subst`, written into `key` (left alone for `#`).
    fn key_into(&self, subst: &[u8], key: &mut Vec<u8>) {
        if let Pattern::Key { prefix, postfix, .. } = self {
            key.clear();
            key.extend_from_slice(prefix);
            key.extend_from_slice(subst);
            key.extend_from_slice(postfix);
        }
    }

    /// Names the keys the pattern gives `elems` into `keys` (for `lookup`), and asks
    /// memory for their buckets all together: in a big keyspace their cache misses then
    /// overlap instead of following one another.
    fn name_keys<'e>(&self, ctx: &mut Ctx, elems: impl Iterator<Item = &'e [u8]>, keys: &mut [Vec<u8>]) {
        if !matches!(self, Pattern::Key { .. }) {
            return;
        }
        let db = ctx.db();
        let mut named = 0;
        for (e, k) in elems.zip(keys.iter_mut()) {
            self.key_into(e, k);
            db.prefetch_slot(k);
            named += 1;
        }
        for k in &keys[..named] {
            db.prefetch_entry(k);
        }
    }

    /// Looks the pattern up for `subst`, whose key `name_keys` wrote into `key`. Read lookups
    /// (hit/miss counted) even when storing, as 7.0 does.
    fn lookup<'a>(&self, ctx: &'a mut Ctx, subst: &'a [u8], key: &[u8]) -> Option<Looked<'a>> {
        match self {
            Pattern::Element => Some(Looked::Bytes(subst)),
            Pattern::Nothing => None,
            Pattern::Key { field, .. } => match (ctx.lookup_read(key)?, field) {
                (Value::Hash(h), Some(f)) => h.get(f).map(Looked::Bytes),
                (Value::Str(s), None) => Some(Looked::Str(s)),
                _ => None,
            },
        }
    }
}
