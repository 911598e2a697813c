//! The connections a process holds under its leases, and the watchdog
//! that lets them go the moment those leases may have run out.
//!
//! The coordinator's calls to the store block: on a network that drops
//! packets instead of refusing them, one call can take as long as the
//! connection's own timeout before it fails. Had the coordinator itself
//! to notice that its tenure ran out, a cut-off process would keep
//! polling a Telegram token, or keep an IRC nick, for that long after
//! another process took them over. The watchdog waits on the tenure
//! alone, so the connections go when it ends, whatever the coordinator is
//! waiting for.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tactful_store::Lease;
use tokio::sync::watch;

use super::{Leased, Saved};

/// The connections to hold, each with the leases it is connected under
/// (by key): the coordinator changes them as its leases move, the
/// watchdog lets them all go when the tenure runs out.
pub(super) type Holding = Arc<Mutex<Vec<(Leased, BTreeMap<String, Lease>)>>>;

/// The connections, locked (one changing them at a time).
pub(super) fn lock(holding: &Holding) -> MutexGuard<'_, Vec<(Leased, BTreeMap<String, Lease>)>> {
    holding.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on the tenure (until when the leases are surely held) and, each
/// time it passes without a renewal, disconnects every connection; the
/// coordinator's next round that reaches the store connects again those
/// still this process's. Ends when the coordinator does (the tenure's
/// sender is dropped).
pub(super) async fn watch_tenure(mut tenure: watch::Receiver<Option<Instant>>, holding: Holding) {
    loop {
        let until = *tenure.borrow_and_update();
        if let Some(until) = until {
            tokio::select! {
                changed = tenure.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => {}
            }
            let renewed = tenure
                .borrow()
                .is_some_and(|u| tokio::time::Instant::from_std(u) > tokio::time::Instant::now());
            if !renewed {
                // Connecting may block (it reads the store): off the
                // runtime's workers, as the coordinator's thread does.
                let holding = holding.clone();
                let _ = tokio::task::spawn_blocking(move || let_go_all(&holding)).await;
            }
        }
        if tenure.changed().await.is_err() {
            return;
        }
    }
}

/// The tenure ran out: another process may hold this one's bot accounts
/// and IRC or Matrix connections by now. Listening on with them would
/// make two pollers of one Telegram token, two IRC connections fighting
/// over one nick, two Socket Mode connections sharing one app's events;
/// so they are disconnected (each once). Its rooms need nothing here:
/// their writes are fenced, and deliveries wait on the tenure.
pub(super) fn let_go_all(holding: &Holding) {
    for (leased, held) in lock(holding).iter_mut() {
        if held.is_empty() {
            continue;
        }
        tracing::warn!(
            connection = %leased.held_by,
            "the store has not been reached for longer than a lease: disconnected, as another process may hold these connections now"
        );
        follow(leased, held, BTreeMap::new(), None);
    }
}

/// Connects or disconnects `leased` as its leases now stand: `held` are
/// the leases it is connected under, `now` those this process holds,
/// `saved` the platforms' saved state to connect from. Any change (an
/// account gained or lost, a lease lost and taken again with a new epoch)
/// connects again with what is held now. Whether it is connected as `now`
/// says (`false`: connecting failed or `saved` could not be read, `held`
/// is kept, the next call tries again). Blocks on nothing but the
/// platform's own start: the store was read before.
pub(super) fn follow(
    leased: &Leased,
    held: &mut BTreeMap<String, Lease>,
    now: BTreeMap<String, Lease>,
    saved: Option<&Saved>,
) -> bool {
    if *held == now {
        return true;
    }
    let lost: Vec<&str> = held
        .iter()
        .filter(|(k, l)| now.get(*k) != Some(l))
        .map(|(k, _)| k.as_str())
        .collect();
    let gained: Vec<&str> = now
        .iter()
        .filter(|(k, l)| held.get(*k) != Some(l))
        .map(|(k, _)| k.as_str())
        .collect();
    let done = if now.is_empty() {
        tracing::info!(connection = %leased.held_by, ?lost, "other processes hold these connections now: disconnected here");
        (leased.connect)(None)
    } else if let Some(saved) = saved {
        tracing::info!(connection = %leased.held_by, ?gained, ?lost, "the connections this process holds changed: connecting those held now");
        (leased.connect)(Some((leased.held_by.held(&now), saved)))
    } else {
        false
    };
    if done {
        *held = now;
    }
    done
}
