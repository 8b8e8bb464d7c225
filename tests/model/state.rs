//! The model: what the reference expects of the system.

use super::*;

/// One exact call: its caller, conversation, tool and argument.
pub(crate) type Identity = (usize, usize, usize, i64);

#[derive(Clone, Debug, Default)]
pub(crate) struct Known {
    /// Its key, once an answer or the ledger showed it.
    pub(crate) key: Option<String>,
    /// Whether its first call needed a person (a high-risk tool, or a
    /// conversation that read untrusted output).
    pub(crate) needs_person: bool,
    /// An approval was given by someone allowed to give it.
    pub(crate) authorized: bool,
    /// Its outcome went unknown (an answer said so, or a crash after the
    /// claim), and no person said it did not happen since.
    pub(crate) unknown: bool,
    /// Effects when it went unknown.
    pub(crate) applied_at_unknown: usize,
    /// A person said it did not happen: one more run is allowed.
    pub(crate) rerun_allowed: bool,
    /// A person said it happened.
    pub(crate) happened: bool,
    /// The answers said in doubt, for the audit check.
    pub(crate) doubt_answers: usize,
    /// An approval of it was recorded in the store by a person (with every
    /// signature it needed) or by an operators' rule: not only the host's
    /// word (`confirmed`, or its approval id of a question the host may
    /// answer).
    pub(crate) decided: bool,
    /// The operators' rule approved it.
    pub(crate) ruled: bool,
}

#[derive(Default)]
pub(crate) struct Model {
    pub(crate) known: BTreeMap<Identity, Known>,
    /// The questions the answers named, as the reference knows them.
    pub(crate) questions: Vec<Question>,
    /// The test's clock: milliseconds it was moved forward in this case.
    pub(crate) v: u64,
    /// The wall clock at the case's start.
    pub(crate) base_ms: u64,
    /// The calls (and requesters) of which the store may keep a question
    /// no answer named: asked as a store failed, or by the operators'
    /// rule. What the reference says of their questions is not predicted.
    pub(crate) unseen: BTreeSet<(Identity, Option<usize>)>,
    /// The (caller, conversation) pairs that read untrusted output; with
    /// shared conversations, the caller is left out (`usize::MAX`).
    pub(crate) tainted: BTreeSet<(usize, usize)>,
    /// What the operators stopped.
    pub(crate) stopped: BTreeSet<Stopped>,
    /// The policy in force.
    pub(crate) rules: Rules,
    /// Pages counted against the rate limit, by caller (the store keeps
    /// the counts whatever policy is loaded since).
    pub(crate) pages: [u64; 2],
    /// A caller whose page the store failed to begin: counted or not, as
    /// the store says after the call (once at most).
    pub(crate) recount: Option<usize>,
    /// What the operation under way may change of the questions.
    pub(crate) leeway: Leeway,
    /// The calls made, and by whom, for [`Op::Again`].
    pub(crate) calls: Vec<(Identity, Option<usize>)>,
    /// The controls asked two people for a wipe at some time in this case.
    pub(crate) signing: bool,
}

impl Model {
    pub(crate) fn taint_scope(
        &self,
        share: bool,
        caller: usize,
        conversation: usize,
    ) -> (usize, usize) {
        if share {
            (usize::MAX, conversation)
        } else {
            (caller, conversation)
        }
    }

    /// Whether a call of `tool` (of [`TOOLS`]) by `caller` is stopped.
    pub(crate) fn is_stopped(&self, tool: usize, caller: usize) -> bool {
        self.stopped.contains(&Stopped::Tool(tool))
            || self.stopped.contains(&Stopped::Caller(caller))
    }

    /// The newest question of this call this requester asked (or, about
    /// an unknown outcome, anyone); with `others`, the newest approval
    /// question another requester asked.
    pub(crate) fn newest_question(
        &self,
        identity: Identity,
        requester: Option<usize>,
        others: bool,
    ) -> Option<&Question> {
        self.questions.iter().rev().find(|q| {
            let own = q.requester == requester || q.in_doubt;
            q.identity == identity && if others { !own } else { own }
        })
    }

    pub(crate) fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }

    pub(crate) fn question_mut(&mut self, id: &str) -> Option<&mut Question> {
        self.questions.iter_mut().find(|q| q.id == id)
    }

    /// A denial of this call by this requester that still answers its
    /// identical calls, for either reason.
    pub(crate) fn denial(&self, identity: Identity, requester: Option<usize>) -> Option<&Question> {
        self.questions.iter().find(|q| {
            q.identity == identity && q.requester == requester && !q.in_doubt && q.denies(self.v)
        })
    }

    /// The approval question of this call, requester and reason that
    /// stands: open, or decided and not carried out, within its time.
    pub(crate) fn live(
        &self,
        identity: Identity,
        requester: Option<usize>,
        reason: Option<&str>,
    ) -> Option<&Question> {
        self.questions.iter().rev().find(|q| {
            q.identity == identity
                && q.requester == requester
                && !q.in_doubt
                && q.reason.as_deref() == reason
                && q.live(self.v)
        })
    }

    /// Whether the model predicts what the store says of this call's
    /// questions for this requester.
    pub(crate) fn seen(&self, identity: Identity, requester: Option<usize>) -> bool {
        !self.unseen.contains(&(identity, requester))
    }
}

/// Takes the question `id`, named by an answer to a call of `identity` by
/// `requester`, into the reference, if it is new there: its reason, the
/// people it asks for and who may answer as its record says; when it was
/// asked, as the store wrote it, which must be now unless the model could
/// not see it asked (`clean`: the operation met no fault). A new approval
/// question while one of the same call, requester and reason stands is a
/// person asked again.
pub(crate) async fn note_question<St: Store>(
    system: &System<St>,
    model: &mut Model,
    identity: Identity,
    requester: Option<usize>,
    id: &str,
    in_doubt: bool,
    clean: bool,
) -> Checked {
    if model.question(id).is_some() {
        return Ok(());
    }
    let entry = system.stores[0]
        .inner()
        .approval(id)
        .await
        .map_err(|e| e.to_string())?;
    let Some(entry) = entry else {
        return Err(format!(
            "an answer named the question {id}, which the store does not have"
        ));
    };
    let question = &entry.approval;
    let asked_v =
        question.created_ms.saturating_sub(model.base_ms) / reference::STEP_MS * reference::STEP_MS;
    let principal = question
        .principal
        .as_ref()
        .and_then(|p| PRINCIPALS.iter().position(|name| *name == p.subject));
    if !in_doubt {
        ensure!(
            principal == requester,
            "a call of {identity:?} by {requester:?} was answered with the question {id} of \
             {:?}",
            question.principal
        );
        let seen = model.seen(identity, requester);
        ensure!(
            !seen || !clean || asked_v == model.v,
            "the question {id} was asked at {asked_v} ms on the test's clock, now {} ms",
            model.v
        );
        if seen && let Some(standing) = model.live(identity, requester, question.reason.as_deref())
        {
            return Err(format!(
                "a person is asked again ({id}) for a call whose question stands: {standing:?}"
            ));
        }
    }
    model.questions.push(Question {
        id: id.to_owned(),
        identity,
        requester: if in_doubt { principal } else { requester },
        in_doubt,
        reason: question.reason.clone(),
        asked_v,
        needed: question.answerers.people_needed(),
        host: question.answerers.host(),
        client: question.answerers.client(),
        signed: Vec::new(),
        decision: None,
        used: false,
        gone: false,
        astray: false,
        met: 0,
    });
    Ok(())
}
