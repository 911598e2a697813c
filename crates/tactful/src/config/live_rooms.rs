//! A room's policy as the operator console sets it: the keys of one
//! `[rooms."<room>"]` table, read with the file's own rules and messages,
//! and checked together with the rest of the running config (an ambient
//! persona still needs `allow_silence`, a gate still needs an agent).
//! Room `default` is the console's default layer, as `[rooms.default]` is
//! the file's.

use std::path::Path;

use tactful_config::{Checker, ConfigError, EnvValues, with_env};
use tactful_core::RoomId;
use tactful_core::policy::RoomLayer;

use super::rooms::{LayerCtx, RawRoom, check_resolved, room_layer};
use super::{Config, quote_key};

/// The most a console layer may hold, in bytes of TOML.
pub const MAX_LIVE_LAYER: usize = 16 * 1024;
/// The room name that stands for the console's default layer.
pub const DEFAULT: &str = "default";

impl Config {
    /// Reads `toml` as room `room`'s console layer. Errors name the line
    /// and column in `toml` (as `console:<line>:<column>`), with the same
    /// words `tactful check` uses for the file. `${…}` is not expanded.
    pub fn live_room_layer(&self, room: &str, toml: &str) -> Result<RoomLayer, ConfigError> {
        let path = Path::new("console");
        let check = Checker { src: toml, path };
        if toml.len() > MAX_LIVE_LAYER {
            return Err(check.nowhere(format!(
                "a room's policy is at most {MAX_LIVE_LAYER} bytes of TOML; this one has {}",
                toml.len()
            )));
        }
        if room.is_empty() || room.len() > 512 {
            return Err(check.nowhere(format!(
                "{room:?} cannot be set in the console: name one room by its id, or `default`"
            )));
        }
        let is_default = room == DEFAULT;
        let toml_error = |e: toml::de::Error| match e.span() {
            Some(span) => check.at(span, e.message().to_owned()),
            None => check.nowhere(e.message().to_owned()),
        };
        let raw: RawRoom = with_env(EnvValues::default(), || toml::from_str(toml)).map_err(toml_error)?;
        let ctx = LayerCtx {
            personas: &self.engine.personas,
            agents: &self.agents,
            check: &check,
            is_default,
        };
        let key = format!("rooms.{}", quote_key(room));
        let (layer, flushes) = room_layer(&key, raw, &ctx)?;
        if flushes.is_some() {
            return Err(check.nowhere(
                "`ambient.max_concurrent_flushes` is process-wide and read at start: set it in the file's [rooms.default.ambient]"
                    .to_owned(),
            ));
        }
        let mut table = self.engine.policies.clone();
        if is_default {
            table.live_default = Some(layer.clone());
        } else {
            table.live.insert(RoomId::new(room), layer.clone());
        }
        check_resolved(&table, &self.engine.personas, &check)?;
        Ok(layer)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    const BASE: &str = "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n\n[rooms.lobby]\nrate_limit = { replies = 2, per_seconds = 60 }\n";

    fn config() -> Config {
        Config::parse(BASE, std::path::Path::new("t.toml"), &|_| None).expect("valid")
    }

    #[test]
    fn a_live_layer_is_read_like_the_file_and_wins_key_by_key() {
        let c = config();
        let layer = c.live_room_layer("lobby", "mode = \"all\"\n").expect("valid");
        let mut table = c.engine.policies.clone();
        table.live.insert("lobby".into(), layer);
        let p = table.resolve(&"lobby".into(), &"docs".into());
        assert_eq!(p.mode, tactful_core::Mode::All);
        assert_eq!(p.rate_limit.map(|r| r.replies), Some(2), "the file's keys stay");
    }

    #[test]
    fn the_consoles_default_layer_is_under_the_rooms_of_the_file() {
        let c = config();
        let layer = c
            .live_room_layer(
                "default",
                "mode = \"all\"\nrate_limit = { replies = 9, per_seconds = 60 }\n",
            )
            .expect("valid");
        let mut table = c.engine.policies.clone();
        table.live_default = Some(layer);
        let p = table.resolve(&"anywhere".into(), &"docs".into());
        assert_eq!(p.mode, tactful_core::Mode::All);
        let lobby = table.resolve(&"lobby".into(), &"docs".into());
        assert_eq!(
            lobby.mode,
            tactful_core::Mode::All,
            "the lobby's file layer leaves mode"
        );
        assert_eq!(
            lobby.rate_limit.map(|r| r.replies),
            Some(2),
            "and sets its own rate limit"
        );
    }

    #[test]
    fn a_bad_live_layer_gets_the_files_message() {
        let c = config();
        for (toml, says) in [
            ("mode = \"shout\"\n", "console:1:8: unknown variant `shout`"),
            (
                "mode = \"ambient\"\nallow_silence = false\n",
                "needs allow_silence = true",
            ),
            ("personas.nobody = { mode = \"all\" }\n", "names no persona"),
            ("rate_limit = { replies = 0, per_seconds = 60 }\n", "console:1"),
            ("[[", "console:1"),
        ] {
            let e = c.live_room_layer("lobby", toml).expect_err(toml).to_string();
            assert!(e.contains(says), "{toml:?} → {e}");
        }
        assert!(c.live_room_layer("", "mode = \"all\"").is_err());
        let e = c
            .live_room_layer("default", "ambient = { max_concurrent_flushes = 3 }\n")
            .expect_err("process-wide")
            .to_string();
        assert!(e.contains("process-wide and read at start"), "{e}");
        assert!(
            c.live_room_layer("lobby", &"#".repeat(20_000))
                .expect_err("big")
                .to_string()
                .contains("at most")
        );
    }
}
