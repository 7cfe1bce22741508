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

/// Where an operation goes (Redis's PROPAGATE_AOF and PROPAGATE_REPL).
pub const AOF: u8 = 1;
pub const REPL: u8 = 2;
pub const ALL: u8 = AOF | REPL;

/// One operation to propagate: the database it ran in, its argv, and where it goes.
#[derive(Debug)]
struct Op {
    db: usize,
    argv: Vec<Bytes>,
    targets: u8,
}

/// Propagation state kept in the executor's `State`.
#[derive(Debug)]
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
    /// Where the running command propagates even without a change (FLUSHALL of an empty
    /// dataset to both, PUBLISH to replicas only: Redis's forceCommandPropagation).
    force: u8,
    /// Depth of nested `call()`s (EXEC and scripts run commands inside a command).
    depth: u32,
    /// Where a running script's commands propagate (`redis.set_repl`): `ALL` outside scripts.
    pub script_targets: u8,
}

impl Default for Propagation {
    fn default() -> Self {
        Propagation {
            active: false,
            ops: Vec::new(),
            rewrite: None,
            prevent: false,
            force: 0,
            depth: 0,
            script_targets: ALL,
        }
    }
}

/// What `enter` saved, for `leave`.
pub struct Frame {
    dirty: u64,
    rewrite: Option<Vec<Bytes>>,
    prevent: bool,
    force: u8,
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
    let dirty = st.dirty > frame.dirty;
    let p = &mut st.prop;
    p.depth -= 1;
    let rewrite = std::mem::replace(&mut p.rewrite, frame.rewrite);
    let prevent = std::mem::replace(&mut p.prevent, frame.prevent);
    let forced = std::mem::replace(&mut p.force, frame.force);
    let targets = (if dirty { ALL } else { 0 } | forced) & p.script_targets;
    // The AOF may have been turned off by this very command (CONFIG SET inside EXEC).
    if !p.active {
        p.ops.clear();
        return;
    }
    if targets != 0 && !prevent && !never_propagated(name) {
        p.ops.push(Op { db, argv: rewrite.unwrap_or_else(|| argv.to_vec()), targets });
    }
    if p.depth == 0 {
        // SCAN and RANDOMKEY may meet any number of expired keys: their DELs go out one by one,
        // as the active expiry cycle's do (Redis 7.0's CMD_TOUCHES_ARBITRARY_KEYS, a flag
        // COMMAND INFO does not show).
        let atomic = !matches!(name, "scan" | "randomkey");
        flush_unit(st, atomic);
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

/// The running command is propagated to `targets` even if it changed nothing.
pub fn force(st: &mut State, targets: u8) {
    if st.prop.active {
        st.prop.force |= targets;
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
    if !st.prop.active || st.prop.script_targets == 0 {
        return;
    }
    let targets = st.prop.script_targets;
    st.prop.ops.push(Op { db, argv, targets });
    if st.prop.depth == 0 {
        flush_unit(st, true);
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

/// Emits the collected operations: one alone, several inside MULTI/EXEC when `atomic`.
fn flush_unit(st: &mut State, atomic: bool) {
    if st.prop.ops.is_empty() {
        return;
    }
    let ops = std::mem::take(&mut st.prop.ops);
    let wrap = atomic && ops.len() > 1;
    let stream = st.repl.streams_own_writes();
    let emit = |st: &mut State, db: usize, argv: &[Bytes], targets: u8| {
        if targets & AOF != 0 {
            super::aof::feed(st, db, argv);
        }
        if stream && targets & REPL != 0 {
            super::replication::feed(st, db, argv);
        }
    };
    // MULTI and EXEC go to both, whatever the operations' own targets, as in Redis.
    if wrap {
        emit(st, ops[0].db, &[Bytes::from_static(b"MULTI")], ALL);
    }
    let last_db = ops[ops.len() - 1].db;
    for op in &ops {
        emit(st, op.db, &op.argv, op.targets);
    }
    if wrap {
        emit(st, last_db, &[Bytes::from_static(b"EXEC")], ALL);
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
    st.prop.force = 0;
}
