//! tactful's integration tests, as one test binary.
//!
//! Each file beside this one is a module of it (`cargo test -p tactful
//! --test it irc::` runs one file's tests). One binary links the service
//! once instead of once per file: thirty-five links of the whole service
//! were most of a clean build's time and disk (see BENCHMARKS.md, "The
//! build folder"). nextest still runs every test in a process of its own,
//! so tests that set environment variables or install a global subscriber
//! cannot meet.
//!
//! The crate's `autotests = false` means a new file here is compiled only
//! once it is listed below; `layout::every_test_file_is_compiled` fails
//! otherwise (in every crate of the workspace).

#![recursion_limit = "256"]

// Set-up and doubles the files share.
mod cluster_setup;
mod common;
mod discord_double;
mod irc_setup;
mod mail_setup;
mod matrix_setup;
mod mattermost_double;
mod slack_double;
mod telegram_double;
mod telegram_setup;
mod xmpp_setup;
mod zulip_double;
use cluster_setup::leases;

// The tests, one module per file.
mod agents;
mod browser;
mod budget_live;
mod circles;
mod cli;
mod cluster;
mod cluster_accounts;
mod cluster_budget;
mod cluster_console;
mod cluster_cut;
mod cluster_email;
mod cluster_irc;
mod cluster_matrix;
mod cluster_notes;
mod cluster_slack;
mod cluster_xmpp;
mod console;
mod console_labels;
mod console_live;
mod discord;
mod docs;
mod doctor;
mod documented_commands;
mod email;
mod email_config;
mod eval;
mod examples;
mod hooks;
mod irc;
mod kill_loop;
mod layout;
mod live;
mod live_replay;
mod matrix;
mod mattermost;
mod mattermost_client;
mod reactions_live;
mod reload;
mod restart;
mod schedules;
mod secrets;
mod slack;
mod store_health;
mod telegram;
mod telegram_emulator;
mod xmpp;
mod xmpp_config;
mod zulip;
mod zulip_client;
