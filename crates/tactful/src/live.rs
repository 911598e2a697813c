//! `tactful run`: the live service from a config.
//!
//! Builds the agents, starts the runtime (the engine on real time), serves
//! the configured platforms, and runs until SIGINT or SIGTERM, then shuts
//! down gracefully: no new messages, turns in flight finish within
//! `shutdown_grace_seconds`, decided replies are delivered.

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::routing::get;
use tactful_runtime::{Connections, Health, LinkState, Metrics, PlatformSlot, Runtime};
use tactful_web::WebPlatform;

use crate::config::Config;

mod start;

/// Where the running service can be reached.
#[derive(Debug, Clone)]
pub struct Listening {
    /// The web room, when `[platforms.web]` is configured.
    pub web: Option<std::net::SocketAddr>,
    /// `/healthz` and `/metrics`, when `[server] listen` is set.
    pub server: Option<std::net::SocketAddr>,
    /// One line per chat network, as connected (IRC: the nicks in use).
    pub networks: Vec<String>,
}

/// What `/healthz` says: 503 `unhealthy` while the store cannot write
/// (the service is up but refusing messages), 503 `degraded` while a
/// platform account that failed is not connected (those personas hear
/// nothing there), else 200 `ok` (accounts still connecting named).
fn healthz(health: Option<&Health>, connections: &Connections) -> (axum::http::StatusCode, String) {
    use axum::http::StatusCode;
    if let Some(h) = health.filter(|h| !h.is_ok()) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "unhealthy: the store cannot write ({}); new messages are refused\n",
                h.error().unwrap_or_default()
            ),
        );
    }
    let down = connections.down();
    if !down.is_empty() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("degraded: not connected: {}\n", down.join("; ")),
        );
    }
    let connecting: Vec<String> = connections
        .all()
        .into_iter()
        .filter(|(_, _, s)| *s == LinkState::Connecting)
        .map(|(p, q, _)| format!("{p} {q}"))
        .collect();
    if connecting.is_empty() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::OK,
            format!("ok (connecting: {})\n", connecting.join(", ")),
        )
    }
}

/// Serves `/healthz` ([`healthz`]), `/metrics` and the console.
async fn serve_metrics(
    listen: std::net::SocketAddr,
    metrics: Arc<Metrics>,
    health: Option<Arc<Health>>,
    connections: Connections,
    console: impl FnOnce(std::net::SocketAddr) -> crate::console::Console,
) -> anyhow::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (server.listen)"))?;
    let addr = listener.local_addr()?;
    let healthz = move || {
        let health = health.clone();
        let connections = connections.clone();
        async move { healthz(health.as_deref(), &connections) }
    };
    let app = Router::new().route("/healthz", get(healthz)).route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    metrics.render(),
                )
            }
        }),
    );
    let app = app.merge(console(addr).routes());
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics server stopped: {e}");
        }
    });
    Ok((addr, task))
}

/// Runs the service until a shutdown signal. `ready` is called once
/// everything listens.
pub async fn run(config: &Config, ready: impl FnOnce(Listening)) -> anyhow::Result<()> {
    // SIGHUP reloads the config: watched before anything slow, so a SIGHUP
    // during the start never ends the process.
    #[cfg(unix)]
    let hup = crate::reload::watch_sighup();
    let service = Service::start(config).await?;
    #[cfg(unix)]
    if let Some(hup) = hup {
        tokio::spawn(crate::reload::on_sighup(hup, service.reloader.clone()));
    }
    let mut listening = service.listening.clone();
    listening.networks = service.networks().await;
    ready(listening);
    shutdown_signal().await;
    tracing::info!("shutting down");
    service.stop().await;
    Ok(())
}

