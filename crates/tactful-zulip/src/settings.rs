//! The Zulip section's settings: the organisation's address, the streams
//! listened in, and each persona's bot.

use std::time::Duration;

use tactful_core::PersonaId;

/// One persona's bot.
#[derive(Clone)]
pub struct ZulipPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot's email (its login, as *Personal settings → Bots* shows).
    pub email: String,
    /// The bot's API key.
    pub api_key: String,
}

/// `[platforms.zulip]` and the personas' bots.
#[derive(Clone)]
pub struct ZulipSettings {
    /// The organisation's address (`https://chat.example.org`); the API is
    /// at `<site>/api/v1`.
    pub site: String,
    /// The streams listened in, by name. Direct messages to a bot are
    /// always heard.
    pub streams: Vec<String>,
    /// Whether `@**all**`, `@**everyone**`, `@**channel**`, `@**stream**`
    /// and `@**topic**` in a person's message address every persona.
    pub everyone_addresses: bool,
    /// The personas on Zulip.
    pub personas: Vec<ZulipPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl std::fmt::Debug for ZulipSettings {
    // API keys never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZulipSettings")
            .field("site", &self.site)
            .field("streams", &self.streams)
            .field(
                "personas",
                &self.personas.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
