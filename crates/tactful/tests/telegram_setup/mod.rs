//! What both Telegram suites share: the bots, the chats, the config (two
//! personas with script agents, rooms for each case) and starting tactful.
#![allow(dead_code)] // each suite uses some of it

use std::path::Path;

use crate::common::Reaper;

pub const DOCS: &str = "7001:AAHdocs-test-token-secret";
pub const CHEF: &str = "7002:AAHchef-test-token-secret";

/// The forum supergroup, the ambient group, the banter group.
pub const TEAM: i64 = -1001;
pub const AMBIENT: i64 = -1002;
pub const BANTER: i64 = -1003;

pub fn config(api_url: &str, store: &Path, metrics_port: u16) -> String {
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.telegram]
api_url = "{api_url}"
poll_timeout_secs = 5

[[persona]]
id = "docs"
agent = "docs"
telegram = {{ token = "${{DOCS_TOKEN}}" }}

[[persona]]
id = "chef"
agent = "chef"
telegram = {{ token = "${{CHEF_TOKEN}}" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "(?i)format", reply = "Use **REJECT_HTML** carefully." }},
  # Slow enough that "typing…" is shown first (an instant answer needs none).
  {{ when = "how do I reset", reply = "docs answers {{msg_id}}", delay_ms = 300 }},
  {{ when = "", reply = "docs answers {{msg_id}}" }},
]

[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "chef answers {{msg_id}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms."tg:{TEAM}"]
allowed_users = ["@alice", "tg:222"]

[rooms."tg:{AMBIENT}"]
mode = "ambient"
ambient = {{ flush_messages = 1, cooldown_seconds = 0 }}

[rooms."tg:{BANTER}"]
mode = "all"
ignore_bots = false
max_bot_turns = 3
"##,
        store = store.display(),
    )
}

pub fn start_tactful(dir: &Path, config: &str) -> Reaper {
    crate::common::run_tactful(dir, config, &[("DOCS_TOKEN", DOCS), ("CHEF_TOKEN", CHEF)])
}
