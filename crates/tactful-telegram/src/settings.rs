//! The Telegram section's settings: the Bot API's address, and each
//! persona's bot token.

use super::*;

/// One persona's bot.
#[derive(Clone)]
pub struct TelegramPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot token BotFather gave (`123456789:AAE...`).
    pub token: String,
    /// The bot's user id: the number before the token's colon.
    pub bot_id: u64,
}

/// `[platforms.telegram]` and the personas' bots.
#[derive(Clone)]
pub struct TelegramSettings {
    /// The Bot API's base URL (`https://api.telegram.org`, or a
    /// self-hosted `telegram-bot-api`, or a test double).
    pub api_url: String,
    /// The personas on Telegram.
    pub personas: Vec<TelegramPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// How long one `getUpdates` waits for news.
    pub poll_timeout: Duration,
}

impl std::fmt::Debug for TelegramSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("api_url", &self.api_url)
            .field(
                "personas",
                &self
                    .personas
                    .iter()
                    .map(|p| (p.id.as_str(), p.bot_id))
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
