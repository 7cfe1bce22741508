//! Freeing big values off the executor thread (UNLINK, DEL with lazyfree-lazy-user-del): a value
//! made of many allocations is handed to one background thread that drops it, so deleting a
//! multi-million-element collection does not stall every client.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use crate::types::Value;

/// Redis's LAZYFREE_THRESHOLD: values costing more allocations than this are freed in the background.
pub const LAZYFREE_THRESHOLD: usize = 64;

fn dropper() -> &'static Mutex<Sender<Value>> {
    static DROPPER: OnceLock<Mutex<Sender<Value>>> = OnceLock::new();
    DROPPER.get_or_init(|| {
        let (tx, rx) = channel::<Value>();
        let spawned = std::thread::Builder::new().name("lazyfree".into()).spawn(move || {
            for value in rx {
                drop(value);
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
    // If the thread is gone the value comes back in the error and is dropped here.
    let _ = sender.send(value);
}
