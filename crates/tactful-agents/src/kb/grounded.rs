//! A model that answers from the documentation: `kind = "kb"` with
//! `answer_with = "<agent>"`.
//!
//! The kb's search picks the sections a turn's questions are about and puts
//! them before the model (retrieval as context), which answers in its own
//! words and cites them. What the docs say nothing about costs nothing in
//! a batch nobody addressed to it: the model is not called, the persona
//! stays silent, as the offline kb does. Asked directly, the model answers
//! either way (and is told the docs have nothing on it).

use std::sync::Arc;

use futures::future::BoxFuture;
use tactful_core::TurnRequest;

use super::KbAgent;
use crate::{Agent, AgentError, AgentReply, Deltas};

/// The kb's search in front of a model.
#[derive(Debug)]
pub struct GroundedAgent {
    kb: KbAgent,
    model: Arc<dyn Agent>,
}

impl GroundedAgent {
    /// `model` answers, with what `kb` finds before it.
    pub fn new(kb: KbAgent, model: Arc<dyn Agent>) -> Self {
        GroundedAgent { kb, model }
    }
}

/// Said to the model when the docs have nothing on a question put to it.
const NOTHING_FOUND: &str = "The documentation has no section on the message below. If it is about this product, say you could not find it in the docs rather than guess.";

impl Agent for GroundedAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let context = match self.kb.context_for(turn) {
                Some(c) => c,
                None if !turn.addressed => {
                    let silent = turn.silence_token.as_deref().unwrap_or("NO_REPLY").to_owned();
                    return Ok(AgentReply::text(silent));
                }
                None => NOTHING_FOUND.to_owned(),
            };
            let mut grounded = turn.clone();
            grounded.prompt = Arc::from(format!("{}\n\n{context}", turn.prompt).as_str());
            self.model.run(&grounded, deltas).await
        })
    }
}
