//! Frees big plain buffers on a thread of their own. Freeing a large allocation can make jemalloc
//! purge dirty pages right there (its deferred decay work, run inline by the free: madvise over
//! tens of MiB): the old bucket array a keyspace of 8M keys leaves when it doubles took the
//! executor 2-3 ms in the free (perf, `extent_dalloc_wrapper` under `rehash_step`), and a big
//! set's old slot array 1.75 ms (`madvise` under the executor during SINTER's writers). Values go to
//! `db::lazyfree`, which counts them for INFO; this is for a type's own buffers, which are not
//! objects and must not show there, and for the connections' big output buffers and finished
//! replies' snapshots.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this are freed where they are dropped: their free purges little.
pub const MIN_BYTES: usize = 1 << 20;

/// The freeing thread's channel; None when the thread could not start.
type Channel = Mutex<Option<Sender<Box<dyn Send>>>>;

fn sender() -> &'static Channel {
    static SENDER: OnceLock<Channel> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = channel::<Box<dyn Send>>();
        let spawned = std::thread::Builder::new().name("bgfree".into()).spawn(move || {
            // Below the executor's priority: the purge is never urgent, the executor's work is.
            // SAFETY: setpriority on this thread's own id changes nothing else.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t, 10);
            }
            for buffer in rx {
                drop(buffer);
            }
        });
        Mutex::new(spawned.ok().map(|_| tx))
    })
}

/// Drops `buffer` on the freeing thread when it is big (else, or without that thread, here).
pub fn drop_big<T: Send + 'static>(buffer: Box<[T]>) {
    let bytes = std::mem::size_of_val(&*buffer);
    drop_sized(buffer, bytes);
}

/// Drops `value`, which owns `bytes` of memory, on the freeing thread when that is big (else,
/// or without that thread, here).
pub fn drop_sized<T: Send + 'static>(value: T, bytes: usize) {
    if bytes >= MIN_BYTES {
        drop_elsewhere(value);
    }
}

/// Drops `value` on the freeing thread, whatever it holds (or here, without that thread): for
/// what may own much more than its size says, such as a reply's snapshot.
pub fn drop_elsewhere<T: Send + 'static>(value: T) {
    let guard = sender().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = guard.as_ref() {
        // If the thread is gone the value comes back in the error and is dropped here.
        let _ = tx.send(Box::new(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_buffers_are_freed_on_the_thread_and_small_ones_here() {
        drop_big(vec![7usize; MIN_BYTES / 8].into_boxed_slice());
        drop_big(vec![7u32; 4].into_boxed_slice());
        // The thread was started by the big one and took it.
        assert!(sender().lock().unwrap().is_some());
    }
}
