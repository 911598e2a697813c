//! The platform seam: everything a chat platform crate hands the binary,
//! so that adding a platform is its crate plus one registry line.
//!
//! A platform crate
//! - reads its own `[platforms.<name>]` table and each persona's
//!   `<name> = { ... }` sub-table ([`Configure`], with the line-accurate
//!   errors of [`tactful_config`]);
//! - names its secrets for redaction ([`PlatformConfig::secrets`]);
//! - builds its [`Connected`] platform from what the service has for it
//!   ([`Context`]: the store's saved platform state, where the store
//!   lives), which the service then starts like every other;
//! - reuses [`crate::account::Backoff`] for reconnecting.
//!
//! The binary lists the platforms it was built with, each under its cargo
//! feature, and knows nothing else about them.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tactful_config::{Checker, ConfigError, PersonaPart, Section};

use crate::platform::Connected;

/// What the service gives a platform to build it.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The store's file, `None` for an in-memory store: a platform may keep
    /// state of its own beside it (Matrix keeps its SDK's room state).
    pub store: Option<&'a Path>,
    /// The platform state the store holds (sync tokens, update offsets),
    /// saved with [`crate::RuntimeHandle::save_state`].
    pub saved: &'a BTreeMap<String, String>,
}

/// A platform's settings, read from the config by its own crate.
pub trait PlatformConfig: std::fmt::Debug + Send + Sync + Any {
    /// The values to keep out of every log, error and trace (tokens,
    /// passwords).
    fn secrets(&self) -> Vec<String>;

    /// The personas with an account here, in config order: what
    /// processes sharing a store lease one by one.
    fn personas(&self) -> Vec<tactful_core::PersonaId>;

    /// Builds the platform, not yet connected. Without waiting on the
    /// network or a lock (it may spawn tasks or bind a local socket, as
    /// Discord's gateway does): processes sharing a store build
    /// a platform as its accounts' leases come, under the lock the
    /// watchdog that lets connections go needs too (`cluster/hold.rs`);
    /// what connects belongs in [`Connected::start`]'s tasks.
    fn build(&self, cx: &Context<'_>) -> Result<Arc<dyn Connected>, String>;

    /// What `tactful check` should warn about in how the rooms are set up
    /// for this platform (a setting it cannot honour), one line each; the
    /// config still loads.
    fn warnings(&self, _policies: &tactful_core::PolicyTable) -> Vec<String> {
        Vec::new()
    }

    /// Keys this platform gives some of its rooms unless their own
    /// `[rooms."<id>"]` table sets them (above `[rooms.default]`): email
    /// gives each list a stricter rate limit, since every answer reaches
    /// every subscriber's inbox.
    fn room_defaults(&self) -> Vec<(tactful_core::RoomId, tactful_core::PolicyPatch)> {
        Vec::new()
    }
}

/// Reads a platform's section and the personas' sub-tables for it (every
/// persona is listed, in config order, with its sub-table if it has one).
/// Called inside [`tactful_config::with_env`].
pub type Configure = Box<
    dyn Fn(Section<'_>, Vec<PersonaPart<'_>>, &Checker<'_>) -> Result<Arc<dyn PlatformConfig>, ConfigError>
        + Send
        + Sync,
>;

/// One line of the binary's platform registry.
pub struct Registration {
    /// The table name: `[platforms.<name>]`, `persona.<name>`, and the
    /// cargo feature that builds it.
    pub name: &'static str,
    /// How to read it, `None` when this binary was built without it (its
    /// tables are then refused with a clear error rather than ignored).
    pub configure: Option<Configure>,
}

impl Registration {
    /// Platform `name`, read by its crate's `parse` into its settings type.
    pub fn new<T, F>(name: &'static str, parse: F) -> Registration
    where
        T: PlatformConfig,
        F: Fn(Section<'_>, Vec<PersonaPart<'_>>, &Checker<'_>) -> Result<T, ConfigError>
            + Send
            + Sync
            + 'static,
    {
        Registration {
            name,
            configure: Some(Box::new(move |section, personas, check| {
                Ok(Arc::new(parse(section, personas, check)?) as Arc<dyn PlatformConfig>)
            })),
        }
    }

    /// Platform `name`, known but left out of this build.
    pub fn missing(name: &'static str) -> Registration {
        Registration {
            name,
            configure: None,
        }
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("built", &self.configure.is_some())
            .finish()
    }
}
