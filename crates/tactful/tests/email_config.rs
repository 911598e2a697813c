//! `[platforms.email]` and the personas' `email` tables as `tactful
//! check` reads them: every mistake named at its line, no password shown.

#![cfg(feature = "email")]

use std::process::Output;

use crate::common::said;

const GOOD: &str = r#"
[[persona]]
id = "docs"
agent = "a"
email = { address = "docs@example.org", password = "${DOCS_MAIL_PASSWORD}", signature = "Docs" }

[[persona]]
id = "chef"
agent = "a"

[agents.a]
kind = "script"
rules = [{ when = "", reply = "hi" }]

[platforms.email]
imap = { host = "mail.example.org", port = 993, tls = "required" }
smtp = { host = "mail.example.org", port = 465, tls = "required" }
lists = ["dev@lists.example.org"]
"#;

const PASSWORD: &str = "s3cret-mail-pass";

fn check(config: &str) -> Output {
    crate::common::check_config(config, &[("DOCS_MAIL_PASSWORD", PASSWORD)])
}

#[test]
fn a_good_email_config_passes_and_its_password_is_never_shown() {
    let o = check(GOOD);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains("platforms: email"), "{}", said(&o));
    assert!(!said(&o).contains(PASSWORD));
    // STARTTLS on the usual ports, and "none" to this machine.
    let starttls = GOOD
        .replacen(
            "port = 993, tls = \"required\"",
            "port = 143, tls = \"starttls\"",
            1,
        )
        .replacen("port = 465, tls = \"required\"", "tls = \"starttls\"", 1);
    let o = check(&starttls);
    assert!(o.status.success(), "{}", said(&o));
    let local = GOOD.replace(
        "host = \"mail.example.org\", port = 993, tls = \"required\"",
        "host = \"127.0.0.1\", port = 143, tls = \"none\"",
    );
    let local = local.replace(
        "host = \"mail.example.org\", port = 465, tls = \"required\"",
        "host = \"localhost\", port = 587, tls = \"none\"",
    );
    let o = check(&local);
    assert!(o.status.success(), "{}", said(&o));
}

#[test]
fn each_email_mistake_is_named_at_its_line() {
    let cases: [(&str, &str, &str); 8] = [
        (
            r#"address = "docs@example.org""#,
            r#"address = "docs.example.org""#,
            "5:21: `persona[0].email.address` = \"docs.example.org\" is not an address",
        ),
        (
            r#"lists = ["dev@lists.example.org"]"#,
            r#"lists = ["dev"]"#,
            "18:10: `platforms.email.lists` has \"dev\": give a list's posting address",
        ),
        (
            r#"port = 993, tls = "required""#,
            r#"port = 993, tls = "none""#,
            "`platforms.email.imap.tls` = \"none\" sends passwords in the clear: it is allowed only to a loopback address, and the server is \"mail.example.org\"",
        ),
        (
            r#"port = 465, tls = "required""#,
            r#"port = 465, tls = "ssl""#,
            "17:55: `platforms.email.smtp.tls` = \"ssl\": write \"required\" (TLS from the start), \"starttls\" or \"none\"",
        ),
        (
            r#"imap = { host = "mail.example.org""#,
            r#"imap = { host = "imaps://mail.example.org""#,
            "`platforms.email.imap.host` = \"imaps://mail.example.org\" is not a host name",
        ),
        (
            r#"lists = ["#,
            "recheck_minutes = 0\nlists = [",
            "`platforms.email.recheck_minutes` must be at least 1",
        ),
        (r#"lists = ["#, "list = \"x\"\nlists = [", "unknown"),
        (
            r#"lists = ["dev@lists.example.org"]"#,
            r#"lists = ["docs@example.org"]"#,
            "`persona[0].email.address`: docs@example.org is a list in `platforms.email.lists`",
        ),
    ];
    crate::common::each_mistake_is_named(GOOD, &cases, &[("DOCS_MAIL_PASSWORD", PASSWORD)], PASSWORD);
    let twice = GOOD.replacen(
        "[[persona]]\nid = \"chef\"\nagent = \"a\"\n",
        "[[persona]]\nid = \"chef\"\nagent = \"a\"\nemail = { address = \"DOCS@example.org\", password = \"x\" }\n",
        1,
    );
    assert!(said(&check(&twice)).contains("docs@example.org is another persona's mailbox already"));
    let none = GOOD.replacen(
        "email = { address = \"docs@example.org\", password = \"${DOCS_MAIL_PASSWORD}\", signature = \"Docs\" }\n",
        "",
        1,
    );
    assert!(said(&check(&none)).contains("[platforms.email] is set but no persona has a mailbox"));
    let no_password = GOOD.replacen(", password = \"${DOCS_MAIL_PASSWORD}\"", "", 1);
    assert!(said(&check(&no_password)).contains("`persona[0].email` needs `password`"));
    let no_smtp = GOOD.replacen(
        "smtp = { host = \"mail.example.org\", port = 465, tls = \"required\" }\n",
        "",
        1,
    );
    let o = check(&no_smtp);
    assert!(!o.status.success() && said(&o).contains("smtp"), "{}", said(&o));
}
