//! `[platforms.matrix]` and each persona's `matrix = { user_id, password |
//! access_token }`: read and checked here, with errors that name the line
//! like every config error. Personas without a `matrix` table are not on
//! Matrix.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};

use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{MatrixAuth, MatrixPersona, MatrixSettings};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    homeserver: Spanned<EnvString>,
    #[serde(default)]
    invites_from: Vec<EnvString>,
    #[serde(default)]
    rooms: Vec<Spanned<EnvString>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaMatrix {
    user_id: Spanned<EnvString>,
    password: Option<EnvString>,
    access_token: Option<EnvString>,
}

/// Reads `[platforms.matrix]` and the personas' `matrix` sub-tables; call
/// inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<MatrixSettings, ConfigError> {
    let m: RawMatrix = read(section, check)?;
    let homeserver = m.homeserver.get_ref().0.trim().trim_end_matches('/').to_owned();
    if !(homeserver.starts_with("https://") || homeserver.starts_with("http://")) || homeserver.len() < 9 {
        return Err(check.at(
            m.homeserver.span(),
            format!("`platforms.matrix.homeserver` = {homeserver:?} must be the homeserver's URL, like \"https://matrix.example.org\""),
        ));
    }
    let mut rooms = Vec::new();
    for r in &m.rooms {
        let room = r.get_ref().0.trim();
        if !(room.starts_with('!') || room.starts_with('#')) || room.len() < 2 {
            return Err(check.at(
                r.span(),
                format!("`platforms.matrix.rooms` has {room:?}: give a room id (!abc...) or an alias (#room:server)"),
            ));
        }
        rooms.push(room.to_owned());
    }
    let mut out: Vec<MatrixPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let pm: RawPersonaMatrix = read(section, check)?;
        let user_id = pm.user_id.get_ref().0.trim().to_owned();
        let valid = user_id
            .strip_prefix('@')
            .and_then(|r| r.split_once(':'))
            .is_some_and(|(local, server)| !local.is_empty() && !server.is_empty());
        if !valid {
            return Err(check.at(
                pm.user_id.span(),
                format!("`persona[{i}].matrix.user_id` = {user_id:?} is not a Matrix user id: write it in full, like \"@bot:example.org\""),
            ));
        }
        if out.iter().any(|o| o.user_id == user_id) {
            return Err(check.at(
                pm.user_id.span(),
                format!("`persona[{i}].matrix.user_id`: {user_id} is another persona's account already; each persona needs its own"),
            ));
        }
        let secret = |s: &Option<EnvString>| s.as_ref().map(|v| v.0.clone()).filter(|v| !v.is_empty());
        let auth = match (secret(&pm.password), secret(&pm.access_token)) {
            (Some(pw), None) => MatrixAuth::Password(pw),
            (None, Some(token)) => MatrixAuth::AccessToken(token),
            (Some(_), Some(_)) => {
                return Err(check.at(
                    pm.user_id.span(),
                    format!("`persona[{i}].matrix` has both `password` and `access_token`: keep one"),
                ));
            }
            (None, None) => {
                return Err(check.at(
                    pm.user_id.span(),
                    format!("`persona[{i}].matrix` needs `password` or `access_token` (from the environment: \"${{VAR}}\")"),
                ));
            }
        };
        out.push(MatrixPersona {
            id: p.id.get_ref().as_str().into(),
            user_id,
            auth,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            m.homeserver.span(),
            "[platforms.matrix] is set but no persona has an account: add `matrix = { user_id = \"@bot:example.org\", password = \"${BOT_PASSWORD}\" }` to a persona",
        ));
    }
    Ok(MatrixSettings {
        homeserver,
        invites_from: m
            .invites_from
            .into_iter()
            .map(|v| v.0.trim().to_owned())
            .collect(),
        rooms,
        personas: out,
        state_dir: None,
        max_backoff: Duration::from_secs(60),
        sync_timeout: Duration::from_secs(30),
    })
}

/// The start banner's line for these settings.
pub fn describe(s: &MatrixSettings, users: &[String]) -> String {
    format!("on Matrix at {} as {}", s.homeserver, users.join(", "))
}

/// The settings' secrets (passwords and access tokens), for redaction.
pub fn secrets(s: &MatrixSettings) -> Vec<String> {
    s.personas
        .iter()
        .map(|p| match &p.auth {
            MatrixAuth::Password(v) | MatrixAuth::AccessToken(v) => v.clone(),
        })
        .collect()
}

impl PlatformConfig for MatrixSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        let mut settings = self.clone();
        // The SDK's room state lives beside the store, so a restart syncs
        // only what changed.
        settings.state_dir = cx.store.map(|s| s.with_extension("matrix"));
        Ok(std::sync::Arc::new(crate::MatrixPlatform::new(
            settings, cx.saved,
        )))
    }
}
