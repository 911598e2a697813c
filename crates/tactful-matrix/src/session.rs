//! One persona's session: logging in (a password, or a token checked with
//! `whoami`), and what `tactful doctor` asks of it.

use super::*;

/// Why a persona could not get going; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("the homeserver URL {0:?} is not usable: {1}")]
    Build(String, String),
    #[error("login as {0} failed: {1}")]
    Login(String, String),
    #[error("the access token belongs to {found}, not {want}")]
    WrongUser { want: String, found: String },
    #[error("sync failed: {0}")]
    Sync(String),
}

/// Signs `client` in with an access token (as device `TACTFUL`) and asks
/// the homeserver whose it is: the user id `whoami` gives.
pub(crate) async fn token_whoami(client: &Client, user_id: &str, token: &str) -> Result<String, String> {
    let url = client.homeserver().to_string();
    let user: OwnedUserId = user_id.try_into().map_err(|e| format!("{e}"))?;
    let session = MatrixSession {
        meta: SessionMeta {
            user_id: user,
            device_id: "TACTFUL".into(),
        },
        tokens: SessionTokens {
            access_token: token.to_owned(),
            refresh_token: None,
        },
    };
    client
        .matrix_auth()
        .restore_session(session, Default::default())
        .await
        .map_err(|e| tactful_core::cause::explain(&e, &url))?;
    Ok(client
        .whoami()
        .await
        .map_err(|e| tactful_core::cause::explain(&e, &url))?
        .user_id
        .to_string())
}

impl Shared {
    /// `tactful doctor`'s check of one account, with a client of its own
    /// (no state store: a running service's is left alone). An access
    /// token is checked with `whoami`; a password by logging in as a
    /// device of the doctor's own, logged out again (logging in as the
    /// service's device would end the running service's session).
    pub(crate) async fn probe(&self, persona: &MatrixPersona) -> tactful_runtime::Probe {
        let s = &self.settings;
        let what = format!("Matrix {} ({})", persona.id, persona.user_id);
        let fix = format!(
            "check {}'s access_token or password, and that {} is its homeserver and answers",
            persona.user_id, s.homeserver
        );
        tactful_runtime::Probe::run(what, &fix, async {
            let client = Client::builder()
                .homeserver_url(&s.homeserver)
                .build()
                .await
                .map_err(|e| format!("{}: {e}", s.homeserver))?;
            let found = match &persona.auth {
                MatrixAuth::Password(password) => {
                    let device = format!("TACTFUL_DOCTOR_{}", persona.id.as_str().to_uppercase());
                    let me = client
                        .matrix_auth()
                        .login_username(&persona.user_id, password)
                        .device_id(&device)
                        .initial_device_display_name("tactful doctor")
                        .send()
                        .await
                        .map_err(|e| tactful_core::cause::explain(&e, &s.homeserver))?;
                    let _ = client.matrix_auth().logout().await;
                    me.user_id.to_string()
                }
                MatrixAuth::AccessToken(token) => token_whoami(&client, &persona.user_id, token).await?,
            };
            if found != persona.user_id {
                return Err(format!(
                    "the credentials are {found}'s, not {}'s",
                    persona.user_id
                ));
            }
            Ok(format!("signed in as {found}"))
        })
        .await
    }

    pub(crate) async fn login(&self, persona: &MatrixPersona) -> Result<Client, SessionError> {
        let s = &self.settings;
        // Network failures are retried with backoff (the SDK does not by
        // default): a reply decided while the homeserver restarts is sent
        // when it is back, with the same transaction id, so never twice.
        let retries = matrix_sdk::config::RequestConfig::new()
            .retry_limit(10)
            .max_retry_time(Duration::from_secs(10));
        let mut builder = Client::builder()
            .homeserver_url(&s.homeserver)
            .request_config(retries);
        if let Some(dir) = &s.state_dir {
            let name: String = persona
                .user_id
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            builder = builder.sqlite_store(dir.join(name), None);
        }
        let client = builder
            .build()
            .await
            .map_err(|e| SessionError::Build(s.homeserver.clone(), e.to_string()))?;
        match &persona.auth {
            MatrixAuth::Password(password) => {
                // The same device on every start: no pile of devices on the
                // account.
                let device = format!("TACTFUL_{}", persona.id.as_str().to_uppercase());
                client
                    .matrix_auth()
                    .login_username(&persona.user_id, password)
                    .device_id(&device)
                    .initial_device_display_name(&format!("tactful ({})", persona.id))
                    .send()
                    .await
                    .map_err(|e| SessionError::Login(persona.user_id.clone(), e.to_string()))?;
            }
            MatrixAuth::AccessToken(token) => {
                let me = token_whoami(&client, &persona.user_id, token)
                    .await
                    .map_err(|e| SessionError::Login(persona.user_id.clone(), e))?;
                if me != persona.user_id {
                    return Err(SessionError::WrongUser {
                        want: persona.user_id.clone(),
                        found: me,
                    });
                }
            }
        }
        Ok(client)
    }

    /// The persona's client, waiting a while for its login: replies that
    /// were decided before a restart are sent again at start, before the
    /// accounts have logged in.
    pub(crate) async fn client(&self, persona: &PersonaId) -> Result<Client, PlatformError> {
        tactful_runtime::waiting::until(&self.logged_in, LOGIN_WAIT, || {
            self.clients.lock().ok().and_then(|c| c.get(persona).cloned())
        })
        .await
        .ok_or_else(|| PlatformError(format!("{persona} is not logged in to Matrix right now")))
    }
}
