//! An error's innermost cause, as people read it: HTTP clients wrap "the
//! server refused the connection" three layers deep, under a top message
//! ("error sending request") that says nothing about what to fix.

/// The innermost cause of `e`: "connection refused" for a refused
/// connection, else the deepest source's own words.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let cause = innermost(e);
    match cause.downcast_ref::<std::io::Error>() {
        Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        _ => cause.to_string(),
    }
}

/// What went wrong reaching `url`, as people read it and can act on:
/// `connection refused: http://127.0.0.1:9/v1/chat/completions`. The
/// address is shown without what could be a secret in it (a user and
/// password, a query, a fragment).
pub fn reaching(e: &(dyn std::error::Error + 'static), url: &str) -> String {
    format!("{}: {}", root_cause(e), shown_url(url))
}

/// `e` as people read it: when it failed on the way (a refused or broken
/// connection, a name that does not resolve: an I/O error at its root),
/// [`reaching`] `url`; otherwise (the server answered: a wrong token, a
/// refusal) its own words.
pub fn explain(e: &(dyn std::error::Error + 'static), url: &str) -> String {
    if innermost(e).downcast_ref::<std::io::Error>().is_some() {
        reaching(e, url)
    } else {
        e.to_string()
    }
}

/// The last error of `e`'s source chain.
fn innermost<'e>(e: &'e (dyn std::error::Error + 'static)) -> &'e (dyn std::error::Error + 'static) {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause
}

/// `url` without its user, password, query and fragment.
pub fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_address_is_shown_without_its_secrets() {
        let refused = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(
            reaching(
                &refused,
                "http://user:pw@127.0.0.1:9/v1/chat/completions?key=sk-1#x"
            ),
            "connection refused: http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(shown_url("https://slack.com/api"), "https://slack.com/api");
        assert_eq!(shown_url("not a url"), "not a url");
        assert_eq!(shown_url("http://a@b@host"), "http://host");
        assert_eq!(explain(&refused, "http://h/x"), "connection refused: http://h/x");
        assert_eq!(
            explain(&std::fmt::Error, "http://h/x"),
            std::fmt::Error.to_string(),
            "not on the way: its own words"
        );
    }

    #[test]
    fn the_innermost_cause_is_named() {
        let refused = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(root_cause(&refused), "connection refused");
        let other = Outer(std::io::Error::other("dns error: no such host"));
        assert_eq!(root_cause(&other), "dns error: no such host");
        assert_eq!(
            root_cause(&std::fmt::Error),
            "an error occurred when formatting an argument"
        );
    }
}
