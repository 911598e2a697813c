//! An error's innermost cause, as people read it: HTTP clients wrap "the
//! server refused the connection" three layers deep, under a top message
//! ("error sending request") that says nothing about what to fix.

/// The innermost cause of `e`: "connection refused" for a refused
/// connection, else the deepest source's own words.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    match cause.downcast_ref::<std::io::Error>() {
        Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        _ => cause.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Outer(#[source] std::io::Error);

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
