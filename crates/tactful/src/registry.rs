//! The chat platforms this build can run: one line each, under its cargo
//! feature. A platform's crate owns everything else about it (its config
//! section, its secrets, how it is built and connected: see
//! [`tactful_runtime::seam`]); the service starts them all the same way
//! ([`tactful_runtime::Connected`]).

use std::sync::Arc;

use anyhow::Context as _;
use tactful_runtime::seam::{Context, Registration};
use tactful_runtime::{Connected, Store};

use crate::config::Config;

/// A registry line: platform `$name` from crate `$krate` when the feature
/// of that name is on; known but refused when it is off.
macro_rules! platform {
    ($list:ident, $name:literal, $krate:ident) => {
        #[cfg(feature = $name)]
        $list.push(Registration::new($name, $krate::config::parse));
        #[cfg(not(feature = $name))]
        $list.push(Registration::missing($name));
    };
}

/// Every platform tactful has besides the built-in web room, built into
/// this binary or not.
// One `push` per line, each under its feature: `vec![]` cannot hold the
// `#[cfg]`s.
#[allow(clippy::vec_init_then_push)]
pub fn platforms() -> Vec<Registration> {
    let mut list = Vec::new();
    platform!(list, "irc", tactful_irc);
    platform!(list, "matrix", tactful_matrix);
    platform!(list, "telegram", tactful_telegram);
    platform!(list, "discord", tactful_discord);
    platform!(list, "slack", tactful_slack);
    platform!(list, "xmpp", tactful_xmpp);
    platform!(list, "email", tactful_email);
    platform!(list, "mattermost", tactful_mattermost);
    platform!(list, "zulip", tactful_zulip);
    list
}

/// Every configured platform but the built-in web room, built and not yet
/// connected, with its `[platforms]` key.
pub fn build(config: &Config, store: &mut Store) -> anyhow::Result<Vec<(&'static str, Arc<dyn Connected>)>> {
    if config.platforms.connected.is_empty() {
        return Ok(Vec::new());
    }
    let saved = store
        .platform_state()
        .context("cannot read the platforms' saved state (sync tokens, offsets) from the store")?;
    build_from(config, &saved, |_| true)
}

/// The platforms `names` of `config`, built again for a config reload,
/// from the state the store holds now (sync tokens, offsets: what was
/// heard since the start is not heard twice).
pub fn build_some(
    config: &Config,
    names: &[String],
) -> anyhow::Result<Vec<(&'static str, Arc<dyn Connected>)>> {
    build_from(config, &saved_now(config)?, |name| {
        names.iter().any(|n| n == name)
    })
}

/// The platforms' state the store holds now (sync tokens, offsets),
/// read afresh: another process may have saved some since the start.
fn saved_now(config: &Config) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    if !config.store.is_kept() {
        return Ok(Default::default());
    }
    Store::open_at(&config.store)
        .and_then(|mut s| s.platform_state())
        .context("cannot read the platforms' saved state (sync tokens, offsets) from the store")
}

/// [`build_some`] from `saved`.
pub fn build_from(
    config: &Config,
    saved: &std::collections::BTreeMap<String, String>,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<(&'static str, Arc<dyn Connected>)>> {
    let local = config.local_files();
    let cx = Context {
        store: local.as_deref(),
        saved,
    };
    config
        .platforms
        .connected
        .iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, p)| {
            p.build(&cx)
                .map(|built| (*name, built))
                .map_err(|e| anyhow::anyhow!("cannot set up {name}: {e}"))
        })
        .collect()
}
