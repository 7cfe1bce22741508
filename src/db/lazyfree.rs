//! Freeing big values off the executor thread (UNLINK, DEL with lazyfree-lazy-user-del): a value
//! made of many allocations is handed to one background thread that drops it, so deleting a
//! multi-million-element collection does not stall every client. FLUSHALL/FLUSHDB ASYNC hand
//! over whole tables, counted a freed object per key as Redis counts them. INFO reads the thread's
//! counters: values queued and not yet freed (lazyfree_pending_objects), and values freed since
//! startup or CONFIG RESETSTAT (lazyfreed_objects), as Redis 7.0's lazyfree thread keeps them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use crate::types::Value;

/// Redis's LAZYFREE_THRESHOLD: values costing more allocations than this are freed in the background.
pub const LAZYFREE_THRESHOLD: usize = 64;

static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

/// Values handed to the thread and not yet freed (INFO lazyfree_pending_objects).
pub fn pending_objects() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

/// Values the thread freed since startup or CONFIG RESETSTAT (INFO lazyfreed_objects).
pub fn freed_objects() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT: the freed count restarts (what is pending stays pending).
pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}

fn dropper() -> &'static Mutex<Sender<Value>> {
    static DROPPER: OnceLock<Mutex<Sender<Value>>> = OnceLock::new();
    DROPPER.get_or_init(|| {
        let (tx, rx) = channel::<Value>();
        let spawned = std::thread::Builder::new().name("lazyfree".into()).spawn(move || {
            for value in rx {
                drop(value);
                FREED.fetch_add(1, Ordering::Relaxed);
                PENDING.fetch_sub(1, Ordering::Relaxed);
            }
        });
        if spawned.is_err() {
            tracing::warn!("Could not start the lazyfree thread: big values are freed inline");
        }
        Mutex::new(tx)
    })
}

/// Drops `value` in the background when it is big enough to be worth it, else right here.
pub fn free(value: Value) {
    if value.free_effort() <= LAZYFREE_THRESHOLD {
        return;
    }
    let sender = dropper().lock().unwrap_or_else(|p| p.into_inner());
    PENDING.fetch_add(1, Ordering::Relaxed);
    // If the thread is gone the value comes back in the error and is dropped here.
    if sender.send(value).is_err() {
        PENDING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Frees the tables of an asynchronous flush, holding `keys` keys, on a thread of their own (a
/// database of millions of keys must not hold up the values UNLINK queues meanwhile). Counted
/// as Redis's lazyfreeFreeDatabase counts: pending until freed, then `keys` freed objects.
pub fn free_tables<T: Send + 'static>(tables: T, keys: u64) {
    PENDING.fetch_add(keys, Ordering::Relaxed);
    let job = move || {
        drop(tables);
        crate::alloc::flush_thread_cache();
        FREED.fetch_add(keys, Ordering::Relaxed);
        PENDING.fetch_sub(keys, Ordering::Relaxed);
    };
    // A thread that cannot start drops the job, and the tables with it, here.
    if std::thread::Builder::new().name("lazyfree-db".into()).spawn(job).is_err() {
        FREED.fetch_add(keys, Ordering::Relaxed);
        PENDING.fetch_sub(keys, Ordering::Relaxed);
    }
}
