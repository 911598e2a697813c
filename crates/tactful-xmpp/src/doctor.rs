//! `tactful doctor` for XMPP: each account logs in on a stream of its
//! own and joins each room under a nick of the doctor's, then leaves.

use super::*;

use futures::StreamExt;
use tokio_xmpp::Stanza;
use tokio_xmpp::parsers::presence::{Presence, Type as PresenceType};
use tokio_xmpp::stanzastream::{Event, StreamEvent};

use crate::session::{stream, written};
use crate::stanzas;

/// `tactful doctor`: each account logs in, and joins each room under a
/// nick of the doctor's; one probe per account.
pub(crate) async fn probe_all(shared: &Shared) -> Vec<tactful_runtime::Probe> {
    let mut out = Vec::new();
    for persona in &shared.settings.personas {
        let n = shared.settings.rooms.len();
        let what = format!("XMPP {} ({n} room{})", persona.jid, if n == 1 { "" } else { "s" });
        let fix = format!(
            "check persona {}'s xmpp jid and password, platforms.xmpp server, port and tls, and that the rooms exist and let it in",
            persona.id
        );
        let probe = tactful_runtime::Probe::run(what, &fix, probe_one(&shared.settings, persona)).await;
        out.push(probe);
    }
    out
}

async fn probe_one(s: &XmppSettings, persona: &XmppPersona) -> Result<String, String> {
    let mut c = stream(s, persona);
    let result = async {
        loop {
            match c.next().await {
                Some(Event::Stream(StreamEvent::Reset { .. })) => break,
                Some(_) => {}
                None => return Err("the connection closed before the login".to_owned()),
            }
        }
        let nick = format!("{}-doctor", persona.nick);
        for room in &s.rooms {
            let to = room.with_resource_str(&nick).map_err(|e| e.to_string())?;
            let join = Presence::available()
                .with_to(to.clone())
                .with_payloads(vec![stanzas::muc_join(0)]);
            written(c.send(Box::new(join.into())).await).await?;
            loop {
                match c.next().await {
                    Some(Event::Stanza(Stanza::Presence(p)))
                        if p.from.as_ref().is_some_and(|f| f.to_bare() == *room) =>
                    {
                        if p.type_ == PresenceType::Error {
                            let why = stanzas::error_condition(&p.payloads).unwrap_or_default();
                            return Err(format!("{room} refused the join: {why}"));
                        }
                        if stanzas::muc_statuses(&p.payloads).contains(&110) {
                            break;
                        }
                    }
                    Some(_) => {}
                    None => return Err("the connection closed".to_owned()),
                }
            }
            let leave = Presence::unavailable().with_to(to);
            drop(c.send(Box::new(leave.into())).await);
        }
        Ok(format!(
            "logged in as {}, joined {} room{}",
            persona.jid,
            s.rooms.len(),
            if s.rooms.len() == 1 { "" } else { "s" }
        ))
    };
    let r = tokio::time::timeout(tactful_runtime::PROBE_TIMEOUT, result).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), c.close()).await;
    r.unwrap_or_else(|_| {
        Err(format!(
            "not logged in within {} s: a wrong password, an account that does not exist, or no server answering",
            tactful_runtime::PROBE_TIMEOUT.as_secs()
        ))
    })
}
