//! `tactful run`: the live service from a config.
//!
//! Builds the agents, starts the runtime (the engine on real time), serves
//! the configured platforms, and runs until SIGINT or SIGTERM, then shuts
//! down gracefully: no new messages, turns in flight finish within
//! `shutdown_grace_seconds`, decided replies are delivered.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use tactful_agents::Agent;
use tactful_runtime::{DeliveryConfig, Runtime, RuntimeConfig, wall_clock};
use tactful_web::{WebConfig, WebPlatform};

use crate::config::Config;

/// Runs the service until a shutdown signal. `ready` is called with the
/// web room's address once it listens.
pub async fn run(config: &Config, ready: impl FnOnce(std::net::SocketAddr)) -> anyhow::Result<()> {
    let Some(web_settings) = &config.platforms.web else {
        bail!("no platform to serve: add a [platforms.web] table (listen = \"127.0.0.1:7878\")");
    };
    let agents: HashMap<String, Arc<dyn Agent>> = config
        .agents
        .iter()
        .map(|(name, a)| (name.clone(), a.build(&config.contract)))
        .collect();
    let mut engine = config.engine.clone();
    // Ambient jitter only needs to differ between runs and rooms.
    engine.seed = wall_clock().as_millis();
    let personas: Vec<_> = engine
        .personas
        .iter()
        .map(|p| (p.id.clone(), p.name.to_string()))
        .collect();
    let web = WebPlatform::new(
        WebConfig {
            listen: web_settings.listen,
            auth_token: web_settings.auth_token.clone(),
            history: web_settings.history,
            max_message_chars: 4000,
        },
        &personas,
    )?;
    let runtime = Runtime::start(
        RuntimeConfig {
            engine,
            agents,
            delivery: DeliveryConfig {
                edit_interval: config.runtime.edit_interval,
                placeholder: "…".to_owned(),
            },
            shutdown_grace: config.runtime.shutdown_grace,
        },
        Arc::new(web.clone()),
        None,
    )?;
    web.connect_runtime(runtime.handle());
    let (addr, server) = web
        .serve()
        .await
        .with_context(|| format!("cannot listen on {}", web_settings.listen))?;
    ready(addr);
    shutdown_signal().await;
    tracing::info!("shutting down");
    runtime.shutdown().await;
    server.abort();
    Ok(())
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
