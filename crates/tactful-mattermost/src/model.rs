//! The parts of Mattermost's REST and WebSocket payloads tactful reads,
//! as the API reference describes them. Every field has a default, so a
//! server that leaves one out (an older version, a plugin's post) is read
//! rather than refused; what tactful needs and cannot default is checked
//! where it is used.

use serde::Deserialize;

/// A user (`GET /users/me`, `GET /users/{id}`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct User {
    /// The user's id.
    pub id: String,
    /// The name mentions use (`@docs-bot`), lower case.
    pub username: String,
    /// Set on bot accounts.
    pub is_bot: bool,
}

/// A channel (`GET /channels/{id}`, `GET /teams/name/{t}/channels/name/{c}`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Channel {
    /// The channel's id.
    pub id: String,
    /// Its team's id (empty for direct and group messages).
    pub team_id: String,
    /// `O` open, `P` private, `D` direct, `G` group message.
    #[serde(rename = "type")]
    pub kind: String,
    /// The channel's name (for a direct channel, the two user ids).
    pub name: String,
    /// When its last post was made, in milliseconds.
    pub last_post_at: u64,
}

/// A team (`GET /users/me/teams`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Team {
    /// The team's id.
    pub id: String,
    /// Its name, as in addresses.
    pub name: String,
}

/// A post.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Post {
    /// The post's id.
    pub id: String,
    /// When it was made, in milliseconds since the epoch.
    pub create_at: u64,
    /// When it was deleted; 0 if it was not.
    pub delete_at: u64,
    /// Its author.
    pub user_id: String,
    /// Where.
    pub channel_id: String,
    /// The thread's first post, empty for a post that starts no thread.
    pub root_id: String,
    /// The Markdown text.
    pub message: String,
    /// Empty for what people write; `system_join_channel` and the like
    /// for what the server writes.
    #[serde(rename = "type")]
    pub kind: String,
    /// Free-form properties: `from_bot`, `from_webhook`,
    /// `override_username`.
    pub props: serde_json::Map<String, serde_json::Value>,
    /// Files attached.
    pub file_ids: Option<Vec<String>>,
}

impl Post {
    /// Whether a bot or an integration wrote it (a bot account's posts
    /// carry `from_bot`, a webhook's `from_webhook`).
    pub fn from_bot(&self) -> bool {
        let set = |key: &str| match self.props.get(key) {
            Some(serde_json::Value::String(s)) => s == "true",
            Some(serde_json::Value::Bool(b)) => *b,
            _ => false,
        };
        set("from_bot") || set("from_webhook")
    }

    /// The name an integration posted under, if it set one.
    pub fn override_username(&self) -> Option<&str> {
        self.props
            .get("override_username")
            .and_then(|v| v.as_str())
            .filter(|s| !s.trim().is_empty())
    }
}

/// A page of posts (`GET /channels/{id}/posts`, `GET /posts/{id}/thread`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PostList {
    /// The posts' ids, newest first.
    pub order: Vec<String>,
    /// The posts by id.
    pub posts: std::collections::HashMap<String, Post>,
}

/// What the WebSocket sends: an event, or the answer to a request.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Frame {
    /// The event's name (`hello`, `posted`...), empty on an answer.
    pub event: String,
    /// The event's fields.
    pub data: serde_json::Map<String, serde_json::Value>,
    /// Who the event was sent to (`channel_id`, `user_id`...).
    pub broadcast: serde_json::Map<String, serde_json::Value>,
    /// The event's place in the connection's stream, from 0 (`hello`).
    pub seq: Option<u64>,
    /// On an answer to a request: the request it answers (tactful sends
    /// none; an answer that comes is skipped).
    pub seq_reply: Option<u64>,
}

impl Frame {
    /// A string field of the event's data.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(|v| v.as_str())
    }
}

/// An error as the API describes it (`AppError`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ApiErrorBody {
    /// A stable id (`api.context.session_expired.app_error`).
    pub id: String,
    /// What went wrong, for people.
    pub message: String,
}

/// `GET /config/client?format=old`: the settings clients may read, every
/// value a string.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClientConfig {
    /// The longest post the server takes, in characters (`"16383"`).
    #[serde(rename = "MaxPostSize")]
    pub max_post_size: String,
}
