//! SORT with BY or GET patterns over a big collection without making other clients wait: the
//! command snapshots the collection and registers its patterns on the database
//! (`db::sort_watch`, which keeps every later lookup at the command's time whatever is written
//! meanwhile), and replies with a `Later` its connection waits for, as KEYS does
//! (`executor::walks`, which steps both kinds of walk in turn and accounts for them alike).
//!
//! The work splits by where it may run. Loading the snapshot and sorting touch only what the
//! walk owns, so they run on sort threads (1M doubles sort in about 80 ms, far past any step;
//! at most `MAX_THREADS` run, further walks' work queues for them). The BY and GET lookups
//! read the keyspace, so they run on the executor, a bounded step at a time, in the order
//! Redis makes them: every BY lookup (a weight that is not a number
//! fails the command only once all are read, as in Redis), then the sort, then the GET lookups
//! of the LIMIT range alone. A pattern stops being recorded as soon as its lookups are over: the
//! BY pattern after the weights, the GET patterns when the reply is complete.
//!
//! The reply is Redis's: the same loading, comparator and partial sort for LIMIT as the
//! synchronous path in `commands::sort` (the shared part is `types::sort`); a walk's BY or GET lookups
//! count keyspace hits and misses as Redis's lookupKeyRead does (key present or not), and stamp
//! the access time of the keys they read as it does (LRU clock, or LFU counter; none under
//! CLIENT NO-TOUCH or while a fork child saves), at the time the walk reads them: a command the
//! same client pipelined behind the SORT may run first and see the keys unstamped yet. A SORT
//! runs synchronously where `keymiss` events are on, as those come from lookups.
//!
//! The walk registers on its database only above `DEFER_MIN_ELEMENTS` elements and where the
//! reply may come later (`Client::defers_reply`): a small SORT, a STORE, MULTI, Lua and
//! functions keep the synchronous path, whose lookups are the live ones at that moment.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::State;
use crate::db::sort_watch::{Found, KeyPart};
use crate::resp::writer::{bulk, int_line};
use crate::types::sort::{compare, sort_load, strtod, Item, Objs, SortSource, LOOKUPS_AHEAD, NOT_A_DOUBLE, NO_WEIGHT};

/// Bytes per chunk of the reply.
const CHUNK: usize = 64 * 1024;

/// Elements looked up between two looks at the clock.
const PER_CHECK: usize = 64;

/// What a GET pattern outputs per element.
#[derive(Clone, Copy)]
pub enum Get {
    Element,
    Nothing,
    /// The lookup of this part of the walk's registration.
    Part(usize),
}

/// A SORT as its command left it: what to load and how to sort and reply.
pub(crate) struct SortSpec {
    pub source: SortSource,
    pub alpha: bool,
    pub desc: bool,
    pub dontsort: bool,
    pub start: i64,
    pub end: i64,
    /// Elements a list or zset read unsorted loads (the range's length).
    pub n: usize,
    /// The BY pattern's part, when it names keys.
    pub by: Option<usize>,
    pub gets: Vec<Get>,
    pub proto: u8,
}

/// What the threads hand back.
struct Work {
    objs: Objs,
    items: Vec<Item>,
    start: i64,
    end: i64,
    /// The range to reply, once sorted.
    range: std::ops::Range<usize>,
    /// The reply's bulk strings when no GET is to be looked up.
    chunks: Vec<Vec<u8>>,
    error: bool,
}

enum Phase {
    /// A thread loads (and, without BY lookups, sorts).
    Load,
    /// BY lookups on the executor.
    By,
    /// A thread sorts.
    Sort,
    /// GET lookups on the executor.
    Get,
}

/// A SORT walk in progress (see the module header).
pub struct SortJob {
    pub id: u64,
    alpha: bool,
    desc: bool,
    by: Option<usize>,
    gets: Vec<Get>,
    proto: u8,
    phase: Phase,
    /// Where a thread leaves its work.
    handoff: Arc<Mutex<Option<Work>>>,
    work: Option<Work>,
    /// The next element to look up.
    cursor: usize,
    error: bool,
    chunks: Vec<Vec<u8>>,
    /// The GET patterns' keys for a chunk of elements.
    named: Vec<[Vec<u8>; LOOKUPS_AHEAD]>,
}

