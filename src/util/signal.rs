//! A wake-up flag for one waiting task, the cheap counterpart of `tokio::sync::Notify` for the
//! per-request path: while nothing is raised and the same task waits again, a wait costs two
//! plain loads and no locked instruction (the waker is registered once, and its identity kept
//! beside it to check without the lock). Nothing is unlinked when a wait is abandoned, so a
//! connection can poll it in every loop turn without paying for registration and removal each
//! time.
//!
//! Raises coalesce: any number of `raise` calls before the next wait wake it once, like a
//! `Notify` permit.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
pub struct Signal {
    raised: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// The registered waker's data and vtable pointers (0 for none), written under the lock.
    waker_data: AtomicUsize,
    waker_vtable: AtomicUsize,
}

impl Signal {
    /// Sets the flag and wakes the task that last waited, if any.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        let slot = self.waker.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(waker) = slot.as_ref() {
            waker.wake_by_ref();
        }
    }

    /// Ready (and the flag cleared) once raised; otherwise registers the caller's waker.
    pub fn poll_take(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.raised.load(Ordering::Acquire) && self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        let (data, vtable) = (cx.waker().data() as usize, cx.waker().vtable() as *const _ as usize);
        // Already registered: a raise after the load above finds this waker and wakes it.
        if self.waker_data.load(Ordering::Acquire) == data && self.waker_vtable.load(Ordering::Acquire) == vtable {
            return Poll::Pending;
        }
        {
            let mut slot = self.waker.lock().unwrap_or_else(|p| p.into_inner());
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
            self.waker_data.store(data, Ordering::Release);
            self.waker_vtable.store(vtable, Ordering::Release);
        }
        // A raise between the first check and the registration found no (or the old) waker.
        if self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Waits until raised, clearing the flag.
    pub async fn wait(&self) {
        poll_fn(|cx| self.poll_take(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn raises_before_and_during_a_wait_wake_it() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = Arc::new(Signal::default());
            s.raise();
            s.raise();
            s.wait().await;
            let s2 = s.clone();
            let waiter = tokio::spawn(async move { s2.wait().await });
            tokio::task::yield_now().await;
            s.raise();
            waiter.await.unwrap();
            // Both earlier raises were consumed by the first wait.
            let pending = std::future::poll_fn(|cx| Poll::Ready(s.poll_take(cx).is_pending())).await;
            assert!(pending);
        });
    }

    #[test]
    fn a_task_polling_again_or_another_task_is_still_woken() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = Arc::new(Signal::default());
            for _ in 0..3 {
                // The same task polls twice before the raise (the second poll takes the
                // lock-free path), then a second task takes over the wait.
                let s2 = s.clone();
                let first = tokio::spawn(async move {
                    let pending = std::future::poll_fn(|cx| Poll::Ready(s2.poll_take(cx).is_pending())).await;
                    assert!(pending);
                    s2.wait().await;
                });
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
                s.raise();
                first.await.unwrap();
                let s3 = s.clone();
                let second = tokio::spawn(async move { s3.wait().await });
                tokio::task::yield_now().await;
                s.raise();
                tokio::time::timeout(std::time::Duration::from_secs(5), second).await.unwrap().unwrap();
            }
        });
    }
}
