//! Waiting for a condition that a [`Notify`] announces changes of: a
//! persona's connection coming up, every account saying who it is, a
//! platform's connection being switched in. Written once, because the
//! one subtle step (asking to be woken *before* looking, so a change
//! between the look and the wait is not missed) is easy to get wrong.

use std::time::Duration;

use tokio::sync::Notify;

/// Waits `within` at most until `ready` gives a value: `ready` is asked
/// at once, again each time `notify` wakes its waiters, and once more
/// when the time is up. `None` when it never gave one.
pub async fn until<T>(notify: &Notify, within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let changed = notify.notified();
        if let Some(v) = ready() {
            return Some(v);
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_change_announced_is_seen_and_none_comes_after_the_time() {
        let notify = Arc::new(Notify::new());
        let count = Arc::new(AtomicUsize::new(0));
        let (n, c) = (notify.clone(), count.clone());
        let waiter = tokio::spawn(async move {
            until(&n, Duration::from_secs(30), || {
                (c.load(Ordering::SeqCst) >= 2).then_some("two")
            })
            .await
        });
        for _ in 0..2 {
            tokio::task::yield_now().await;
            count.fetch_add(1, Ordering::SeqCst);
            notify.notify_waiters();
        }
        assert_eq!(waiter.await.expect("ran"), Some("two"));
        let never = until(&notify, Duration::from_secs(5), || None::<()>).await;
        assert_eq!(never, None);
    }
}
