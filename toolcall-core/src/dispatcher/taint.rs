//! Untrusted output: whether it taints a call, and what a session remembers
//! of it once an untrusted tool has answered.

use std::collections::BTreeSet;

use serde_json::Value;

use super::stages::{Stage, Stages};
use crate::policy::{Caller, Taint};
use crate::result::{Code, ToolResult};
use crate::store::{Exposure, Store, TaintSource};
use crate::taint;
use crate::tool::ToolSpec;

/// What the session's untrusted output means for a call, before its
/// arguments are looked at.
pub(super) enum SessionTaint {
    /// Nothing: the call is not a side effect, the caller's level is off,
    /// or the session read no untrusted output.
    Clean,
    /// The whole session is tainted (`Session`): the call is, whatever its
    /// arguments.
    Whole,
    /// The session read untrusted output and the caller's level judges
    /// values: the call is tainted if its arguments carry one
    /// ([`Stages::tainted_arguments`]).
    Values,
}

impl<St: Store> Stages<St> {
    /// Whether untrusted output can taint a call of `spec` in `session`, as
    /// `caller`'s level judges it. Only side effects are ever tainted; the
    /// call's arguments are not read here.
    ///
    /// `known`: whether the session read untrusted output, when the call's
    /// start found out already; the store is asked only when it did not.
    pub(super) async fn session_taint(
        &self,
        spec: &'static ToolSpec,
        session: &str,
        caller: &Caller,
        known: Option<bool>,
    ) -> Stage<SessionTaint> {
        if !spec.side_effect() {
            return Ok(SessionTaint::Clean);
        }
        let level = caller.policy().taint_level();
        if level == Taint::Off {
            return Ok(SessionTaint::Clean);
        }
        // Most sessions never read untrusted output: that first (unless the
        // call's start found out); the arguments are fingerprinted (regexes
        // and a digest per token, `tainted_arguments`) only in a session
        // that did.
        let any = match known {
            Some(any) => any,
            None => {
                self.store
                    .tainted(session, &[])
                    .await
                    .map_err(|error| self.store_unavailable(spec.name(), &error))?
                    .any
            }
        };
        Ok(match (any, level) {
            (false, _) => SessionTaint::Clean,
            (true, Taint::Session) => SessionTaint::Whole,
            (true, _) => SessionTaint::Values,
        })
    }

    /// The arguments of a call of `tool` (as JSON) that carry a value read
    /// in `session`'s untrusted output: `Some` (never empty) when any does,
    /// and the call is tainted.
    pub(super) async fn tainted_arguments(
        &self,
        tool: &str,
        session: &str,
        arguments: &Value,
    ) -> Stage<Option<Vec<String>>> {
        let found = taint::of_arguments(arguments);
        if found.is_empty() {
            return Ok(None);
        }
        let prints: Vec<String> = found
            .iter()
            .flat_map(|(_, prints)| prints.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let hit = self
            .store
            .tainted(session, &prints)
            .await
            .map_err(|error| self.store_unavailable(tool, &error))?;
        if hit.seen.is_empty() {
            return Ok(None);
        }
        let seen: BTreeSet<&String> = hit.seen.iter().collect();
        let mut fields: Vec<String> = found
            .into_iter()
            .filter(|(_, prints)| prints.iter().any(|p| seen.contains(p)))
            .map(|(path, _)| path)
            .collect();
        fields.dedup();
        Ok(Some(fields))
    }

    /// Names in an untrusted tool's successful result the parts that carry
    /// something (`result.untrusted`), when the tool declares its untrusted
    /// parts: the model is told which text strangers wrote, and only those
    /// parts taint the session ([`remember_untrusted`](Self::remember_untrusted)).
    pub(super) fn mark_untrusted(spec: &'static ToolSpec, result: &mut ToolResult) {
        let parts = spec.untrusted_parts();
        if parts.is_empty() || !result.ok || result.code != Code::Ok {
            return;
        }
        result.untrusted = taint::filled_parts(&result.data, parts);
    }

    /// After an untrusted tool ran: its output's values taint the session
    /// (`Values`), or the session is marked (`Session`). A tool that
    /// declares its untrusted parts taints only through a part with
    /// something in it ([`mark_untrusted`](Self::mark_untrusted) named
    /// them), and only with their values. A store that fails here fails the
    /// call: an untrusted output the session does not remember would let
    /// its values through.
    pub(super) async fn remember_untrusted(
        &self,
        spec: &'static ToolSpec,
        session: &str,
        caller: &Caller,
        given: Option<&Value>,
        call_id: Option<&str>,
        result: &ToolResult,
    ) -> Stage<()> {
        if !spec.untrusted_output() || !result.ok || result.code != Code::Ok {
            return Ok(());
        }
        let by_part = !spec.untrusted_parts().is_empty();
        if by_part && result.untrusted.is_empty() {
            return Ok(());
        }
        let prints: Vec<String> = match caller.policy().taint_level() {
            Taint::Off => return Ok(()),
            Taint::Session => Vec::new(),
            _ => {
                let mut prints = BTreeSet::new();
                if by_part {
                    for pointer in &result.untrusted {
                        if let Some(value) = taint::part(&result.data, pointer) {
                            taint::of_output(value, &mut prints);
                        }
                    }
                } else {
                    taint::of_output(
                        &Value::Object(serde_json::Map::clone(&result.data)),
                        &mut prints,
                    );
                }
                if let Some(own) = given.map(taint::of_given) {
                    prints.retain(|print| !own.contains(print));
                }
                if by_part && prints.is_empty() {
                    // The parts held only what the caller gave the tool:
                    // nothing a stranger wrote is left to remember.
                    return Ok(());
                }
                prints.into_iter().collect()
            }
        };
        self.store
            .add_taint(&Exposure {
                session,
                fingerprints: &prints,
                source: &source_of(spec, call_id, result),
            })
            .await
            .map_err(|error| self.store_unavailable(spec.name(), &error))
    }
}

/// Where the session's taint comes from: `spec`'s output (the parts that
/// carried text, for a tool that names its untrusted parts), its head kept
/// (bounded) for the person asked about a later call.
fn source_of(spec: &ToolSpec, call_id: Option<&str>, result: &ToolResult) -> TaintSource {
    let parts: Vec<&str> = result.untrusted.iter().map(String::as_str).collect();
    TaintSource::from_output(
        spec.name(),
        call_id,
        crate::store::now_ms(),
        &Value::Object(serde_json::Map::clone(&result.data)),
        &parts,
    )
}
