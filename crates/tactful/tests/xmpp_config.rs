//! `[platforms.xmpp]` and the personas' `xmpp` tables as `tactful check`
//! reads them: every mistake named at its line, no password shown.

#![cfg(feature = "xmpp")]

use std::process::Output;

const GOOD: &str = r#"
[[persona]]
id = "docs"
agent = "a"
xmpp = { jid = "docs@example.org", password = "${DOCS_XMPP_PASSWORD}", nick = "Docs" }

[[persona]]
id = "chef"
agent = "a"

[agents.a]
kind = "script"
rules = [{ when = "", reply = "hi" }]

[platforms.xmpp]
rooms = ["team@conference.example.org"]
"#;

const PASSWORD: &str = "s3cret-xmpp-pass";

fn check(config: &str) -> Output {
    crate::common::check_config(config, &[("DOCS_XMPP_PASSWORD", PASSWORD)])
}

use crate::common::said;

#[test]
fn a_good_xmpp_config_passes_and_its_password_is_never_shown() {
    let o = check(GOOD);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains("platforms: xmpp"), "{}", said(&o));
    assert!(!said(&o).contains(PASSWORD));
}

#[test]
fn each_xmpp_mistake_is_named_at_its_line() {
    let cases: [(&str, &str, &str); 8] = [
        (
            r#"jid = "docs@example.org""#,
            r#"jid = "docs.example.org""#,
            "5:16: `persona[0].xmpp.jid` = \"docs.example.org\" is not an account's JID",
        ),
        (
            r#"jid = "docs@example.org""#,
            r#"jid = "docs@example.org/phone""#,
            "is not an account's JID: write it like \"docs@example.org\" (no /resource)",
        ),
        (
            r#"rooms = ["team@conference.example.org"]"#,
            r#"rooms = ["conference.example.org"]"#,
            "16:10: `platforms.xmpp.rooms` has \"conference.example.org\": give a room's JID",
        ),
        (
            r#"rooms = ["#,
            "tls = \"none\"\nrooms = [",
            "16:7: `platforms.xmpp.tls` = \"none\" sends passwords in the clear: it is allowed only to a loopback address, and the server is \"example.org\"",
        ),
        (
            r#"rooms = ["#,
            "tls = \"starttls\"\nrooms = [",
            "`platforms.xmpp.tls` = \"starttls\": write \"required\" (STARTTLS) or \"none\"",
        ),
        (
            r#"rooms = ["#,
            "nick_retry_seconds = 0\nrooms = [",
            "`platforms.xmpp.nick_retry_seconds` must be at least 1",
        ),
        (r#"rooms = ["#, "room = \"x\"\nrooms = [", "unknown"),
        (
            r#", nick = "Docs""#,
            r#", nick = """#,
            "`persona[0].xmpp.nick` = \"\": a nick is 1 to 64 characters",
        ),
    ];
    crate::common::each_mistake_is_named(GOOD, &cases, &[("DOCS_XMPP_PASSWORD", PASSWORD)], PASSWORD);
    // The same account twice, and none at all.
    let twice = GOOD.replacen(
        "[[persona]]\nid = \"chef\"\nagent = \"a\"\n",
        "[[persona]]\nid = \"chef\"\nagent = \"a\"\nxmpp = { jid = \"docs@example.org\", password = \"x\" }\n",
        1,
    );
    assert!(said(&check(&twice)).contains("docs@example.org is another persona's account already"));
    let none = GOOD.replacen(
        "xmpp = { jid = \"docs@example.org\", password = \"${DOCS_XMPP_PASSWORD}\", nick = \"Docs\" }\n",
        "",
        1,
    );
    assert!(said(&check(&none)).contains("[platforms.xmpp] is set but no persona has an account"));
    // tls = "none" to this machine is fine.
    let local = GOOD.replacen(
        "rooms = [",
        "tls = \"none\"\nserver = \"127.0.0.1\"\nrooms = [",
        1,
    );
    let o = check(&local);
    assert!(o.status.success(), "{}", said(&o));
}
