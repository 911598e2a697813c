//! Values as PostgreSQL takes them, owned, and a message's row: shared by
//! the writer and the cluster's inbox, which stores messages as the writer
//! does.

use bytes::BytesMut;
use tactful_core::{Message, MsgId, PersonaId, ThreadId};
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::ops::mentions_json;

/// A parameter, owned: a batch's statements are all queued before any is
/// sent, so their values outlive the code that made them.
#[derive(Debug)]
pub(crate) enum Value {
    Text(String),
    Int(i64),
    Bool(bool),
    Null,
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Text(s) => s.to_sql(ty, out),
            Value::Int(n) => n.to_sql(ty, out),
            Value::Bool(b) => b.to_sql(ty, out),
            Value::Null => Ok(IsNull::Yes),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty) || <i64 as ToSql>::accepts(ty) || <bool as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// What can be a [`Value`]; `vals!` takes each argument by reference.
pub(crate) trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for &str {
    fn to_value(&self) -> Value {
        Value::Text((*self).to_owned())
    }
}
impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl ToValue for &String {
    fn to_value(&self) -> Value {
        Value::Text((*self).clone())
    }
}
impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
}
impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}
impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

/// The parameters of one statement, each taken by reference (exported to
/// the modules declared after this one: `#[macro_use]` in `postgres.rs`).
macro_rules! vals {
    ($($e:expr),* $(,)?) => {
        vec![$(ToValue::to_value(&$e)),*]
    };
}

/// The columns a message is written with (`messages`, `inbox`), in the
/// order of [`MessageRow::values`].
pub(crate) const MESSAGE_INSERT_COLUMNS: &str = "room, id, sender_id, sender_name, is_bot, persona, text, \
     reply_to, thread, mentions, is_dm, dm_to, time, sender_handle";

/// Their placeholders.
pub(crate) const MESSAGE_VALUES: &str = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14";

/// A message as the values of [`MESSAGE_INSERT_COLUMNS`].
pub(crate) struct MessageRow<'a> {
    text: [&'a str; 5],
    opt: [Option<&'a str>; 5],
    flags: [bool; 2],
    mentions: Option<String>,
    time: i64,
}

impl<'a> MessageRow<'a> {
    pub(crate) fn new(m: &'a Message, persona: Option<&'a PersonaId>) -> Self {
        MessageRow {
            text: [
                m.room.as_str(),
                m.id.as_str(),
                m.sender.id.as_str(),
                &m.sender.name,
                &m.text,
            ],
            opt: [
                persona.map(PersonaId::as_str),
                m.reply_to.as_ref().map(MsgId::as_str),
                m.thread.as_ref().map(ThreadId::as_str),
                m.dm_to.as_ref().map(PersonaId::as_str),
                m.sender.handle.as_deref(),
            ],
            flags: [m.sender.is_bot, m.is_dm],
            mentions: mentions_json(m),
            time: m.time.as_millis() as i64,
        }
    }

    /// The values, in the order of [`MESSAGE_INSERT_COLUMNS`].
    pub(crate) fn values(&self) -> Vec<Value> {
        vals![
            self.text[0],
            self.text[1],
            self.text[2],
            self.text[3],
            self.flags[0],
            self.opt[0],
            self.text[4],
            self.opt[1],
            self.opt[2],
            self.mentions,
            self.flags[1],
            self.opt[3],
            self.time,
            self.opt[4],
        ]
    }
}
