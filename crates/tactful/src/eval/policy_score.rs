//! The console's policy panel: how the policy in force and a proposed one
//! score on a room's marked messages, with `tactful eval`'s own code.
//!
//! A score in the console must not call a model for each Try: agents that
//! run offline (scripts, and `kb` agents quoting their documents) run as
//! they are; any other is stood in for by one that answers whenever it is
//! asked (and, as a reply gate, lets everything through). The score then
//! says what the policy lets reach the agents, which is what a policy
//! change moves; the answer names the agents stood in for. Hooks and
//! schedules are left out, as the dry run leaves them: a Try starts no
//! program.

use serde_json::{Value, json};
use tactful_agents::{ScriptAgent, ScriptRule};
use tactful_core::PolicyTable;

use super::render::score_json;
use super::{EvalOptions, evaluate};
use crate::config::{AgentConfig, Config};

/// `config` with every agent that would call out stood in for, and the
/// names of those.
fn offline(config: &Config) -> (Config, Vec<String>) {
    let mut config = config.clone();
    let mut stood_in = Vec::new();
    let any = regex::Regex::new("").expect("the empty pattern");
    for (name, agent) in config.agents.iter_mut() {
        match agent {
            AgentConfig::Script(_) => continue,
            // A kb answering through a model quotes its documents instead.
            AgentConfig::Kb { answer_with, .. } => {
                if answer_with.take().is_some() {
                    stood_in.push(name.clone());
                }
                continue;
            }
            _ => stood_in.push(name.clone()),
        }
        *agent = AgentConfig::Script(ScriptAgent::new(vec![ScriptRule {
            when: any.clone(),
            // A reply gate reads "REPLY"; a turn answers its message.
            reply: "REPLY".to_owned(),
            delay: std::time::Duration::ZERO,
            fail: false,
        }]));
    }
    stood_in.sort();
    (config, stood_in)
}

/// Scores the labelled file `text` (as the console exports it) under
/// `now` and `proposed`: `{"labels", "now", "proposed", "stood_in"}`.
pub fn policy_score(
    config: &Config,
    now: PolicyTable,
    proposed: PolicyTable,
    text: &str,
) -> anyhow::Result<Value> {
    let (mut config, stood_in) = offline(config);
    // A Try starts nothing outside: hooks (a command hook is a program)
    // and schedules are left out, as the dry run leaves them out.
    config.engine.hooks.clear();
    config.engine.schedules.clear();
    let ids: Vec<&str> = config.engine.personas.iter().map(|p| p.id.as_str()).collect();
    let scenario = crate::scenario::parse(text, std::path::Path::new("console labels"), &ids)?;
    let options = EvalOptions { seed: 0, jobs: 1 };
    config.engine.policies = now;
    let before = evaluate(&config, scenario.clone(), options, None)?;
    config.engine.policies = proposed;
    let after = evaluate(&config, scenario, options, None)?;
    Ok(json!({
        "labels": before.all.scored,
        "now": score_json(&before.all, before.messages),
        "proposed": score_json(&after.all, after.messages),
        "stood_in": stood_in,
    }))
}