/// How a step left a walk.
pub enum Stepped {
    More,
    /// The reply's parts; with the error line when it is Redis's conversion error.
    Done(Vec<Vec<u8>>, Option<&'static str>),
}

/// What a BY lookup makes of an element's weight.
enum Weight {
    /// Nothing found (numeric): the weight stays 0.
    Keep,
    Bits(u64),
    /// Not a number: the command fails once all weights are read.
    Bad,
    /// ALPHA: the bytes found, to append.
    Alpha,
}

/// Where a walk's lookups go: a database, or tables emptied under it.
enum Loc {
    Db(usize),
    Walked(usize),
}

fn locate(st: &State, id: u64) -> Option<Loc> {
    if let Some(i) = st.dbs.iter().position(|d| d.has_sort(id)) {
        return Some(Loc::Db(i));
    }
    st.walks.walked.iter().position(|w| w.has_sort(id)).map(Loc::Walked)
}

/// Part `part` of walk `id`'s lookup for `elem`, whose key is `key`, a read of the key at
/// `now_ms`: `f` gets whether the key existed and what it gave.
#[allow(clippy::too_many_arguments)]
fn lookup<R>(
    st: &mut State,
    loc: &Loc,
    id: u64,
    part: usize,
    elem: &[u8],
    key: &[u8],
    now_ms: i64,
    f: impl FnOnce(bool, Option<Found<'_>>) -> R,
) -> Option<R> {
    match *loc {
        Loc::Db(i) => st.dbs[i].sort_lookup(id, part, elem, key, now_ms, f),
        Loc::Walked(i) => st.walks.walked[i].sort_lookup(id, part, elem, key, f),
    }
}

/// Stops part `part` of walk `id` from recording.
fn retire(st: &mut State, id: u64, part: usize) {
    let w = match locate(st, id) {
        Some(Loc::Db(i)) => st.dbs[i].sort_watch(id),
        Some(Loc::Walked(i)) => st.walks.walked[i].sort_watch(id),
        None => None,
    };
    if let Some(w) = w {
        w.retire(part);
    }
}

fn key_into(part: &KeyPart, elem: &[u8], key: &mut Vec<u8>) {
    key.clear();
    key.extend_from_slice(&part.prefix);
    key.extend_from_slice(elem);
    key.extend_from_slice(&part.postfix);
}

fn room(chunks: &mut Vec<Vec<u8>>, need: usize) -> &mut Vec<u8> {
    if chunks.last().is_none_or(|c| c.capacity() - c.len() < need) {
        chunks.push(Vec::with_capacity(CHUNK.max(need)));
    }
    chunks.last_mut().expect("a chunk was just made")
}

/// Loads the snapshot as the synchronous path does; without BY lookups, also scores and sorts.
fn load(spec: SortSpec) -> Work {
    let (objs, items, start, end) = sort_load(&spec.source, spec.dontsort, spec.desc, spec.start, spec.end, spec.n);
    let mut work = Work { objs, items, start, end, range: 0..0, chunks: Vec::new(), error: false };
    if !spec.dontsort && spec.by.is_none() {
        if !spec.alpha {
            for it in work.items.iter_mut() {
                match strtod(work.objs.of(it)) {
                    Some(d) => it.w = d.to_bits(),
                    None => work.error = true,
                }
            }
        }
        if !work.error {
            sort(&mut work, spec.alpha, spec.desc, false);
        }
    }
    work.range = range(&work);
    work
}

/// Sorts as `commands::sort` does: Redis's partial quicksort for a LIMITed BY range, else
/// glibc's (stable) merge sort.
fn sort(work: &mut Work, alpha: bool, desc: bool, by: bool) {
    let Work { objs, items, start, end, .. } = work;
    let cmp = |a: &Item, b: &Item| {
        let c = compare(a, b, objs, alpha, by, false);
        if desc {
            c.reverse()
        } else {
            c
        }
    };
    let (start, end) = (*start, *end);
    if by && (start != 0 || end != items.len() as i64 - 1) && end >= start {
        let n = items.len();
        crate::util::pqsort::pqsort(items, 0, n, &cmp, start as usize, end as usize);
    } else {
        items.sort_by(cmp);
    }
}

fn range(work: &Work) -> std::ops::Range<usize> {
    let (start, end, len) = (work.start, work.end, work.items.len());
    if end >= start && start >= 0 && (start as usize) < len {
        start as usize..(end as usize).min(len - 1) + 1
    } else {
        0..0
    }
}

/// The range's elements as bulk strings (no GET).
fn encode_elements(work: &mut Work) {
    let mut chunks = Vec::new();
    for it in &work.items[work.range.clone()] {
        let b = work.objs.of(it);
        bulk(room(&mut chunks, b.len() + 16), b);
    }
    work.chunks = chunks;
}

/// Sort threads running at most: further work waits in `QUEUE` for one of them. A pipeline of
/// big SORTs then starts a few threads, not one per command.
const MAX_THREADS: usize = 4;

type Task = Box<dyn FnOnce() + Send>;

struct Pool {
    queue: std::collections::VecDeque<Task>,
    running: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { queue: std::collections::VecDeque::new(), running: 0 });

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on a sort thread and leaves its result in `handoff`, then wakes the walks.
fn spawn(
    handoff: &Arc<Mutex<Option<Work>>>,
    wake: &Arc<tokio::sync::Notify>,
    f: impl FnOnce() -> Work + Send + 'static,
) {
    let (handoff, wake) = (handoff.clone(), wake.clone());
    let task: Task = Box::new(move || {
        let work = f();
        *handoff.lock().unwrap_or_else(|p| p.into_inner()) = Some(work);
        wake.notify_one();
    });
    let mut p = pool();
    p.queue.push_back(task);
    if p.running >= MAX_THREADS {
        return;
    }
    p.running += 1;
    drop(p);
    let spawned = std::thread::Builder::new().name("sort".into()).spawn(|| {
        // Below the executor's priority: on a busy machine the scheduler then gives the
        // executor its core back at once rather than at the end of this thread's slice
        // (on 2 cores at equal priority, PINGs waited up to 7 ms behind a sort).
        // SAFETY: setpriority on this thread's own id changes nothing else.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t, 10);
        }
        run_queued();
        crate::alloc::flush_thread_cache();
    });
    if spawned.is_err() {
        // A walk must not stall on a thread that could not start: with no other thread to take
        // the queue, its work runs here.
        let mut p = pool();
        p.running -= 1;
        let alone = p.running == 0;
        drop(p);
        if alone {
            pool().running += 1;
            run_queued();
        }
    }
}

/// Runs queued tasks until none is left, then counts this runner out.
fn run_queued() {
    loop {
        let task = {
            let mut p = pool();
            match p.queue.pop_front() {
                Some(t) => t,
                None => {
                    p.running -= 1;
                    return;
                }
            }
        };
        task();
    }
}

impl SortJob {
    /// Starts walk `id` for `spec`: its load goes to a thread at once.
    pub(crate) fn start(id: u64, spec: SortSpec, wake: &Arc<tokio::sync::Notify>) -> SortJob {
        let job = SortJob {
            id,
            alpha: spec.alpha,
            desc: spec.desc,
            by: spec.by,
            gets: spec.gets.clone(),
            proto: spec.proto,
            phase: Phase::Load,
            handoff: Default::default(),
            work: None,
            cursor: 0,
            error: false,
            chunks: Vec::new(),
            named: Vec::new(),
        };
        spawn(&job.handoff, wake, move || load(spec));
        job
    }