/// A running service: what `tactful run` starts, for embedding (the service
/// benchmark drives one in-process).
pub struct Service {
    /// Where it can be reached.
    pub listening: Listening,
    /// The web room, when configured.
    pub web: Option<WebPlatform>,
    /// The chat platforms besides the web room (a reload may replace
    /// their connections).
    connected: Vec<Arc<PlatformSlot>>,
    runtime: Runtime,
    /// Reloads the file (SIGHUP and the console share it).
    reloader: crate::reload::SharedReloader,
    /// This service's hold on its store, released when it ends (none when
    /// several processes share it).
    _claim: Option<tactful_store::Claim>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Service {
    /// Stops gracefully: turns in flight finish within the grace period,
    /// decided replies are delivered, the store is flushed.
    pub async fn stop(self) {
        self.runtime.shutdown().await;
        for platform in &self.connected {
            platform.stop();
        }
        for task in self.tasks {
            task.abort();
        }
    }

    /// One line per chat network for the start banner, as connected
    /// (IRC's names the nicks actually in use, so it may wait a few
    /// seconds for the connections).
    pub async fn networks(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for platform in &self.connected {
            lines.push(platform.describe().await);
        }
        lines
    }

    /// The runtime's inbound handle.
    pub fn handle(&self) -> tactful_runtime::RuntimeHandle {
        self.runtime.handle()
    }
}

/// A platform's accounts as processes sharing the store hold them:
/// connected from the state the store holds when their leases are taken
/// (offsets and sync tokens saved by the last holder), disconnected when
/// other processes hold them. Each Telegram, Discord or Slack account is
/// leased on its own; a platform only its connection can post to (IRC,
/// Matrix) is held by the owner of its rooms.
fn leased(
    config: &Config,
    slot: &Arc<PlatformSlot>,
    runtime: tactful_runtime::RuntimeHandle,
) -> tactful_runtime::cluster::Leased {
    use tactful_runtime::cluster::HeldBy;
    slot.let_go(None);
    let name = slot.name();
    let held_by = match tactful_store::connection_partition(name) {
        Some(p) => HeldBy::Partition(p),
        None => HeldBy::Accounts {
            platform: name.to_owned(),
            personas: config
                .platforms
                .connected
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, settings)| settings.personas())
                .unwrap_or_default(),
        },
    };
    let (slot, config) = (slot.clone(), config.clone());
    tactful_runtime::cluster::Leased {
        held_by,
        connect: Box::new(move |held| match held {
            None => {
                slot.let_go(Some(&runtime));
                true
            }
            Some((held, saved)) => {
                let connected = (|| -> anyhow::Result<()> {
                    // Within the running connection when the platform can:
                    // the accounts that stay keep their connections.
                    if slot.change_held(held.clone(), saved) {
                        return Ok(());
                    }
                    let (_, platform) = crate::registry::build_from(&config, saved, |n| n == name)?
                        .into_iter()
                        .next()
                        .ok_or_else(|| anyhow::anyhow!("{name} is not configured"))?;
                    slot.start_with(platform, runtime.clone(), held);
                    Ok(())
                })();
                match connected {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!("cannot connect {name} (trying again at the next round): {e:#}");
                        false
                    }
                }
            }
        }),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM: {e}");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// What to say when a config has no platform: every one there is, from
/// the registry, so the list stays true as platforms are added.
fn no_platform() -> String {
    let others: Vec<String> = crate::registry::platforms()
        .iter()
        .map(|r| format!("[platforms.{}]", r.name))
        .collect();
    let (last, rest) = others
        .split_last()
        .map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
    format!(
        "no platform to serve: add a [platforms.web] table (listen = \"127.0.0.1:7878\"), {} or {last}",
        rest.join(", ")
    )
}

#[cfg(test)]
mod no_platform_tests {
    #[test]
    fn every_platform_is_named() {
        let said = super::no_platform();
        for p in [
            "web",
            "irc",
            "matrix",
            "telegram",
            "discord",
            "slack",
            "xmpp",
            "email",
            "mattermost",
        ] {
            assert!(said.contains(&format!("[platforms.{p}]")), "{p} in {said}");
        }
    }
}

#[cfg(all(test, feature = "irc", feature = "matrix"))]
mod connection_bound_tests {
    /// The store pins IRC's rooms to one partition by their prefix: the
    /// prefix it knows is the one the IRC crate names its rooms with, or
    /// the owner of an IRC room would not be the process that can post.
    #[test]
    fn the_store_knows_irc_rooms_by_the_prefix_irc_gives_them() {
        assert!(
            tactful_store::CONNECTION_BOUND.contains(&("irc", tactful_irc::ROOMS.prefix)),
            "{:?}",
            tactful_store::CONNECTION_BOUND
        );
        let channel = tactful_irc::ROOMS.room("#tactful");
        assert_eq!(
            Some(tactful_store::partition_of(&channel)),
            tactful_store::connection_partition("irc")
        );
    }

    /// The same for Matrix: a reply goes through the account's synced
    /// client, which only the process holding the connection has.
    #[test]
    fn the_store_knows_matrix_rooms_by_the_prefix_matrix_gives_them() {
        assert!(
            tactful_store::CONNECTION_BOUND.contains(&("matrix", tactful_matrix::event::ROOMS.prefix)),
            "{:?}",
            tactful_store::CONNECTION_BOUND
        );
        let room = tactful_matrix::event::ROOMS.room("!abc:example.org");
        assert_eq!(
            Some(tactful_store::partition_of(&room)),
            tactful_store::connection_partition("matrix")
        );
    }

    /// The same for XMPP: a post is a stanza on the account's own stream,
    /// in a room it joined there; a room and a one-to-one chat alike.
    #[cfg(feature = "xmpp")]
    #[test]
    fn the_store_knows_xmpp_rooms_by_the_prefix_xmpp_gives_them() {
        assert!(
            tactful_store::CONNECTION_BOUND.contains(&("xmpp", tactful_xmpp::ROOMS.prefix)),
            "{:?}",
            tactful_store::CONNECTION_BOUND
        );
        for native in ["team@conference.example.org", "dm:docs:alice@example.org"] {
            let room = tactful_xmpp::ROOMS.room(native);
            assert_eq!(
                Some(tactful_store::partition_of(&room)),
                tactful_store::connection_partition("xmpp")
            );
        }
    }
}
