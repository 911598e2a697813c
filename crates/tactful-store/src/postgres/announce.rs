//! Notifications sent outside any batch: what one process's console
//! live transcript tells the others ([`crate::fan_out::LiveNote`]). Unlike
//! the web room's changes, these are not rows: nothing is kept, and a
//! notification that cannot be sent is dropped (the console that missed it
//! can reload the room from the store).

use std::time::Duration;

use tokio::sync::mpsc;

use crate::location::masked;
use crate::{Location, StoreError};

/// Notifications queued and not yet sent: past this, new ones are dropped
/// rather than held (a database that stopped answering must not grow the
/// queue without bound).
const QUEUE: usize = 1_024;

/// Sends `NOTIFY`s on a connection of its own; cheap to clone.
#[derive(Clone, Debug)]
pub struct Announcer {
    tx: mpsc::Sender<(&'static str, String)>,
}

impl Announcer {
    /// Starts sending on the database at `at`, connecting (and connecting
    /// again after a failure) on a thread of its own.
    pub fn start(at: &Location) -> Result<Announcer, StoreError> {
        let Location::Postgres(url) = at else {
            return Err(StoreError::NeedsPostgres("announcing to other processes"));
        };
        let (config, tls) = super::config(url)?;
        let shown = masked(url);
        let (tx, mut rx) = mpsc::channel::<(&'static str, String)>(QUEUE);
        super::on_own_thread("tactful-announce", move |ready| async move {
            let _ = ready.send(Ok(()));
            let mut client = None;
            // Said at WARN once per streak of failures: the other
            // processes' consoles miss this one's lines meanwhile.
            let mut failing = false;
            while let Some((channel, payload)) = rx.recv().await {
                if client.is_none() {
                    match config.connect(tls.clone()).await {
                        Ok((c, connection)) => {
                            tokio::spawn(connection);
                            client = Some(c);
                            if std::mem::take(&mut failing) {
                                tracing::info!("announcing to other processes' consoles again");
                            }
                        }
                        Err(e) => {
                            if !std::mem::replace(&mut failing, true) {
                                tracing::warn!(
                                    "cannot announce to other processes' consoles ({shown}): {e}; their live transcripts miss this process's lines until it can"
                                );
                            }
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    }
                }
                if let Some(c) = &client
                    && let Err(e) = c.execute("SELECT pg_notify($1, $2)", &[&channel, &payload]).await
                {
                    tracing::debug!("an announcement to other processes was not sent: {e}");
                    if c.is_closed() {
                        client = None;
                    }
                }
            }
        })?;
        Ok(Announcer { tx })
    }

    /// Queues `payload` for `channel`; `false` when the queue is full (it
    /// is dropped) or the sender stopped.
    pub fn announce(&self, channel: &'static str, payload: String) -> bool {
        self.tx.try_send((channel, payload)).is_ok()
    }
}