    /// Whether a step would move the walk on (not waiting for its thread).
    pub fn runnable(&self) -> bool {
        match self.phase {
            Phase::Load | Phase::Sort => self.handoff.lock().map(|h| h.is_some()).unwrap_or(true),
            Phase::By | Phase::Get => true,
        }
    }

    /// Moves the walk on until `deadline`.
    pub fn step(&mut self, st: &mut State, deadline: Instant) -> Stepped {
        loop {
            match self.phase {
                Phase::Load | Phase::Sort => {
                    let Some(work) = self.handoff.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                        return Stepped::More;
                    };
                    let loaded = matches!(self.phase, Phase::Load);
                    self.error |= work.error;
                    self.work = Some(work);
                    self.cursor = 0;
                    if self.error {
                        return self.finish();
                    }
                    self.phase = match (loaded, self.by) {
                        (true, Some(_)) => Phase::By,
                        _ if self.gets.is_empty() => return self.finish(),
                        _ => {
                            if let Some(w) = &self.work {
                                self.cursor = w.range.start;
                            }
                            Phase::Get
                        }
                    };
                }
                Phase::By => {
                    if !self.by_step(st, deadline) {
                        return Stepped::More;
                    }
                    if let Some(part) = self.by {
                        retire(st, self.id, part);
                    }
                    if self.error {
                        return self.finish();
                    }
                    let mut work = self.work.take().expect("the BY phase has the work");
                    let (alpha, desc, encode) = (self.alpha, self.desc, self.gets.is_empty());
                    spawn(&self.handoff, &st.walks.wake, move || {
                        sort(&mut work, alpha, desc, true);
                        work.range = range(&work);
                        if encode {
                            encode_elements(&mut work);
                        }
                        work
                    });
                    self.phase = Phase::Sort;
                    return Stepped::More;
                }
                Phase::Get => {
                    if !self.get_step(st, deadline) {
                        return Stepped::More;
                    }
                    return self.finish();
                }
            }
        }
    }

