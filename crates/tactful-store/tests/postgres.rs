//! What only the PostgreSQL store does: versioned migrations that several
//! processes may start at once, connections lost and made again, errors
//! that name the server without its password, the claim on a database.

use crate::support;

use tactful_store::{ClaimError, Location, Op, Store, StoreError, claim};

use support::Place;

fn state(key: &str, value: &str) -> Op {
    Op::PlatformState {
        key: key.into(),
        value: value.into(),
    }
}

#[test]
fn a_database_from_a_newer_tactful_is_refused_with_a_clear_error() {
    let Some(place) = Place::postgres() else { return };
    drop(place.open());
    place.exec("UPDATE tactful_schema SET version = 99");
    let err = Store::open_at(&place.location()).expect_err("refused");
    assert!(
        matches!(
            err,
            StoreError::TooNew {
                found: 99,
                known: 1..99,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade tactful"), "{err}");
}

#[test]
fn processes_starting_at_once_migrate_the_database_once() {
    let Some(place) = Place::postgres() else { return };
    let at = place.location();
    let starts: Vec<_> = (0..4)
        .map(|i| {
            let at = at.clone();
            std::thread::spawn(move || {
                let mut store = Store::open_at(&at).expect("opens");
                store.apply(&[state(&format!("k{i}"), "v")]).expect("writes");
                store.id().expect("an id")
            })
        })
        .collect();
    let ids: Vec<String> = starts.into_iter().map(|t| t.join().expect("started")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one store, one id: {ids:?}");
    assert_eq!(
        place.open().platform_state().expect("reads").len(),
        5,
        "4 keys and the id"
    );
}

#[test]
fn a_server_that_does_not_answer_is_named_without_the_password() {
    // Port 1 on the loopback: nothing listens there.
    let at = Location::postgres("postgres://tactful:hunter2@127.0.0.1:1/chat").expect("valid");
    let err = Store::open_at(&at).expect_err("no server");
    let text = err.to_string();
    assert!(text.contains("postgres://tactful:…@127.0.0.1:1/chat"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(err.is_transient(), "worth trying again: {text}");
}

#[test]
fn a_lost_connection_is_made_again_and_nothing_is_half_written() {
    let Some(place) = Place::postgres() else { return };
    let mut store = place.open();
    store.apply(&[state("before", "1")]).expect("writes");
    // The server ends the store's session (a restart, a failover, an
    // operator's pg_terminate_backend).
    let schema = place.schema().expect("a schema");
    place.exec(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = '{schema}' AND pid <> pg_backend_pid()"
    ));
    let batch = [state("after", "1"), state("after", "2")];
    match store.apply(&batch) {
        Ok(()) => {}
        Err(e) => {
            assert!(e.is_transient(), "a lost connection is worth trying again: {e}");
            store.apply(&batch).expect("connected again");
        }
    }
    let saved = place.open().platform_state().expect("reads");
    assert_eq!((saved["before"].as_str(), saved["after"].as_str()), ("1", "2"));
}

#[test]
fn one_service_claims_a_database_and_schema_and_says_who_holds_it() {
    let Some(place) = Place::postgres() else { return };
    let Some(other) = Place::postgres() else { return };
    let at = place.location();
    let first = claim(&at, "http://10.0.0.5:7878/").expect("claimed");
    let err = claim(&at, "http://10.0.0.6:7878/").expect_err("taken");
    assert!(matches!(err, ClaimError::Taken { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("already using the store"), "{text}");
    assert!(
        text.contains("http://10.0.0.5:7878/"),
        "says where the first one is: {text}"
    );
    let beside = claim(&other.location(), "beside").expect("another schema is another store");
    drop(first);
    claim(&at, "again").expect("free once the first has gone");
    drop(beside);
}
