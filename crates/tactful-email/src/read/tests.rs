use super::*;

const LISTS: &[&str] = &["dev@lists.example.org"];

fn lists() -> Vec<String> {
    LISTS.iter().map(|s| (*s).to_owned()).collect()
}

fn mail(headers: &str, body: &str) -> Mail {
    let raw = format!("{}\r\n\r\n{body}", headers.trim().replace('\n', "\r\n"));
    read(raw.as_bytes(), &lists()).expect("a mail")
}

#[test]
fn a_list_post_is_read_with_its_list_thread_and_sender() {
    let m = mail(
        "From: Alice Example <Alice@Example.org>\nTo: dev@lists.example.org\nCc: docs@example.org\n\
         Subject: Re: [dev] Build fails\nMessage-ID: <b2@example.org>\nIn-Reply-To: <a1@example.org>\n\
         References: <a0@example.org> <a1@example.org>\nList-Id: Dev <dev.lists.example.org>\n\
         List-Post: <mailto:dev@lists.example.org>\nDate: Sun, 29 Nov 2026 20:33:20 +0000",
        "Docs, which flag?\n\nOn Sun, Bob wrote:\n> it fails\n> badly\n",
    );
    assert_eq!(m.id.as_deref(), Some("b2@example.org"));
    assert_eq!(m.from.as_deref(), Some("alice@example.org"));
    assert_eq!(m.from_name, "Alice Example");
    assert_eq!(m.recipients, ["dev@lists.example.org", "docs@example.org"]);
    assert_eq!(m.list.as_deref(), Some("dev@lists.example.org"));
    assert_eq!(m.in_reply_to.as_deref(), Some("a1@example.org"));
    assert_eq!(m.references, ["a0@example.org", "a1@example.org"]);
    assert_eq!(m.base_subject, "build fails");
    assert_eq!(
        m.text, "Docs, which flag?",
        "the quoted mail at the end is dropped"
    );
    assert_eq!(m.automatic, None);
    assert_eq!(m.date, Some(Timestamp::from_millis(1_795_984_400_000)));
}

#[test]
fn a_list_is_known_by_list_id_alone_and_another_list_is_not_ours() {
    let m = mail(
        "From: a@example.org\nTo: x@example.org\nList-Id: <dev.lists.example.org>",
        "hi",
    );
    assert_eq!(m.list.as_deref(), Some("dev@lists.example.org"));
    let m = mail(
        "From: a@example.org\nTo: dev@lists.example.org\nList-Post: <mailto:ops@lists.example.org>",
        "hi",
    );
    assert_eq!(
        (m.list, m.other_list.as_deref()),
        (None, Some("ops@lists.example.org"))
    );
    let m = mail("From: a@example.org\nTo: Dev List <dev@lists.example.org>", "hi");
    assert_eq!(
        m.list.as_deref(),
        Some("dev@lists.example.org"),
        "by the recipients at last"
    );
}

#[test]
fn mail_written_by_machines_is_recognised() {
    let cases = [
        ("Auto-Submitted: auto-replied", "Auto-Submitted"),
        ("Auto-Submitted: auto-generated; type=x", "Auto-Submitted"),
        ("Precedence: bulk", "Precedence: bulk"),
        ("Precedence: junk", "Precedence: bulk"),
        ("Return-Path: <>", "a bounce (null return path)"),
        ("X-Autoreply: yes", "an out-of-office reply"),
    ];
    for (header, why) in cases {
        let m = mail(
            &format!("From: a@example.org\nTo: docs@example.org\nSubject: hi\n{header}"),
            "body",
        );
        assert_eq!(m.automatic, Some(why), "{header}");
    }
    let m = mail("From: MAILER-DAEMON@example.org\nTo: docs@example.org", "x");
    assert!(m.automatic.is_some());
    let m = mail(
        "From: a@example.org\nTo: docs@example.org\nSubject: Out of Office: back Monday",
        "x",
    );
    assert_eq!(m.automatic, Some("an out-of-office reply"));
    let m = mail(
        "From: a@example.org\nTo: docs@example.org\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"b\"",
        "--b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--b--\r\n",
    );
    assert_eq!(m.automatic, Some("a delivery report"));
    let m = mail(
        "From: a@example.org\nTo: docs@example.org\nSubject: Absence policy?",
        "x",
    );
    assert_eq!(m.automatic, None, "a person asking about absences");
    let m = mail(
        "From: a@example.org\nTo: docs@example.org\nAuto-Submitted: no\nPrecedence: list",
        "x",
    );
    assert_eq!(m.automatic, None, "`no` and `list` are people's mail");
}

