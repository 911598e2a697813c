//! Rooms joined: the configured ones at start, and invitations, taken only
//! from the people and servers `invites_from` names.

use super::*;

/// Whether `inviter` is in `invites_from` (a user id, or its server).
pub fn invited_by_allowed(invites_from: &[String], inviter: &str) -> bool {
    let server = inviter.split_once(':').map(|(_, s)| s);
    invites_from.iter().any(|allowed| {
        let allowed = allowed.trim();
        allowed == inviter || Some(allowed.trim_start_matches(':')) == server
    })
}

impl Shared {
    /// Joins `rooms` (ids or aliases); failures are logged, not fatal.
    pub(crate) async fn join_configured(&self, persona: &MatrixPersona, client: &Client) {
        for r in &self.settings.rooms {
            let Ok(id) = <&RoomOrAliasId>::try_from(r.as_str()) else {
                tracing::warn!(persona = %persona.id, room = %r, "Matrix: not a room id or alias");
                continue;
            };
            if let Err(e) = client.join_room_by_id_or_alias(id, &[]).await {
                tracing::warn!(persona = %persona.id, room = %r, "Matrix: cannot join: {e}");
            }
        }
    }

    /// Accepts an invite from an allowed inviter or to a configured room.
    pub(crate) async fn consider_invite(&self, persona: &MatrixPersona, room: Room) {
        if room.state() != RoomState::Invited {
            return;
        }
        let inviter = match room.invite_details().await {
            Ok(invite) => invite.inviter_id.to_string(),
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: cannot read an invite: {e}");
                return;
            }
        };
        let room_ok =
            self.settings.rooms.iter().any(|r| {
                r == room.room_id().as_str() || room.canonical_alias().is_some_and(|a| a.as_str() == r)
            });
        if !(room_ok || invited_by_allowed(&self.settings.invites_from, &inviter)) {
            tracing::info!(persona = %persona.id, room = %room.room_id(), %inviter, "Matrix: ignored an invite (not in platforms.matrix.invites_from)");
            return;
        }
        match room.join().await {
            Ok(()) => {
                tracing::info!(persona = %persona.id, room = %room.room_id(), %inviter, "Matrix: joined on invite")
            }
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: cannot join: {e}")
            }
        }
    }
}