    /// BY lookups until `deadline`; whether they are all done.
    fn by_step(&mut self, st: &mut State, deadline: Instant) -> bool {
        let (id, alpha) = (self.id, self.alpha);
        let Some(part) = self.by else { return true };
        let Some(loc) = locate(st, id) else { return true };
        let Some(work) = self.work.as_mut() else { return true };
        let Some(kp) = part_of(st, &loc, id, part) else { return true };
        let (mut hits, mut misses) = (0, 0);
        let mut keys: [Vec<u8>; LOOKUPS_AHEAD] = Default::default();
        let mut weight = Vec::new();
        // The keys read are stamped as read now (one clock read a step: the LRU clock counts
        // seconds, LFU minutes).
        let now = crate::util::clock::unix_ms();
        let n = work.items.len();
        while self.cursor < n {
            let to = (self.cursor + PER_CHECK).min(n);
            for from in (self.cursor..to).step_by(LOOKUPS_AHEAD) {
                let chunk = from..(from + LOOKUPS_AHEAD).min(to);
                for (i, k) in chunk.clone().zip(keys.iter_mut()) {
                    key_into(&kp, work.objs.of(&work.items[i]), k);
                    if let Loc::Db(d) = loc {
                        st.dbs[d].prefetch_slot(k);
                    }
                }
                if let Loc::Db(d) = loc {
                    for k in &keys[..chunk.len()] {
                        st.dbs[d].prefetch_entry(k);
                    }
                }
                for (i, k) in chunk.zip(keys.iter()) {
                    let Work { objs, items, .. } = &mut *work;
                    let elem = objs.of(&items[i]);
                    let (existed, w) = lookup(st, &loc, id, part, elem, k, now, |existed, found| {
                        let w = match found {
                            None if alpha => Weight::Bits(NO_WEIGHT),
                            None => Weight::Keep,
                            Some(f) if alpha => {
                                weight.clear();
                                f.with_bytes(|b| weight.extend_from_slice(b));
                                Weight::Alpha
                            }
                            Some(Found::Str(crate::types::RStr::Int(v))) => Weight::Bits((*v as f64).to_bits()),
                            Some(f) => match f.with_bytes(strtod) {
                                Some(d) => Weight::Bits(d.to_bits()),
                                None => Weight::Bad,
                            },
                        };
                        (existed, w)
                    })
                    .unwrap_or((false, Weight::Keep));
                    if existed {
                        hits += 1;
                    } else {
                        misses += 1;
                    }
                    match w {
                        Weight::Keep => {}
                        Weight::Bits(bits) => items[i].w = bits,
                        Weight::Bad => self.error = true,
                        Weight::Alpha => items[i].w = objs.append(&weight) as u64,
                    }
                }
            }
            self.cursor = to;
            if Instant::now() >= deadline {
                break;
            }
        }
        st.stats.keyspace_hits += hits;
        st.stats.keyspace_misses += misses;
        self.cursor >= n
    }

