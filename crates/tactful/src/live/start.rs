//! [`Service::start`], step by step: the store opened and claimed, the
//! platforms built, the web room restored, the observers of the engine's
//! outputs, the room policies kept in the store, the runtime, then what
//! listens (the web room, the platforms' accounts, `/metrics` and the
//! console). Each step is a function of its own, named for what it does,
//! so the order they run in reads in one place.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use tactful_agents::Agent;
use tactful_core::EngineConfig;
use tactful_runtime::{
    DeliveryConfig, Metrics, Platform, PlatformSlot, Runtime, RuntimeConfig, Store, TraceEvent, wall_clock,
};
use tactful_web::{Following, WebConfig, WebPlatform};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Listening, Service, leased, no_platform, serve_metrics};
use crate::config::Config;
use crate::console::Feed;
use crate::console::elsewhere::Elsewhere;
use crate::live_policies::LivePolicies;
use crate::reload::SharedReloader;

impl Service {
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
        let (claim, mut store) = open_store(config)?;
        let connected: Vec<Arc<PlatformSlot>> = crate::registry::build(config, &mut store)?
            .into_iter()
            .map(|(name, p)| PlatformSlot::new(name, p))
            .collect();
        let mut platforms: Vec<Arc<dyn Platform>> =
            connected.iter().map(|p| p.clone() as Arc<dyn Platform>).collect();
        let (web, following) = match restored_web_room(config, &engine, &mut store, &platforms)? {
            Some((web, following)) => {
                platforms.push(Arc::new(web.clone()));
                (Some(web), following)
            }
            None => (None, None),
        };
        let metrics = Arc::new(Metrics::new());
        let observers = observe(config, &metrics, web.clone())?;
        // Room policies set in the console, kept in the store, on top of the
        // file's from the first message on.
        let stored = store
            .platform_state()
            .context("cannot read the store's saved state")?;
        let layers = LivePolicies::stored(config, &stored);
        layers.apply_to(&mut engine.policies);
        if let Some(web) = &web {
            web.set_policies(&engine.policies);
        }
        let runtime = start_runtime(config, engine, &agents, store, platforms, observers.trace)?;
        let (policies, reloader) = controls(config, layers, &runtime, web.clone(), agents, connected.clone());
        let mut tasks = vec![observers.task];
        let web_addr = match &web {
            Some(web) => Some(
                serve_web_room(
                    config,
                    web,
                    &runtime,
                    following,
                    &policies,
                    &observers.feed,
                    &mut tasks,
                )
                .await?,
            ),
            None => None,
        };
        let live = Live {
            config,
            runtime: &runtime,
            policies: &policies,
            feed: &observers.feed,
        };
        tasks.extend(start_accounts(&live, &connected, observers.elsewhere.as_ref()));
        let server = serve_server(&live, &metrics, reloader.clone()).await?;
        let listening = Listening {
            web: web_addr,
            server: server.as_ref().map(|(a, _)| *a),
            networks: Vec::new(),
        };
        tasks.extend(server.map(|(_, task)| task));
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

/// The store, and this process's claim on it (one process per store,
/// unless several share it as a cluster).
fn open_store(config: &Config) -> anyhow::Result<(Option<tactful_store::Claim>, Store)> {
    let who = match &config.platforms.web {
        Some(web) => format!("its web room is at http://{}/", web.listen),
        None => format!("tactful run -c {}", config.path.display()),
    };
    let claim = match config.cluster {
        None => Some(tactful_store::claim(&config.store, &who)?),
        Some(_) => None,
    };
    let store =
        Store::open_at(&config.store).with_context(|| format!("cannot use the store {}", config.store))?;
    Ok((claim, store))
}

/// The web room, when configured, with what it showed before the restart
/// (messages, their notes, the ids of placeholders still on record), and,
/// with several processes, its follower of the others' web rooms (started
/// before the history is read back, so nothing falls between). The web
/// room owns every room no other platform claims, so it comes last in
/// `platforms`, and shows only those.
fn restored_web_room(
    config: &Config,
    engine: &EngineConfig,
    store: &mut Store,
    platforms: &[Arc<dyn Platform>],
) -> anyhow::Result<Option<(WebPlatform, Option<Following>)>> {
    let Some(settings) = &config.platforms.web else {
        return Ok(None);
    };
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
    let following = match config.cluster {
        Some(_) => Some(
            web.follow_others(&config.store)
                .context("cannot listen to the other processes' web rooms")?,
        ),
        None => None,
    };
    let shown = store
        .shown(settings.history)
        .context("cannot read the web room's history from the store")?;
    // Before the runtime starts: replies it sends again must come after.
    let shown: Vec<_> = shown
        .into_iter()
        .filter(|m| !platforms.iter().any(|p| p.owns(&m.room)))
        .collect();
    web.restore(shown.iter().cloned());
    // The notes on them too (why each persona answered or not).
    if settings.show_decisions && config.store.is_kept() {
        match tactful_store::Reader::open(&config.store).and_then(|r| crate::web_notes::outputs(&r, &shown)) {
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
    Ok(Some((web, following)))
}

/// Who follows the engine's outputs, off its path: the metrics, the
/// console's live feed (shared with the other processes' consoles when
/// several share the store), the web room's notes.
struct Observers {
    trace: mpsc::UnboundedSender<TraceEvent>,
    task: JoinHandle<()>,
    feed: Feed,
    elsewhere: Option<Arc<Elsewhere>>,
}

fn observe(config: &Config, metrics: &Arc<Metrics>, web: Option<WebPlatform>) -> anyhow::Result<Observers> {
    let (trace, mut trace_rx) = mpsc::unbounded_channel();
    // With several processes, a console shows the rooms the others own
    // too (`console/elsewhere.rs`).
    let elsewhere = match &config.cluster {
        Some(cluster) => Some(
            Elsewhere::start(&config.store, &cluster.about)
                .context("cannot start telling other processes' consoles what happens here")?,
        ),
        None => None,
    };
    let feed = match &elsewhere {
        Some(e) => Feed::shared(e.clone()),
        None => Feed::default(),
    };
    let (counting, showing) = (metrics.clone(), feed.clone());
    let task = tokio::spawn(async move {
        while let Some(event) = trace_rx.recv().await {
            counting.observe(&event);
            showing.observe(&event);
            if let Some(web) = &web {
                web.observe(&event);
            }
        }
    });
    Ok(Observers {
        trace,
        task,
        feed,
        elsewhere,
    })
}

fn start_runtime(
    config: &Config,
    engine: EngineConfig,
    agents: &HashMap<String, Arc<dyn Agent>>,
    store: Store,
    platforms: Vec<Arc<dyn Platform>>,
    trace: mpsc::UnboundedSender<TraceEvent>,
) -> anyhow::Result<Runtime> {
    Ok(Runtime::start(
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
        Some(trace),
    )?)
}

/// What changes the running service: the room policies (the console's
/// layers over the file's) and the reloader (SIGHUP and the console).
fn controls(
    config: &Config,
    layers: crate::live_policies::Layers,
    runtime: &Runtime,
    web: Option<WebPlatform>,
    agents: HashMap<String, Arc<dyn Agent>>,
    platforms: Vec<Arc<PlatformSlot>>,
) -> (Arc<LivePolicies>, SharedReloader) {
    let policies = Arc::new(LivePolicies::new(
        config.clone(),
        layers,
        runtime.handle(),
        web.clone(),
    ));
    let running = crate::reload::Running {
        policies: policies.clone(),
        runtime: runtime.handle(),
        agents,
        web,
        platforms,
    };
    let reloader = Arc::new(tokio::sync::Mutex::new(crate::reload::Reloader::new(
        config, running,
    )));
    (policies, reloader)
}

/// The web room connected to the runtime and listening, with the console
/// on its own listener behind the room's token where `console = true`
/// (`tactful demo`); its address.
async fn serve_web_room(
    config: &Config,
    web: &WebPlatform,
    runtime: &Runtime,
    following: Option<Following>,
    policies: &Arc<LivePolicies>,
    feed: &Feed,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<std::net::SocketAddr> {
    web.connect_runtime(runtime.handle());
    tasks.extend(following.map(Following::start));
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
    tasks.push(server);
    Ok(addr)
}

/// What the last steps share: the config, the running runtime, the live
/// policies and the console's feed.
struct Live<'a> {
    config: &'a Config,
    runtime: &'a Runtime,
    policies: &'a Arc<LivePolicies>,
    feed: &'a Feed,
}

/// The platforms' accounts started: all of them by one process, or, with
/// several, those whose leases this process takes (with the followers of
/// the others' policy changes and console lines).
fn start_accounts(
    live: &Live<'_>,
    connected: &[Arc<PlatformSlot>],
    elsewhere: Option<&Arc<Elsewhere>>,
) -> Vec<JoinHandle<()>> {
    let (config, runtime) = (live.config, live.runtime);
    let mut tasks = Vec::new();
    match config.cluster {
        None => {
            for platform in connected {
                platform.start(runtime.handle());
            }
        }
        Some(_) => {
            tasks.push(crate::live_policies::follow_others(
                live.policies.clone(),
                config.store.clone(),
            ));
            if let Some(e) = elsewhere {
                tasks.push(crate::console::elsewhere::follow(
                    live.feed.clone(),
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
    tasks
}

/// `/healthz`, `/metrics` and the console on `[server] listen`, when set.
async fn serve_server(
    live: &Live<'_>,
    metrics: &Arc<Metrics>,
    reloader: SharedReloader,
) -> anyhow::Result<Option<(std::net::SocketAddr, JoinHandle<()>)>> {
    let (config, runtime) = (live.config, live.runtime);
    let health = runtime.health();
    if let Some(h) = &health {
        metrics.watch_store(h.clone());
    }
    metrics.watch_connections(runtime.connections());
    let Some(listen) = config.server else {
        return Ok(None);
    };
    let store = config.store.is_kept().then(|| config.store.clone());
    let token = config.console_token.clone();
    let (policies, feed) = (live.policies.clone(), live.feed.clone());
    let sharing = config.cluster.is_some();
    let console = move |addr| {
        let console =
            crate::console::Console::new(addr, store, token, policies, feed).with_reloader(reloader);
        // Several processes: the rooms listing says which owns each.
        if sharing { console.with_owners() } else { console }
    };
    Ok(Some(
        serve_metrics(listen, metrics.clone(), health, runtime.connections(), console).await?,
    ))
}
