//! Identifiers shared by every layer.
//!
//! Ids are reference-counted strings: the engine copies them into decisions,
//! transcripts and turn requests many times per message, and an `Arc<str>`
//! clone is a counter bump instead of an allocation. Newtypes keep a room id
//! from being passed where a message id is expected.

use std::fmt;
use std::sync::Arc;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a string as this kind of id.
            pub fn new(s: impl Into<Arc<str>>) -> Self {
                Self(s.into())
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// A message id as the platform knows it (or `<persona>:<n>` for a reply
    /// the engine decided before the platform assigned one).
    MsgId
);
id_type!(
    /// A room (channel, group, DM) id as the platform knows it.
    RoomId
);
id_type!(
    /// A user account id as the platform knows it: humans, foreign bots and
    /// the accounts personas speak through.
    UserId
);
id_type!(
    /// A persona's id from the config; also its default `@handle`.
    PersonaId
);
id_type!(
    /// A thread inside a room, when the platform has them.
    ThreadId
);

/// Identifies one agent turn for as long as it is in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct TurnId(pub u64);

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}
