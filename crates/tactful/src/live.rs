//! `tactful run`: the live service from a config.
//!
//! Builds the agents, starts the runtime (the engine on real time), serves
//! the configured platforms, and runs until SIGINT or SIGTERM, then shuts
//! down gracefully: no new messages, turns in flight finish within
//! `shutdown_grace_seconds`, decided replies are delivered.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use axum::Router;
use axum::routing::get;
use tactful_agents::Agent;
use tactful_runtime::{
    Connections, DeliveryConfig, Health, LinkState, Metrics, Platform, PlatformSlot, Runtime, RuntimeConfig,
    Store, wall_clock,
};
use tactful_web::{WebConfig, WebPlatform};
use tokio::sync::mpsc;

use crate::config::Config;

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

    /// Starts every configured platform and persona, restoring from the
    /// store.
    pub async fn start(config: &Config) -> anyhow::Result<Service> {
        if !config.platforms.any() {
            bail!("{}", no_platform());
        }
        let agents: HashMap<String, Arc<dyn Agent>> = config
            .agents
            .iter()
            .map(|(name, a)| (name.clone(), a.build(&config.contract)))
            .collect();
        let mut engine = config.engine.clone();
        // Ambient jitter only needs to differ between runs and rooms.
        engine.seed = wall_clock().as_millis();
        let who = match &config.platforms.web {
            Some(web) => format!("its web room is at http://{}/", web.listen),
            None => format!("tactful run -c {}", config.path.display()),
        };
        // One process per store, unless they share it as a cluster.
        let claim = match config.cluster {
            None => Some(tactful_store::claim(&config.store, &who)?),
            Some(_) => None,
        };
        let mut store = Store::open_at(&config.store)
            .with_context(|| format!("cannot use the store {}", config.store))?;
        let connected: Vec<Arc<PlatformSlot>> = crate::registry::build(config, &mut store)?
            .into_iter()
            .map(|(name, p)| PlatformSlot::new(name, p))
            .collect();
        let mut platforms: Vec<Arc<dyn Platform>> =
            connected.iter().map(|p| p.clone() as Arc<dyn Platform>).collect();
        let mut following = None;
        let web = match &config.platforms.web {
            Some(settings) => {
                let web = WebPlatform::new(
                    WebConfig {
                        listen: settings.listen,
                        auth_token: settings.auth_token.clone(),
                        history: settings.history,
                        max_message_chars: 4000,
                        allowed_origins: settings.allowed_origins.clone(),
                        max_rooms_per_connection: settings.max_rooms_per_connection,
                        show_decisions: settings.show_decisions,
                        examples: settings.examples.clone(),
                    },
                    &engine.personas,
                )?;
                // Several processes: what the others' web rooms show is
                // shown here too, from before the history is read back.
                if config.cluster.is_some() {
                    following = Some(
                        web.follow_others(&config.store)
                            .context("cannot listen to the other processes' web rooms")?,
                    );
                }
                let shown = store
                    .shown(settings.history)
                    .context("cannot read the web room's history from the store")?;
                // Before the runtime starts: replies it sends again must come
                // after. The web room owns every room no other platform
                // claims (so it comes last), and shows only those.
                let shown: Vec<_> = shown
                    .into_iter()
                    .filter(|m| !platforms.iter().any(|p| p.owns(&m.room)))
                    .collect();
                web.restore(shown.iter().cloned());
                // The notes on them too (why each persona answered or not).
                if settings.show_decisions && config.store.is_kept() {
                    match tactful_store::Reader::open(&config.store)
                        .and_then(|r| crate::web_notes::outputs(&r, &shown))
                    {
                        Ok(outputs) => web.restore_notes(&outputs),
                        Err(e) => {
                            tracing::warn!("the web room's notes could not be read back from the store: {e}")
                        }
                    }
                }
                let placeholders = store
                    .placeholders()
                    .context("cannot read the streaming placeholders from the store")?;
                web.reserve_ids(placeholders.iter().map(|p| &p.id));
                platforms.push(Arc::new(web.clone()));
                Some(web)
            }
            None => None,
        };
        // Every engine output feeds the metrics, off the engine's path.
        let metrics = Arc::new(Metrics::new());
        let (trace_tx, mut trace_rx) = mpsc::unbounded_channel();
        let counting = metrics.clone();
        let explaining = web.clone();
        // With several processes, a console shows the rooms the others own
        // too (`console/elsewhere.rs`).
        let elsewhere = match &config.cluster {
            Some(cluster) => Some(
                crate::console::elsewhere::Elsewhere::start(&config.store, &cluster.about)
                    .context("cannot start telling other processes' consoles what happens here")?,
            ),
            None => None,
        };
        let feed = match &elsewhere {
            Some(e) => crate::console::Feed::shared(e.clone()),
            None => crate::console::Feed::default(),
        };
        let showing = feed.clone();
        let counter = tokio::spawn(async move {
            while let Some(event) = trace_rx.recv().await {
                counting.observe(&event);
                showing.observe(&event);
                if let Some(web) = &explaining {
                    web.observe(&event);
                }
            }
        });
        // Room policies set in the console, kept in the store, on top of the
        // file's from the first message on.
        let stored = store
            .platform_state()
            .context("cannot read the store's saved state")?;
        let layers = crate::live_policies::LivePolicies::stored(config, &stored);
        layers.apply_to(&mut engine.policies);
        if let Some(web) = &web {
            web.set_policies(&engine.policies);
        }
        let runtime = Runtime::start(
            RuntimeConfig {
                engine,
                agents: agents.clone(),
                delivery: DeliveryConfig {
                    edit_interval: config.runtime.edit_interval,
                    placeholder: tactful_runtime::PLACEHOLDER.to_owned(),
                },
                shutdown_grace: config.runtime.shutdown_grace,
                store: Some(store),
                max_concurrent_turns: config.runtime.max_concurrent_turns,
                hooks: config.hooks.clone(),
                cluster: config.cluster.clone(),
            },
            platforms,
            Some(trace_tx),
        )?;
        let policies = Arc::new(crate::live_policies::LivePolicies::new(
            config.clone(),
            layers,
            runtime.handle(),
            web.clone(),
        ));
        let reloader = Arc::new(tokio::sync::Mutex::new(crate::reload::Reloader::new(
            config,
            crate::reload::Running {
                policies: policies.clone(),
                runtime: runtime.handle(),
                agents,
                web: web.clone(),
                platforms: connected.clone(),
            },
        )));
        let mut tasks = vec![counter];
        let mut web_addr = None;
        if let Some(web) = &web {
            web.connect_runtime(runtime.handle());
            tasks.extend(following.map(tactful_web::Following::start));
            // `tactful demo`: the console on the room's own listener, behind
            // the room's token.
            let console = config.platforms.web.as_ref().filter(|w| w.console).map(|w| {
                let store = config.store.is_kept().then(|| config.store.clone());
                (store, w.auth_token.clone())
            });
            if console.is_some() {
                // The room's page links to it: here, and only here.
                web.link_console("/console");
            }
            let sharing = config.cluster.is_some();
            let (addr, server) = web
                .serve_with(|addr| {
                    console.map(|(store, token)| {
                        // The demo's config is built in: nothing to reload.
                        let console =
                            crate::console::Console::new(addr, store, token, policies.clone(), feed.clone());
                        let console = if sharing { console.with_owners() } else { console };
                        console.routes()
                    })
                })
                .await
                .with_context(|| format!("cannot listen on {} (platforms.web.listen)", web.listen()))?;
            web_addr = Some(addr);
            tasks.push(server);
        }
        match config.cluster {
            None => {
                for platform in &connected {
                    platform.start(runtime.handle());
                }
            }
            Some(_) => {
                tasks.push(crate::live_policies::follow_others(
                    policies.clone(),
                    config.store.clone(),
                ));
                if let Some(e) = &elsewhere {
                    tasks.push(crate::console::elsewhere::follow(
                        feed.clone(),
                        e.clone(),
                        config.store.clone(),
                    ));
                }
                runtime.hold(
                    connected
                        .iter()
                        .map(|slot| leased(config, slot, runtime.handle()))
                        .collect(),
                );
            }
        }
        let health = runtime.health();
        if let Some(h) = &health {
            metrics.watch_store(h.clone());
        }
        metrics.watch_connections(runtime.connections());
        let metrics_server = match config.server {
            Some(listen) => {
                let store = config.store.is_kept().then(|| config.store.clone());
                let token = config.console_token.clone();
                let live = policies.clone();
                let reloading = reloader.clone();
                let sharing = config.cluster.is_some();
                let console = move |addr| {
                    let console =
                        crate::console::Console::new(addr, store, token, live, feed).with_reloader(reloading);
                    // Several processes: the rooms listing says which owns each.
                    if sharing { console.with_owners() } else { console }
                };
                Some(serve_metrics(listen, metrics.clone(), health, runtime.connections(), console).await?)
            }
            None => None,
        };
        let listening = Listening {
            web: web_addr,
            server: metrics_server.as_ref().map(|(a, _)| *a),
            networks: Vec::new(),
        };
        tasks.extend(metrics_server.map(|(_, task)| task));
        Ok(Service {
            listening,
            web,
            connected,
            runtime,
            reloader,
            _claim: claim,
            tasks,
        })
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
        for p in ["web", "irc", "matrix", "telegram", "discord", "slack"] {
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
}
