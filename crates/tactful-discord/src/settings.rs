//! The Discord section's settings: the API's and gateway's addresses, what
//! agents' output may ping, and each persona's bot token.

use super::*;

/// One persona's bot.
#[derive(Clone)]
pub struct DiscordPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot token (the Bot page of the application).
    pub token: String,
}

/// What an agent's output may ping (`allowed_mentions`). Nothing, unless
/// configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pings {
    /// `<@user>` in the output pings the user.
    pub users: bool,
    /// `<@&role>` pings the role.
    pub roles: bool,
    /// `@everyone` and `@here` ping.
    pub everyone: bool,
}

/// `[platforms.discord]` and the personas' bots.
#[derive(Clone)]
pub struct DiscordSettings {
    /// The REST API's base (`https://discord.com`; requests go to
    /// `<base>/api/v10/...`).
    pub api_url: String,
    /// The gateway's URL (`wss://gateway.discord.gg`).
    pub gateway_url: String,
    /// Whether `@everyone`/`@here` in a person's message address every
    /// persona.
    pub everyone_addresses: bool,
    /// What agents' output may ping.
    pub pings: Pings,
    /// The personas on Discord.
    pub personas: Vec<DiscordPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl std::fmt::Debug for DiscordSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("api_url", &self.api_url)
            .field("gateway_url", &self.gateway_url)
            .field(
                "personas",
                &self.personas.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