#[test]
fn a_subject_folded_into_two_headers_stays_one_line() {
    // An encoded CR LF in the subject decodes to a line break: it must
    // never become a second header when tactful writes `Re: …`.
    let m = mail(
        "From: a@example.org\nTo: docs@example.org\nSubject: =?utf-8?q?hi=0D=0ABcc=3A_x=40evil=2Eexample?=",
        "x",
    );
    assert!(!m.subject.contains(['\r', '\n']), "{:?}", m.subject);
    assert_eq!(m.subject, "hi Bcc: x@evil.example");
}

#[test]
fn broken_mail_is_read_as_far_as_it_goes() {
    for raw in [
        &b"From: a@example.org\r\nContent-Type: multipart/mixed; boundary=\"nope\"\r\n\r\n--nope\r\nContent-Type: text/plain; charset=x-unknown-charset\r\n\r\nhello \xff\xfe"[..],
        b"\xff\xfe\x00\x00garbage",
        b"Subject: =?bogus?Q?=ZZ?=\r\n\r\nbody",
        b"",
    ] {
        if let Some(m) = read(raw, &lists()) {
            assert!(!m.subject.contains('\n'));
            assert!(m.text.chars().count() <= MAX_TEXT_CHARS + 1);
        }
    }
    let m = read(
        b"From: a@example.org\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\ncaf\xe9",
        &lists(),
    )
    .expect("a mail");
    assert_eq!(m.text, "café", "a legacy charset decodes");
}

#[test]
fn a_long_body_is_cut_and_ids_are_cleaned() {
    let long = "word ".repeat(10_000);
    let m = mail("From: a@example.org\nMessage-ID: < weird id\t@x.org >", &long);
    assert!(m.text.chars().count() <= MAX_TEXT_CHARS + 1);
    assert_eq!(clean_id("<a@b>"), "a@b");
    assert_eq!(clean_id(&format!("<{}@x>", "a".repeat(400))).len(), 250);
}

#[test]
fn the_signature_and_the_quote_at_the_end_are_not_new_text() {
    assert_eq!(new_text("Thanks!\n-- \nAlice\nExample Corp"), "Thanks!");
    assert_eq!(
        new_text("> what about x?\nIt works.\n> and y?\nAlso.\n\nOn Mon, Bob wrote:\n> old\n"),
        "> what about x?\nIt works.\n> and y?\nAlso.",
        "answers between quotes stay"
    );
}

#[test]
fn a_name_opening_the_body_addresses_it() {
    let names = ["Docs", "Chef", "Docs Bot"];
    assert_eq!(opened_with("Hi Docs,\nhow do I build?", &names), Some("Docs"));
    assert_eq!(opened_with("\n\nDocs: how?", &names), Some("Docs"));
    assert_eq!(opened_with("dear docs bot, hello", &names), Some("Docs Bot"));
    assert_eq!(opened_with("Hello Chef!", &names), Some("Chef"));
    assert_eq!(
        opened_with("Hi all,\nDocs: said", &names),
        None,
        "only the opening line"
    );
    assert_eq!(opened_with("Docsy, hi", &names), None);
    assert_eq!(opened_with("I read the docs, fine", &names), None);
}
