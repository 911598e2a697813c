//! The chat platforms this build can run, one entry each under its cargo
//! feature: how each is built from its settings (read by its own crate,
//! see `config/platforms.rs`) and the store's state. The service then
//! starts them all the same way ([`tactful_runtime::Connected`]).

use std::sync::Arc;

#[allow(unused_imports)]
use anyhow::Context as _;
use tactful_runtime::{Connected, Store};

use crate::config::Config;

/// Every configured platform but the built-in web room, built and not yet
/// connected.
#[allow(unused_variables, unused_mut)]
pub fn build(config: &Config, store: &Store) -> anyhow::Result<Vec<Arc<dyn Connected>>> {
    let mut out: Vec<Arc<dyn Connected>> = Vec::new();
    #[cfg(feature = "irc")]
    if let Some(settings) = &config.platforms.irc {
        out.push(Arc::new(tactful_irc::IrcPlatform::new(settings.clone())));
    }
    #[cfg(feature = "matrix")]
    if let Some(settings) = &config.platforms.matrix {
        let mut settings = settings.clone();
        // The SDK's room state lives beside the store, so a restart syncs
        // only what changed.
        if config.store.as_os_str() != ":memory:" {
            settings.state_dir = Some(config.store.with_extension("matrix"));
        }
        let saved = store
            .platform_state()
            .context("cannot read the Matrix sync tokens from the store")?;
        out.push(Arc::new(tactful_matrix::MatrixPlatform::new(settings, &saved)));
    }
    Ok(out)
}
