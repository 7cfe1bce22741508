//! Transaction state the executor keeps per client: which commands a client in MULTI runs at
//! once, the WATCH table (key → watching clients), and ending a transaction as a refused EXEC
//! does. The MULTI/EXEC/WATCH handlers are `commands::transactions`.

use super::clients::Client;
use super::State;

/// Commands a client in MULTI runs at once instead of queueing.
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

/// Forgets `client`'s watched keys.
pub fn unwatch_client(st: &mut State, client: &mut Client) {
    let id = client.id;
    for (db, key, _) in std::mem::take(&mut client.watched_keys) {
        let k = (db, key);
        if let Some(ids) = st.watched.get_mut(&k) {
            ids.retain(|&w| w != id);
            if ids.is_empty() {
                st.watched.remove(&k);
            }
        }
    }
    client.dirty_cas = false;
}

/// Ends `client`'s transaction as a refused EXEC does (Redis's execCommandAbort): the queue and
/// the watched keys go; returns the EXECABORT line for `reason` (an error line without `-`).
pub fn abort_exec(st: &mut State, client: &mut Client, reason: &str) -> String {
    client.multi = None;
    client.dirty_exec = false;
    unwatch_client(st, client);
    format!("EXECABORT Transaction discarded because of: {reason}")
}