    /// GET lookups of the range until `deadline`; whether they are all done.
    fn get_step(&mut self, st: &mut State, deadline: Instant) -> bool {
        let id = self.id;
        let Some(work) = self.work.as_ref() else { return true };
        let loc = locate(st, id);
        let parts: Vec<Option<KeyPart>> = self
            .gets
            .iter()
            .map(|g| match (g, &loc) {
                (Get::Part(p), Some(loc)) => part_of(st, loc, id, *p),
                _ => None,
            })
            .collect();
        let nil: &[u8] = if self.proto >= 3 { b"_\r\n" } else { b"$-1\r\n" };
        let (mut hits, mut misses) = (0, 0);
        let now = crate::util::clock::unix_ms();
        let end = work.range.end;
        let db = match loc {
            Some(Loc::Db(d)) => Some(d),
            _ => None,
        };
        // The keys of 8 elements per pattern, named and their buckets asked of memory
        // together, as the synchronous path does.
        let mut named: Vec<[Vec<u8>; LOOKUPS_AHEAD]> = std::mem::take(&mut self.named);
        named.resize_with(self.gets.len(), Default::default);
        while self.cursor < end {
            let to = (self.cursor + PER_CHECK).min(end);
            for from in (self.cursor..to).step_by(LOOKUPS_AHEAD) {
                let chunk = &work.items[from..(from + LOOKUPS_AHEAD).min(to)];
                for (kp, keys) in parts.iter().zip(named.iter_mut()) {
                    let Some(kp) = kp else { continue };
                    for (it, k) in chunk.iter().zip(keys.iter_mut()) {
                        key_into(kp, work.objs.of(it), k);
                        if let Some(d) = db {
                            st.dbs[d].prefetch_slot(k);
                        }
                    }
                }
                if let Some(d) = db {
                    for (kp, keys) in parts.iter().zip(named.iter()) {
                        if kp.is_some() {
                            for k in &keys[..chunk.len()] {
                                st.dbs[d].prefetch_entry(k);
                            }
                        }
                    }
                }
                for (j, it) in chunk.iter().enumerate() {
                    let elem = work.objs.of(it);
                    for ((g, kp), keys) in self.gets.iter().zip(&parts).zip(&named) {
                        match (g, kp, &loc) {
                            (Get::Element, _, _) => bulk(room(&mut self.chunks, elem.len() + 16), elem),
                            (Get::Part(p), Some(_), Some(loc)) => {
                                let chunks = &mut self.chunks;
                                let existed = lookup(st, loc, id, *p, elem, &keys[j], now, |existed, found| {
                                    match found {
                                        Some(f) => f.with_bytes(|b| bulk(room(chunks, b.len() + 16), b)),
                                        None => room(chunks, 8).extend_from_slice(nil),
                                    }
                                    existed
                                });
                                match existed {
                                    Some(true) => hits += 1,
                                    Some(false) => misses += 1,
                                    None => room(chunks, 8).extend_from_slice(nil),
                                }
                            }
                            _ => room(&mut self.chunks, 8).extend_from_slice(nil),
                        }
                    }
                }
            }
            self.cursor = to;
            if Instant::now() >= deadline {
                break;
            }
        }
        self.named = named;
        st.stats.keyspace_hits += hits;
        st.stats.keyspace_misses += misses;
        self.cursor >= end
    }

    /// The reply (or the conversion error) once the lookups are over.
    fn finish(&mut self) -> Stepped {
        if self.error {
            let line = format!("-{NOT_A_DOUBLE}\r\n").into_bytes();
            return Stepped::Done(vec![line], Some(NOT_A_DOUBLE));
        }
        let work = self.work.take();
        let (count, mut body) = match work {
            Some(w) if self.gets.is_empty() => (w.range.len(), w.chunks),
            Some(w) => (w.range.len() * self.gets.len(), std::mem::take(&mut self.chunks)),
            None => (0, Vec::new()),
        };
        let mut head = Vec::with_capacity(24);
        int_line(&mut head, b'*', count as i64);
        let mut parts = Vec::with_capacity(body.len() + 1);
        parts.push(head);
        parts.append(&mut body);
        Stepped::Done(parts, None)
    }
}

/// Part `part` of walk `id`'s registration.
fn part_of(st: &State, loc: &Loc, id: u64, part: usize) -> Option<KeyPart> {
    let w = match *loc {
        Loc::Db(i) => st.dbs[i].sort_watch_ref(id),
        Loc::Walked(i) => st.walks.walked[i].sort_watch_ref(id),
    }?;
    w.part(part).cloned()
}

/// Deregisters walk `id` wherever it is; emptied tables no walk needs any more go.
pub fn unregister(st: &mut State, id: u64) {
    for db in &mut st.dbs {
        if db.unwatch_sort(id).is_some() {
            return;
        }
    }
    super::walks::drop_sort(st, id);
}
