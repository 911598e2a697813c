//! Who answers a replay's turns: script agents on the virtual clock, every
//! other backend for real (taking no virtual time), a few at once, with an
//! optional cache of their answers.
//!
//! Calls the engine asks for at the same instant are independent of each
//! other, so they run together (at most `jobs` at a time) and their answers
//! are handed back in the order they were asked for: the trace is the same
//! whatever `jobs` is.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use tactful_agents::Usage;
use tactful_core::{AgentResult, TurnRequest};

use super::answer_cache::AnswerCache;
use crate::config::{AgentConfig, Config};

/// A turn's answer: its result, its virtual thinking time, and the token
/// usage the backend reported.
pub(super) type Answer = (AgentResult, Duration, Option<Usage>);

/// Runs agent turns for the replay.
pub(super) struct Agents<'c> {
    config: &'c Config,
    live: std::collections::HashMap<String, Arc<dyn tactful_agents::Agent>>,
    runtime: Option<tokio::runtime::Runtime>,
    cache: Option<&'c mut AnswerCache>,
    jobs: usize,
}

impl<'c> Agents<'c> {
    pub(super) fn new(config: &'c Config, jobs: usize, cache: Option<&'c mut AnswerCache>) -> Self {
        Agents {
            config,
            live: Default::default(),
            runtime: None,
            cache,
            jobs: jobs.max(1),
        }
    }

    /// Runs the turns asked for at one instant, `jobs` real calls at a
    /// time; answers in the order of `reqs`. An answer in the cache is
    /// not asked again; a new one (not a failure) is added to it.
    pub(super) fn run_all(&mut self, reqs: &[&TurnRequest]) -> anyhow::Result<Vec<Answer>> {
        let mut answers: Vec<Option<Answer>> = Vec::with_capacity(reqs.len());
        // (index, backend, cache key) of the calls to make for real.
        let mut to_call = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            let name = req.agent.as_ref();
            let Some(agent) = self.config.agents.get(name) else {
                // The config check guarantees every persona's agent
                // exists; if the engine ever asks for another, the turn
                // fails visibly.
                let failed = AgentResult::Failed(format!("no agent named {name:?}"));
                answers.push(Some((failed, Duration::ZERO, None)));
                continue;
            };
            if let AgentConfig::Script(script) = agent {
                let a = script.answer(req);
                answers.push(Some((a.result, a.delay, None)));
                continue;
            }
            // A kb quoting its documents runs here, offline and free: its
            // answers come from this binary's code, which a cache file
            // made by another version would not match.
            let cached = !matches!(
                agent,
                AgentConfig::Kb {
                    answer_with: None,
                    ..
                }
            );
            // The key (a prompt rendered and hashed) only when there is a
            // cache to look in: a plain replay does not pay for it.
            let key = (cached && self.cache.is_some())
                .then(|| AnswerCache::key(name, agent, req, &self.config.contract));
            if let Some(hit) = key
                .as_ref()
                .and_then(|k| self.cache.as_mut().and_then(|c| c.get(k)))
            {
                answers.push(Some((hit.0, Duration::ZERO, hit.1)));
                continue;
            }
            let backend = self
                .live
                .entry(name.to_owned())
                .or_insert_with(|| agent.build(&self.config.contract))
                .clone();
            answers.push(None);
            to_call.push((i, backend, key));
        }
        if !to_call.is_empty() {
            let jobs = self.jobs;
            let calls = to_call.iter().map(|(i, backend, key)| {
                let req = reqs[*i];
                let backend = backend.clone();
                async move {
                    let done = match backend.run(req, &mut tactful_agents::NoDeltas).await {
                        Ok(reply) => {
                            let usage = reply.usage;
                            (reply.into_result(), usage)
                        }
                        Err(e) => (e.into_result(), None),
                    };
                    (*i, key, done)
                }
            });
            self.ensure_runtime()?;
            let runtime = self.runtime.as_ref().expect("started above");
            let cache = &mut self.cache;
            // Each answer is kept as it comes: a run cut short keeps what
            // it paid for.
            runtime.block_on(async {
                let mut done = futures::stream::iter(calls).buffered(jobs);
                while let Some((i, key, (result, usage))) = done.next().await {
                    if let (Some(cache), Some(key)) = (cache.as_mut(), key) {
                        cache.put(key, reqs[i].agent.as_ref(), &result, usage)?;
                    }
                    answers[i] = Some((result, Duration::ZERO, usage));
                }
                anyhow::Ok(())
            })?;
        }
        Ok(answers
            .into_iter()
            .map(|a| a.expect("every turn answered above"))
            .collect())
    }

    /// Runs `f` to its end on the replay's async runtime (started the first
    /// time something needs it: a live backend, a hook).
    pub(super) fn block_on<F: std::future::Future>(&mut self, f: F) -> anyhow::Result<F::Output> {
        self.ensure_runtime()?;
        Ok(self.runtime.as_ref().expect("created above").block_on(f))
    }

    fn ensure_runtime(&mut self) -> anyhow::Result<()> {
        if self.runtime.is_none() {
            self.runtime = Some(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime for agents and hooks")?,
            );
        }
        Ok(())
    }
}
