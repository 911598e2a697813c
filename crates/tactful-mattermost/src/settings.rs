//! The Mattermost section's settings: the server, the channels listened
//! in, and each persona's bot token.

use std::time::Duration;

use tactful_core::PersonaId;

/// One persona's bot account.
#[derive(Clone)]
pub struct MattermostPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot's access token (System Console → Integrations → Bot
    /// Accounts), sent as `Authorization: Bearer`.
    pub token: String,
}

/// A channel as the config names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelRef {
    /// `team/channel`: the names in the channel's address
    /// (`https://chat.example.org/myteam/channels/town-square`).
    Named {
        /// The team's name.
        team: String,
        /// The channel's name.
        channel: String,
    },
    /// A channel id (26 characters).
    Id(String),
}

impl std::fmt::Display for ChannelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelRef::Named { team, channel } => write!(f, "{team}/{channel}"),
            ChannelRef::Id(id) => f.write_str(id),
        }
    }
}

/// `[platforms.mattermost]` and the personas' bots.
#[derive(Clone)]
pub struct MattermostSettings {
    /// The server's address (`https://chat.example.org`); the API is at
    /// `<url>/api/v4`.
    pub url: String,
    /// The channels listened in. Direct and group messages to a bot are
    /// always heard.
    pub channels: Vec<ChannelRef>,
    /// Whether `@channel`/`@all`/`@here` in a person's post address every
    /// persona.
    pub everyone_addresses: bool,
    /// The personas on Mattermost.
    pub personas: Vec<MattermostPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl std::fmt::Debug for MattermostSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MattermostSettings")
            .field("url", &self.url)
            .field("channels", &self.channels)
            .field(
                "personas",
                &self.personas.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
