//! `tactful doctor` for email: each persona logs into IMAP (and opens its
//! inbox) and into SMTP submission, each a probe of its own, so the one
//! that failed is named.

use super::*;

/// Two probes per persona: IMAP, then SMTP.
pub(crate) async fn probe_all(shared: &Shared) -> Vec<tactful_runtime::Probe> {
    let s = &shared.settings;
    let mut out = Vec::new();
    for persona in &s.personas {
        let fix = format!(
            "check persona {}'s email username and password, and platforms.email.imap host, port and tls",
            persona.id
        );
        out.push(
            tactful_runtime::Probe::run(format!("IMAP {} at {}", persona.address, s.imap), &fix, async {
                let mut session = imap::login(&s.imap, persona).await?;
                let inbox = session
                    .examine("INBOX")
                    .await
                    .map_err(|e| format!("logged in, but INBOX could not be opened: {e}"))?;
                let caps = session.capabilities().await.map_err(|e| e.to_string())?;
                let _ = session.logout().await;
                let idle = if caps.has_str("IDLE") {
                    "IDLE"
                } else {
                    "no IDLE: new mail is seen at recheck_minutes"
                };
                Ok::<_, String>(format!("{} mails in INBOX, {idle}", inbox.exists))
            })
            .await,
        );
        let fix = format!(
            "check persona {}'s email username and password, and platforms.email.smtp host, port and tls (465: \"required\", 587: \"starttls\")",
            persona.id
        );
        out.push(
            tactful_runtime::Probe::run(format!("SMTP {} at {}", persona.address, s.smtp), &fix, async {
                let t = send::transport(&s.smtp, persona)?;
                match t.test_connection().await {
                    Ok(true) => Ok("logged in".to_owned()),
                    Ok(false) => Err("the server did not answer NOOP".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            })
            .await,
        );
    }
    out
}
