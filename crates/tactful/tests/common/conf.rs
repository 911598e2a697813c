//! Config fragments the platform suites share, so each suite's config
//! says only what is its platform's.

/// `[agents.<name>]`: the help-desk script the real-server suites (Matrix,
/// XMPP) ask: a `reply_to` answer about resetting and about the wifi, a
/// chosen silence on "never mind", and a greeting otherwise (a reply too
/// when `greeting_replies`).
pub fn help_desk(name: &str, greeting_replies: bool) -> String {
    let to = "[[reply_to:{msg_id}]]\\n";
    let greeting = if greeting_replies { to } else { "" };
    format!(
        r#"[agents.{name}]
kind = "script"
rules = [
  {{ when = "(?i)reset", reply = "{to}Hold the **reset** button for `5 s`." }},
  {{ when = "(?i)wifi", reply = "{to}The wifi password is on the fridge." }},
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "", reply = "{greeting}Happy to help, {{from_name}}." }},
]
"#
    )
}
