//! Command propagation: what each change to the dataset sends to the append-only file and to
//! replicas, as Redis 7.0 propagates it.
//!
//! A command that changed the dataset (it moved `dirty`) is propagated as the client sent it,
//! unless its handler rewrote it (`Ctx::propagate_as`: SET ... EX becomes SET ... PXAT, SPOP
//! becomes SREM, BLPOP becomes LPOP) or asked for no propagation of its own (`Ctx::no_propagate`).
//! Handlers may add operations (`Ctx::also_propagate`), and keys deleted on the way (lazy expiry)
//! add a `DEL`. Everything one execution unit produces (a command, a whole MULTI/EXEC, a script)
//! is collected and emitted when the outermost `call()` returns: wrapped in MULTI/EXEC when there
//! is more than one operation, as Redis's propagatePendingCommands does. EXEC and scripts are
//! never propagated themselves; the commands they ran are.

use bytes::Bytes;

use super::State;

/// One operation to propagate: the database it ran in and its argv.
#[derive(Debug)]
struct Op {
    db: usize,
    argv: Vec<Bytes>,
}

/// Propagation state kept in the executor's `State`.
#[derive(Debug, Default)]
pub struct Propagation {
    /// Whether anything consumes propagated commands (the AOF is on or being started, or a
    /// replication backlog exists). When off, nothing is collected.
    pub active: bool,
    /// Operations of the running execution unit.
    ops: Vec<Op>,
    /// What the running command propagates as, when its handler rewrote it.
    rewrite: Option<Vec<Bytes>>,
    /// The running command asked not to be propagated itself.
    prevent: bool,
    /// The running command propagates even without a change (FLUSHALL of an empty dataset,
    /// Redis's forceCommandPropagation).
    force: bool,
    /// Depth of nested `call()`s (EXEC and scripts run commands inside a command).
    depth: u32,
    /// A script turned AOF propagation off (`redis.set_repl` without REPL_AOF): what its
    /// commands do is not propagated until it turns it back on or ends.
    pub script_suppressed: bool,
}

/// What `enter` saved, for `leave`.
pub struct Frame {
    dirty: u64,
    rewrite: Option<Vec<Bytes>>,
    prevent: bool,
    force: bool,
}

/// Called by `call()` before the handler runs; None (one load and a branch, what every command
/// pays) while nothing consumes propagation.
#[inline]
pub fn enter(st: &mut State) -> Option<Frame> {
    if !st.prop.active {
        return None;
    }
    let p = &mut st.prop;
    p.depth += 1;
    Some(Frame {
        dirty: st.dirty,
        rewrite: p.rewrite.take(),
        prevent: std::mem::take(&mut p.prevent),
        force: std::mem::take(&mut p.force),
    })
}

/// Called by `call()` after the handler (and the expired keys it met) are done: queues the
/// command's own propagation and, at the outermost level, emits the execution unit.
pub fn leave(st: &mut State, frame: Frame, db: usize, name: &str, argv: &[Bytes]) {
    // A command that reset the counter (DEBUG LOADAOF, DEBUG RELOAD) changed nothing to replay,
    // as Redis clamps a negative difference to zero.
    let changed = st.dirty > frame.dirty;
    let p = &mut st.prop;
    p.depth -= 1;
    let rewrite = std::mem::replace(&mut p.rewrite, frame.rewrite);
    let prevent = std::mem::replace(&mut p.prevent, frame.prevent);
    let changed = changed || std::mem::replace(&mut p.force, frame.force);
    // The AOF may have been turned off by this very command (CONFIG SET inside EXEC).
    if !p.active {
        p.ops.clear();
        return;
    }
    if changed && !prevent && !p.script_suppressed && !never_propagated(name) {
        p.ops.push(Op { db, argv: rewrite.unwrap_or_else(|| argv.to_vec()) });
    }
    if p.depth == 0 {
        flush_unit(st);
    }
}

/// Commands whose effects propagate instead of themselves.
fn never_propagated(name: &str) -> bool {
    matches!(name, "exec" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro")
}

/// The running command propagates as `argv` instead of what the client sent.
pub fn rewrite(st: &mut State, argv: Vec<Bytes>) {
    if st.prop.active {
        st.prop.rewrite = Some(argv);
    }
}

/// The running command is propagated even if it changed nothing.
pub fn force(st: &mut State) {
    if st.prop.active {
        st.prop.force = true;
    }
}

/// The running command is not propagated itself (its `also` operations still are).
pub fn prevent(st: &mut State) {
    if st.prop.active {
        st.prop.prevent = true;
    }
}

/// Adds an operation to the running execution unit (or emits it at once outside one).
pub fn also(st: &mut State, db: usize, argv: Vec<Bytes>) {
    if !st.prop.active || st.prop.script_suppressed {
        return;
    }
    st.prop.ops.push(Op { db, argv });
    if st.prop.depth == 0 {
        flush_unit(st);
    }
}

/// A key deleted implicitly (expired, evicted): DEL, or UNLINK when freed lazily.
pub fn deletion(st: &mut State, db: usize, key: &[u8], lazy: bool) {
    if !st.prop.active {
        return;
    }
    let verb = if lazy { Bytes::from_static(b"UNLINK") } else { Bytes::from_static(b"DEL") };
    also(st, db, vec![verb, Bytes::copy_from_slice(key)]);
}

/// Emits the collected operations: one alone, several inside MULTI/EXEC.
fn flush_unit(st: &mut State) {
    if st.prop.ops.is_empty() {
        return;
    }
    let ops = std::mem::take(&mut st.prop.ops);
    let wrap = ops.len() > 1;
    let stream = st.repl.streams_own_writes();
    let emit = |st: &mut State, db: usize, argv: &[Bytes]| {
        super::aof::feed(st, db, argv);
        if stream {
            super::replication::feed(st, db, argv);
        }
    };
    if wrap {
        emit(st, ops[0].db, &[Bytes::from_static(b"MULTI")]);
    }
    let last_db = ops[ops.len() - 1].db;
    for op in &ops {
        emit(st, op.db, &op.argv);
    }
    if wrap {
        emit(st, last_db, &[Bytes::from_static(b"EXEC")]);
    }
    // Keep the allocation for the next unit.
    let mut ops = ops;
    ops.clear();
    st.prop.ops = ops;
}

/// Drops whatever a command collected without emitting it (AOF loading runs handlers directly).
pub fn discard(st: &mut State) {
    st.prop.ops.clear();
    st.prop.rewrite = None;
    st.prop.prevent = false;
    st.prop.force = false;
}
